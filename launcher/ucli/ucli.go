// Package ucli reads uftrace's command line for `rtrace record`, `rtrace
// live` and `rtrace PROG`: the options of uftrace v0.13's record and live
// (uftrace-record(1), uftrace-live(1), and uftrace(1)'s global ones),
// spelled as getopt_long reads them (getopt.go). Each option is applied
// with uftrace's meaning, kept for uftrace replay (live), accepted where
// it changes nothing in rtrace, or refused in one line that says why.
// README.md ("uftrace's options") has the table.
package ucli

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"rtrace/launcher"
)

// Cmd is a command line of `rtrace record` or `rtrace live`, read.
type Cmd struct {
	Options launcher.Options
	// Replay holds the options uftrace replay takes too, as given: live
	// shows its trace with them.
	Replay []string
	// Help, Usage, Version, ListEvents and ListModules ask for those
	// instead of a run.
	Help, Usage, Version, ListEvents, ListModules bool
	// Ignored says, for each option accepted that changes nothing in
	// rtrace, why (printed with -v).
	Ignored []string
	// LogFile is --logfile: rtrace's messages go there.
	LogFile string
	// Program is true when the command line named a program (Options.Args).
	Program bool

	// AgentPid is -p PID: the command talks to the agent of that
	// recording (launcher.Agent), with AgentTrace (--trace=on|off).
	AgentPid   int
	AgentTrace string
	// Script is -S SCRIPT and Record --record, of `rtrace script`.
	Script string
	Record bool

	optFiles        int  // --opt-file nesting
	toggleSignalSet bool // --toggle-signal given
	script          bool // the command line is `rtrace script`'s
}

// kind is how rtrace treats an option of uftrace's.
type kind int

const (
	applied kind = iota // done with uftrace's meaning (set)
	inert               // accepted; nothing in rtrace for it to change (why)
	notYet              // uftrace's meaning is not built in rtrace yet: refused (why)
	refused             // cannot apply to rtrace: refused (why)
)

// option is one option of the table.
type option struct {
	long   string
	short  byte
	arg    string // the value's name in --help; "" for a switch
	group  group
	help   string
	kind   kind
	why    string // inert, notYet, refused: the reason
	replay bool   // live passes it to uftrace replay (uftrace live's rule: not the record-time filters)
	exact  bool   // an alias only its whole name selects (no prefix of it)
	set    func(c *Cmd, v string) error
}

// ErrUsage wraps a command-line mistake: exit 2.
var ErrUsage = errors.New("usage")

// usageError is a command-line mistake about one option.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }
func (e *usageError) Is(t error) bool {
	return t == ErrUsage
}

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// Parse reads args, the words after `rtrace record` (or live): options,
// then the program and its arguments. Errors are ErrUsage: one line each.
func Parse(args []string) (*Cmd, error) { return parse(&Cmd{}, args) }

// ParseScript reads the words after `rtrace script`: record's options,
// -S SCRIPT and --record, as uftrace script takes them. With --record,
// the script's "# uftrace-option: ..." lines ("-- uftrace-option:" in a
// Lua script) add their options, as uftrace's parse_script_opt does.
func ParseScript(args []string) (*Cmd, error) {
	c, err := parse(&Cmd{script: true}, args)
	if err != nil || !c.Record || c.Script == "" {
		return c, err
	}
	b, err := os.ReadFile(c.Script)
	if err != nil {
		return nil, usagef("-S %s: %v", c.Script, err)
	}
	comment := "#"
	if strings.HasSuffix(c.Script, ".lua") {
		comment = "--"
	}
	for _, l := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(l, comment)
		if !ok || !strings.HasPrefix(strings.TrimSpace(rest), "uftrace-option") {
			continue
		}
		_, line, ok := strings.Cut(l, ":")
		if !ok {
			break
		}
		words, err := splitWords(line)
		if err == nil {
			var more []string
			more, err = c.parse(words)
			if err == nil && len(more) > 0 {
				err = fmt.Errorf("%q is no option", more[0])
			}
		}
		if err != nil {
			return nil, usagef("-S %s: uftrace-option: %v", c.Script, err)
		}
	}
	return c, nil
}

func parse(c *Cmd, args []string) (*Cmd, error) {
	c.Options.DefaultEngine = os.Getenv("RTRACE_ENGINE")
	c.Options.ToggleSignal = unix.SIGUSR1
	c.Options.Backtrace = 10
	rest, err := c.parse(args)
	if err != nil {
		return nil, err
	}
	if len(rest) > 0 { // the command line's program wins over an --opt-file's
		c.Options.Args, c.Program = rest, true
	}
	if c.Options.Disable && slices.ContainsFunc(c.Replay, func(a string) bool {
		return strings.Contains(a, "@trace_on") || strings.Contains(a, "@trace-on") || strings.Contains(a, ",trace_on") || strings.Contains(a, ",trace-on")
	}) {
		// uftrace live's replay shows the calls after a trace_on at the
		// depth they were recorded at (utils/fstack.c, live_disabled);
		// uftrace replay does so when it starts disabled too, and turns on
		// at the same trace_on, which it is given.
		c.Replay = append(c.Replay, "--disable")
	}
	if c.toggleSignalSet && len(c.Options.Modules) == 0 && !c.Options.Disable && !c.Options.Agent {
		return nil, usagef("--toggle-signal: toggling needs --disable or -g (function tracing) or --module MODULES (resource tracing)")
	}
	return c, nil
}

