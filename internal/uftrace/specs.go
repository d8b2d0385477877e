package uftrace

import (
	"fmt"
	"slices"
	"strings"

	"rtrace/internal/cxxname"
)

// specTable finds the argument and return-value specs of a function the way
// uftrace's reader does: info's argspec/retspec patterns; with auto-args:1,
// and for a pattern without '@' (-A FUNC, -R FUNC), the function's .dbg
// A: (or R:) line, else its entry in info's argauto (retauto) list of
// library functions (AutoSpecs).
type specTable struct {
	patterns []patternSpec
	auto     bool                 // auto specs apply to every function (auto-args:1)
	argauto  map[string][]ArgSpec // info's argauto list, by function
	retauto  map[string][]ArgSpec // and retauto
}

type patternSpec struct {
	match func(string) bool
	spec  FuncSpec
	dbg   dbgLine // a pattern without '@': the .dbg line it takes
}

// dbgLine is a .dbg line of argument specs: A: or R:.
type dbgLine uint8

const (
	noDbg dbgLine = iota
	dbgA
	dbgR
)

func (r *Reader) loadSpecs() (*specTable, error) {
	return newSpecTable(r.Info.ArgSpecs, r.Info.PatternType, r.Info.AutoArgs())
}

func newSpecTable(lines []ArgSpecLine, patternType string, auto bool) (*specTable, error) {
	t := &specTable{auto: auto}
	for _, l := range lines {
		switch l.Key {
		case "argspec", "retspec":
		case "argauto", "retauto":
			fs, err := ParseSpecList(l.Value)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", l.Key, err)
			}
			to := &t.argauto
			if l.Key == "retauto" {
				to = &t.retauto
			}
			if *to == nil {
				*to = map[string][]ArgSpec{}
			}
			for _, f := range fs {
				(*to)[cxxname.Short(f.Pattern)] = f.Args // as uftrace: by demangled name
			}
			continue
		default:
			continue
		}
		var withSpecs []string
		for _, part := range strings.Split(l.Value, ";") {
			part = strings.TrimSpace(part)
			if part == "" || strings.Contains(part, "@") {
				withSpecs = append(withSpecs, part)
				continue
			}
			m, err := matcher(patternType, part)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", l.Key, err)
			}
			line := dbgA
			if l.Key == "retspec" {
				line = dbgR
			}
			if l.Key == "argspec" || l.Key == "retspec" {
				t.patterns = append(t.patterns, patternSpec{match: m, dbg: line})
			}
		}
		fs, err := ParseSpecList(strings.Join(withSpecs, ";"))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", l.Key, err)
		}
		for _, f := range fs {
			m, err := matcher(patternType, f.Pattern)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", l.Key, err)
			}
			t.patterns = append(t.patterns, patternSpec{match: m, spec: f})
		}
	}
	return t, nil
}

// Specs finds the argument and return-value specs of functions by name from
// info's argspec/retspec lines, exactly as the reader will: a recorder that
// writes payloads in this order writes what uftrace decodes.
type Specs struct{ t *specTable }

// NewSpecs compiles info argspec lines of the given pattern type.
func NewSpecs(lines []ArgSpecLine, patternType string) (*Specs, error) {
	t, err := newSpecTable(lines, patternType, false)
	if err != nil {
		return nil, err
	}
	return &Specs{t}, nil
}

// Lookup returns the argument and return-value specs of function name,
// each list in payload order.
func (s *Specs) Lookup(name string) (args, rets []ArgSpec) { return s.t.lookup(name, nil, 0) }

// Explicit returns the specs the argspec/retspec patterns give function
// name, and whether auto specs (a pattern without '@', auto-args) apply to
// its arguments and to its return value (WithAuto).
func (s *Specs) Explicit(name string) (specs []ArgSpec, useA, useR bool) { return s.t.explicit(name) }

// matcher compiles a function pattern of the given pattern type.
func matcher(kind, pat string) (func(string) bool, error) {
	p, err := ParsePattern(pat, kind)
	if err != nil {
		return nil, err
	}
	return p.Match, nil
}

// lookup returns the merged argument and return specs of function name at
// addr in session s.
func (t *specTable) lookup(name string, s *Session, addr uint64) (args, rets []ArgSpec) {
	explicit, useA, useR := t.explicit(name)
	var dbgA, dbgR []ArgSpec
	if s != nil && (useA || useR) {
		if _, m, ok := s.Resolve(addr); ok {
			for _, f := range m.debugFuncs {
				if f.Name != name {
					continue
				}
				for i, src := range []string{f.ArgSpec, f.RetSpec} {
					if fs, err := ParseFuncSpec(src); err == nil && src != "" {
						if i == 0 {
							dbgA = fs.Args
						} else {
							dbgR = fs.Args
						}
					}
				}
			}
		}
	}
	short := cxxname.Short(name)
	return WithAuto(explicit, useA, useR, orSpecs(dbgA, t.argauto[short]), orSpecs(dbgR, t.retauto[short]))
}

// explicit returns the specs info's argspec/retspec patterns give function
// name, and whether auto specs apply to its arguments and return value.
func (t *specTable) explicit(name string) (specs []ArgSpec, useA, useR bool) {
	short := cxxname.Short(name) // uftrace matches the demangled name
	useA, useR = t.auto, t.auto
	for _, p := range t.patterns {
		if p.match(short) {
			specs = mergeSpecs(specs, p.spec.Args)
			useA, useR = useA || p.dbg == dbgA, useR || p.dbg == dbgR
		}
	}
	return specs, useA, useR
}

// orSpecs returns a, or b when a is empty.
func orSpecs(a, b []ArgSpec) []ArgSpec {
	if len(a) == 0 {
		return b
	}
	return a
}

// WithAuto adds to a function's explicit specs its auto ones, as uftrace
// does (utils/filter.c, add_filter): the argument specs autoA (from its
// DWARF, else from the table of library functions) when useA and no
// explicit spec names an argument; the return value's autoR when useR and
// none names the return value. It returns the arguments and the return
// values, each in payload order.
func WithAuto(explicit []ArgSpec, useA, useR bool, autoA, autoR []ArgSpec) (args, rets []ArgSpec) {
	args, rets = FuncSpec{Args: explicit}.Split()
	if useA && len(args) == 0 {
		args = slices.Clone(autoA)
	}
	if useR && len(rets) == 0 {
		rets = slices.Clone(autoR)
	}
	return args, rets
}

// mergeSpecs adds specs to list, a later spec of the same argument
// replacing the earlier one, a new one appended: payload values follow this
// order (checked against uftrace 0.13 by the synthetic trace test, whose
// args_misc spec lists fparg1 after arg4).
func mergeSpecs(list, add []ArgSpec) []ArgSpec {
	for _, a := range add {
		replaced := false
		for i, o := range list {
			if o.Kind == a.Kind && o.Index == a.Index {
				list[i], replaced = a, true
				break
			}
		}
		if !replaced {
			list = append(list, a)
		}
	}
	return list
}
