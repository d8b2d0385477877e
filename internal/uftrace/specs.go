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
	modules  bool                 // a pattern names a module (FuncSpec.Module)
	auto     bool                 // auto specs apply to every function (auto-args:1)
	argauto  map[string][]ArgSpec // info's argauto list, by function
	retauto  map[string][]ArgSpec // and retauto
}

type patternSpec struct {
	match func(string) bool
	spec  FuncSpec // spec.Module: the module it applies in
	dbg   dbgLine  // a pattern without '@': the .dbg line it takes
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
			m, err := autoSpecMap(l.Value)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", l.Key, err)
			}
			if l.Key == "argauto" {
				t.argauto = m
			} else {
				t.retauto = m
			}
			continue
		default:
			continue
		}
		// In the order given: a later pattern's specs replace an earlier
		// one's (resolve).
		for _, part := range strings.Split(l.Value, ";") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			ps := patternSpec{dbg: dbgA}
			if l.Key == "retspec" {
				ps.dbg = dbgR
			}
			pat := part
			if strings.Contains(part, "@") {
				f, err := ParseFuncSpec(part)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", l.Key, err)
				}
				ps.spec, ps.dbg, pat = f, noDbg, f.Pattern
				t.modules = t.modules || f.Module != ""
			}
			m, err := matcher(patternType, pat)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", l.Key, err)
			}
			ps.match = m
			t.patterns = append(t.patterns, ps)
		}
	}
	return t, nil
}

// autoSpecMap reads an argauto or retauto line: each function's specs, by
// its short demangled name, as uftrace matches them (utils/auto-args.c,
// build_auto_args).
func autoSpecMap(line string) (map[string][]ArgSpec, error) {
	fs, err := ParseSpecList(line)
	if err != nil {
		return nil, err
	}
	m := make(map[string][]ArgSpec, len(fs))
	for _, f := range fs {
		m[cxxname.Short(f.Pattern)] = f.Args
	}
	return m, nil
}

// Specs finds the argument and return-value specs of functions by name from
// info's argspec/retspec lines, exactly as the reader will: a recorder that
// writes payloads in this order writes what uftrace decodes.
type Specs struct{ t *specTable }

// NewSpecs compiles info argspec lines of the given pattern type (with an
// auto-args:1 line, auto specs apply to every function).
func NewSpecs(lines []ArgSpecLine, patternType string) (*Specs, error) {
	auto := slices.Contains(lines, ArgSpecLine{"auto-args", "1"})
	t, err := newSpecTable(lines, patternType, auto)
	if err != nil {
		return nil, err
	}
	return &Specs{t}, nil
}

// Lookup returns the argument and return-value specs of function name,
// each list in payload order (a spec naming a module applies nowhere).
func (s *Specs) Lookup(name string) (args, rets []ArgSpec) { return s.t.lookup(name, nil, 0) }

// Resolve returns the argument and return-value specs of function name at
// w, each list in payload order, as the reader merges them: autoA and
// autoR give its auto specs (DWARF's, else the built-in table's), asked
// for only when a pattern without '@' or auto-args calls for them.
func (s *Specs) Resolve(name string, w Where, autoA, autoR func() []ArgSpec) (args, rets []ArgSpec) {
	return s.t.resolve(name, w, autoA, autoR)
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
// addr in session s: the auto specs are its .dbg A: and R: lines, else its
// entries in info's argauto and retauto lists.
func (t *specTable) lookup(name string, s *Session, addr uint64) (args, rets []ArgSpec) {
	var dbg [2][]ArgSpec
	// The function's symbol, looked up once and only when needed: for a
	// pattern naming a module, or for auto specs.
	var sym Symbol
	var m *Module
	found, resolved := false, false
	resolve := func() bool {
		if !resolved && s != nil {
			resolved = true
			sym, m, found = s.Resolve(addr)
		}
		return found
	}
	var w Where
	if t.modules && resolve() {
		w = s.Where(m, sym)
	}
	looked := false
	find := func(i int) []ArgSpec {
		if !looked {
			looked = true
			if resolve() {
				for _, f := range m.debugFuncs {
					// By the symbol's address, as uftrace (utils/dwarf.c,
					// get_dwarf_argspec): static functions share names.
					if f.Addr != sym.Addr {
						continue
					}
					for i, src := range []string{f.ArgSpec, f.RetSpec} {
						if fs, err := ParseFuncSpec(src); err == nil && src != "" {
							dbg[i] = fs.Args
						}
					}
				}
			}
		}
		if len(dbg[i]) > 0 {
			return dbg[i]
		}
		if i == 0 {
			return t.argauto[cxxname.Short(name)]
		}
		return t.retauto[cxxname.Short(name)]
	}
	return t.resolve(name, w, func() []ArgSpec { return find(0) }, func() []ArgSpec { return find(1) })
}

// resolve merges the specs of function name as uftrace's reader does
// (utils/filter.c add_filter, utils/auto-args.c): the patterns matching it,
// in order, each spec of a later one replacing the earlier of the same
// argument, a pattern without '@' (-A FUNC, -R FUNC) standing for the
// function's auto argument (return value) specs, autoA() (autoR()): its
// DWARF's, else the built-in table's. Then, with auto-args, the auto specs
// of its arguments when no pattern gave one, and of its return value
// likewise. A pattern naming a module applies at w in that module only.
// It returns the arguments and the return values, each in
// payload order.
func (t *specTable) resolve(name string, w Where, autoA, autoR func() []ArgSpec) (args, rets []ArgSpec) {
	short := cxxname.Short(name) // uftrace matches the demangled name
	var all []ArgSpec
	for _, p := range t.patterns {
		if !p.match(short) || p.spec.Module != "" && !MatchModule(w, p.spec.Module) {
			continue
		}
		switch p.dbg {
		case dbgA:
			all = mergeSpecs(all, autoA())
		case dbgR:
			all = mergeSpecs(all, autoR())
		default:
			all = mergeSpecs(all, p.spec.Args)
		}
	}
	args, rets = FuncSpec{Args: all}.Split()
	if t.auto && len(args) == 0 {
		args = slices.Clone(autoA())
	}
	if t.auto && len(rets) == 0 {
		rets = slices.Clone(autoR())
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