// parse applies the options of args and returns the words after them.
func (c *Cmd) parse(args []string) ([]string, error) {
	occ, rest, err := getopt(specs, args, false)
	if err != nil {
		return nil, &usageError{err.Error()}
	}
	for _, o := range occ {
		opt := byLong[o.spec.long]
		if err := c.apply(opt, o); err != nil {
			return nil, err
		}
	}
	return rest, nil
}

// apply does what one option asks.
func (c *Cmd) apply(opt *option, o occurrence) error {
	name := o.typed
	if o.typed != "--"+opt.long {
		name = o.typed + " (--" + opt.long + ")"
	}
	switch {
	case c.script && opt.long == "script":
		c.Script = o.value
		return nil
	case c.script && opt.long == "record":
		c.Record = true
		return nil
	}
	switch opt.kind {
	case notYet:
		return usagef("%s: not supported by rtrace yet: %s", name, opt.why)
	case refused:
		return usagef("%s: %s", name, opt.why)
	case inert:
		c.Ignored = append(c.Ignored, fmt.Sprintf("%s: ignored: %s", name, opt.why))
	}
	if opt.replay {
		if opt.arg != "" {
			c.Replay = append(c.Replay, "--"+opt.long+"="+o.value)
		} else {
			c.Replay = append(c.Replay, "--"+opt.long)
		}
	}
	if opt.set != nil {
		if err := opt.set(c, o.value); err != nil {
			return usagef("%s %s: %v", o.typed, o.value, err)
		}
	}
	return nil
}

// specs and byLong index the table for the parser.
var (
	specs  []spec
	byLong = map[string]*option{}
)

func init() {
	for i := range table {
		o := &table[i]
		specs = append(specs, spec{long: o.long, short: o.short, arg: o.arg != "", exact: o.exact})
		byLong[o.long] = o
	}
}

// Setters.

func appendTo(f func(*launcher.Options) *[]string) func(*Cmd, string) error {
	return func(c *Cmd, v string) error {
		p := f(&c.Options)
		*p = append(*p, v)
		return nil
	}
}

func setTrue(f func(*Cmd) *bool) func(*Cmd, string) error {
	return func(c *Cmd, _ string) error { *f(c) = true; return nil }
}

func setInt(f func(*launcher.Options) *int) func(*Cmd, string) error {
	return func(c *Cmd, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return errors.New("want a number from 0 up")
		}
		*f(&c.Options) = n
		return nil
	}
}

func setString(f func(*Cmd) *string) func(*Cmd, string) error {
	return func(c *Cmd, v string) error { *f(c) = v; return nil }
}

// oneOf checks a value against uftrace's choices.
func oneOf(choices ...string) func(*Cmd, string) error {
	return func(_ *Cmd, v string) error {
		if slices.Contains(choices, v) {
			return nil
		}
		return fmt.Errorf("want %s", strings.Join(choices, ", "))
	}
}

// size checks a buffer size as uftrace reads one: a number with an
// optional K, M or G.
func size(_ *Cmd, v string) error {
	s := strings.TrimRight(strings.ToUpper(v), "KMG")
	if len(v)-len(s) > 1 || s == "" {
		return errors.New("want a size: 128K, 1M")
	}
	if _, err := strconv.ParseUint(s, 10, 64); err != nil {
		return errors.New("want a size: 128K, 1M")
	}
	return nil
}

// optFile reads more options from a file, as uftrace's --opt-file: its
// words, split as a shell splits them, '#' starting a comment to the end
// of its line; options first, then, when the command line names none,
// the program and its arguments.
func optFile(c *Cmd, path string) error {
	if c.optFiles++; c.optFiles > 8 {
		return errors.New("--opt-file nested more than 8 deep")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	words, err := splitWords(string(b))
	if err != nil {
		return err
	}
	rest, err := c.parse(words)
	if err != nil {
		return err
	}
	if len(rest) > 0 && !c.Program {
		c.Options.Args, c.Program = rest, true
	}
	c.optFiles--
	return nil
}

// splitWords splits text into words as a shell would: blanks separate
// them, quotes ('…' and "…") and backslashes keep blanks, and '#' at the
// start of a word comments out the rest of its line.
func splitWords(text string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(text); i++ {
		ch := text[i]
		switch {
		case ch == '#' && !inWord:
			for i < len(text) && text[i] != '\n' {
				i++
			}
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case ch == '\\' && i+1 < len(text):
			i++
			cur.WriteByte(text[i])
			inWord = true
		case ch == '\'' || ch == '"':
			end := strings.IndexByte(text[i+1:], ch)
			if end < 0 {
				return nil, fmt.Errorf("unclosed %c quote", ch)
			}
			cur.WriteString(text[i+1 : i+1+end])
			i += end + 1
			inWord = true
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// replayTriggers keeps of a -T value the actions uftrace replay takes
// (backtrace, color=, hide, time=, trace...), as uftrace live does before
// its replay (cmds/live.c, reset_live_opts): "a@depth=1;b@backtrace,color=red"
// gives "b@backtrace,color=red"; "" when none is left.
func replayTriggers(v string) string {
	acts := []string{"backtrace", "color=", "hide", "time=", "trace"}
	var out []string
	for _, s := range strings.Split(v, ";") {
		name, list, ok := strings.Cut(s, "@")
		if !ok {
			continue
		}
		var keep []string
		for _, a := range strings.Split(list, ",") {
			if slices.ContainsFunc(acts, func(p string) bool { return strings.HasPrefix(a, p) }) {
				keep = append(keep, a)
			}
		}
		if len(keep) > 0 {
			out = append(out, name+"@"+strings.Join(keep, ","))
		}
	}
	return strings.Join(out, ";")
}
