package ucli

import (
	"fmt"
	"slices"
	"strings"
)

// The command line as GNU getopt_long reads uftrace's (getopt(3),
// "getopt_long"): short options cluster (-la) and take their value
// attached or as the next word (-D3, -D 3; -D=3 is the value "=3"), long
// options take theirs after '=' or as the next word (--depth=3, --depth
// 3) and may be shortened to any prefix that names one option
// (--no-lib), "--" ends the options, and so does the first word that is
// not one (the program: what follows is its own command line).

// spec is one option as the parser sees it.
type spec struct {
	long  string
	short byte // 0: none
	arg   bool // takes a value
	exact bool // only its whole name selects it, no prefix
	stop  bool // the options end after it (sp-rtrace's -x: the program follows); a "--" right after it goes too
	// optVal: a switch that takes a value in --name=VALUE only
	// (urfave/cli's --flag=false).
	optVal bool
	// eqShort: -X=VALUE gives VALUE (Go's flag package took it so), not
	// "=VALUE" as getopt does.
	eqShort bool
}

// occurrence is one option found on the command line.
type occurrence struct {
	spec   *spec
	typed  string // as the user wrote it: "-D", "--dep"
	value  string
	valued bool // a value was given (an optVal switch's)
}

// afterStop is what follows a stop option: the words after it, without
// a "--" right after it.
func afterStop(rest []string) []string {
	if len(rest) > 0 && rest[0] == "--" {
		return rest[1:]
	}
	return rest
}

// parseError is a command-line mistake, said in one line.
type parseError struct{ msg string }

func (e *parseError) Error() string { return e.msg }

// getopt reads the options at the start of args and returns them in order
// with the words left: the program and its arguments. Lenient, it reads
// past what it cannot take (an unknown or ambiguous long option is taken
// for a switch, an unknown letter ends its cluster, a value missing at the
// end ends the options) and returns no error: it only finds where the
// options end (FirstWord).
func getopt(specs []spec, args []string, lenient bool) ([]occurrence, []string, error) {
	var occ []occurrence
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return occ, args[i+1:], nil
		case strings.HasPrefix(a, "--"):
			name, value, hasValue := strings.Cut(a[2:], "=")
			s, err := findLong(specs, name)
			if err != nil {
				if lenient {
					continue
				}
				return nil, nil, err
			}
			o := occurrence{spec: s, typed: "--" + name}
			switch {
			case (s.arg || s.optVal) && hasValue:
				o.value, o.valued = value, true
			case s.arg:
				if i+1 >= len(args) {
					if lenient {
						return occ, nil, nil
					}
					return nil, nil, &parseError{fmt.Sprintf("option --%s needs a value (--%s=VALUE)", s.long, s.long)}
				}
				i++
				o.value, o.valued = args[i], true
			case hasValue && !lenient:
				return nil, nil, &parseError{fmt.Sprintf("option --%s takes no value (%q given)", s.long, value)}
			}
			occ = append(occ, o)
			if s.stop {
				return occ, afterStop(args[i+1:]), nil
			}
		case len(a) > 1 && a[0] == '-':
		cluster:
			for j := 1; j < len(a); j++ {
				s := findShort(specs, a[j])
				switch {
				case s == nil && lenient:
					break cluster
				case s == nil:
					return nil, nil, &parseError{unknownShort(a, j)}
				}
				o := occurrence{spec: s, typed: "-" + string(a[j])}
				if s.arg {
					o.valued = true
					switch {
					case j+1 < len(a) && s.eqShort && a[j+1] == '=':
						o.value = a[j+2:]
					case j+1 < len(a):
						o.value = a[j+1:]
					case i+1 < len(args):
						i++
						o.value = args[i]
					case lenient:
						return occ, nil, nil
					default:
						return nil, nil, &parseError{fmt.Sprintf("option -%c needs a value", a[j])}
					}
					occ = append(occ, o)
					break
				}
				occ = append(occ, o)
				if s.stop && j == len(a)-1 {
					return occ, afterStop(args[i+1:]), nil
				}
			}
		default:
			return occ, args[i:], nil
		}
	}
	return occ, nil, nil
}

