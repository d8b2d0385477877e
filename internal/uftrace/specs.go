package uftrace

import (
	"fmt"
	"strings"

	"rtrace/internal/cxxname"
)

// specTable finds the argument and return-value specs of a function the way
// uftrace's reader does: info's argspec/retspec patterns, and with
// auto-args:1 the argauto/retauto lists and the .dbg A:/R: lines. A
// pattern without '@' (-A FUNC, -R FUNC) takes the function's .dbg A: (or
// R:) line.
type specTable struct {
	patterns []patternSpec
	auto     bool // .dbg A:/R: lines apply (auto-args:1)
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
			if !auto {
				continue
			}
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

// Merge adds more specs (the .dbg A:/R: lines of a function, with
// auto-args) to args and rets, as the reader merges them.
func Merge(args, rets []ArgSpec, more []ArgSpec) ([]ArgSpec, []ArgSpec) {
	all := mergeSpecs(append(append([]ArgSpec(nil), args...), rets...), more)
	return FuncSpec{Args: all}.Split()
}

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
	var all []ArgSpec
	short := cxxname.Short(name) // uftrace matches the demangled name
	useA, useR := t.auto, t.auto
	for _, p := range t.patterns {
		if p.match(short) {
			all = mergeSpecs(all, p.spec.Args)
			useA, useR = useA || p.dbg == dbgA, useR || p.dbg == dbgR
		}
	}
	if s != nil && (useA || useR) {
		if _, m, ok := s.Resolve(addr); ok {
			for _, f := range m.debugFuncs {
				if f.Name != name {
					continue
				}
				for i, src := range []string{f.ArgSpec, f.RetSpec} {
					if src == "" || i == 0 && !useA || i == 1 && !useR {
						continue
					}
					if fs, err := ParseFuncSpec(src); err == nil {
						all = mergeSpecs(all, fs.Args)
					}
				}
			}
		}
	}
	return FuncSpec{Args: all}.Split()
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