// findLong finds the option a long name (or a prefix of one) names.
func findLong(specs []spec, name string) (*spec, error) {
	if name == "" {
		return nil, &parseError{"option -- with '=': no name"}
	}
	var matches []*spec
	for i := range specs {
		s := &specs[i]
		if s.long == name {
			return s, nil
		}
		if !s.exact && strings.HasPrefix(s.long, name) {
			matches = append(matches, s)
		}
	}
	switch len(matches) {
	case 1:
		return matches[0], nil
	case 0:
		msg := fmt.Sprintf("unknown option --%s", name)
		if near := nearest(specs, name); near != "" {
			msg += fmt.Sprintf(" (did you mean --%s?)", near)
		}
		return nil, &parseError{msg}
	}
	names := make([]string, len(matches))
	for i, m := range matches {
		names[i] = "--" + m.long
	}
	slices.Sort(names)
	if len(names) > 6 {
		names = append(names[:6], "...")
	}
	return nil, &parseError{fmt.Sprintf("option --%s is ambiguous: %s", name, strings.Join(names, ", "))}
}

func findShort(specs []spec, c byte) *spec {
	for i := range specs {
		if specs[i].short == c {
			return &specs[i]
		}
	}
	return nil
}

// unknownShort says that the letter at j of the word a is no option.
func unknownShort(a string, j int) string {
	if len(a) > 2 {
		return fmt.Sprintf("unknown option -%c (in %s; long options take two dashes)", a[j], a)
	}
	return fmt.Sprintf("unknown option -%c", a[j])
}

// nearest is the long option closest to a mistyped name: at most two
// edits away (a third for long names), "" when none is.
func nearest(specs []spec, name string) string {
	best, bestD := "", 3
	if len(name) >= 10 {
		bestD = 4
	}
	for _, s := range specs {
		if d := distance(name, s.long); d < bestD {
			best, bestD = s.long, d
		}
	}
	if best != "" || len(name) < 4 {
		return best
	}
	// A word of a longer name: --leaks for --filter-leaks.
	for _, s := range specs {
		for _, part := range strings.Split(s.long, "-") {
			if len(part) >= 3 && (strings.Contains(name, part) || distance(name, part) <= 1) {
				return s.long
			}
		}
	}
	return ""
}

// distance is the Levenshtein distance between a and b (insertions,
// deletions and substitutions of bytes).
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// FirstWord is the index in args of the first word that is not an option
// or an option's value (the verb, or the program), -1 when there is none
// ("--" ends the options: the word after it). It reads past options it
// does not know, taking them for switches (getopt's lenient mode): it
// only finds where the options end.
func FirstWord(args []string) int {
	_, rest, _ := getopt(specs, args, true)
	if len(rest) == 0 {
		return -1
	}
	return len(args) - len(rest)
}

// Distance is the edit distance between two words (for suggestions).
func Distance(a, b string) int { return distance(a, b) }

// LongName is the long option a word names ("--opt" and "--opt-file=F"
// name opt-file), "" when it names none or is no long option.
func LongName(word string) string {
	if !strings.HasPrefix(word, "--") || word == "--" {
		return ""
	}
	name, _, _ := strings.Cut(word[2:], "=")
	s, err := findLong(specs, name)
	if err != nil {
		return ""
	}
	return s.long
}

// Opt is an option of another command line read the same way (Getopt):
// its long name ("" for none), its letter (0 for none), whether it takes
// a value, and whether the options end after it.
type Opt struct {
	Long  string
	Short byte
	Arg   bool
	Stop  bool
	// OptVal: a switch that may take a value in --name=VALUE (--flag=false).
	OptVal bool
	// EqShort: -X=VALUE gives VALUE, not "=VALUE".
	EqShort bool
}

// Occurrence is an option Getopt found: the Opt, as typed, with its value
// (Valued: one was given).
type Occurrence struct {
	Opt
	Typed, Value string
	Valued       bool
}

// Getopt reads the options at the start of args as getopt_long reads
// uftrace's (clusters, attached values, unambiguous prefixes of long
// names, "--"): the options found, in order, and the words after them.
// An unknown or ambiguous option, or a value missing or given to a
// switch, is an error of one line, with the closest long option.
func Getopt(opts []Opt, args []string) ([]Occurrence, []string, error) {
	specs := make([]spec, len(opts))
	for i, o := range opts {
		specs[i] = spec{long: o.Long, short: o.Short, arg: o.Arg, exact: o.Long == "", stop: o.Stop, optVal: o.OptVal, eqShort: o.EqShort}
	}
	occ, rest, err := getopt(specs, args, false)
	if err != nil {
		return nil, nil, err
	}
	out := make([]Occurrence, len(occ))
	for i, o := range occ {
		for k := range specs {
			if &specs[k] == o.spec {
				out[i] = Occurrence{Opt: opts[k], Typed: o.typed, Value: o.value, Valued: o.valued}
			}
		}
	}
	return out, rest, nil
}
