package uftrace

import (
	"fmt"
	"path"
	"regexp"
)

// specTable finds the argument and return-value specs of a function the way
// uftrace's reader does: info's argspec/retspec patterns, and with
// auto-args:1 the argauto/retauto lists and the .dbg A:/R: lines.
type specTable struct {
	patterns []patternSpec
	auto     bool // .dbg A:/R: lines apply (auto-args:1)
}

type patternSpec struct {
	match func(string) bool
	spec  FuncSpec
}

func (r *Reader) loadSpecs() (*specTable, error) {
	auto := r.Info.AutoArgs()
	t := &specTable{auto: auto}
	for _, l := range r.Info.ArgSpecs {
		switch l.Key {
		case "argspec", "retspec":
		case "argauto", "retauto":
			if !auto {
				continue
			}
		default:
			continue
		}
		fs, err := ParseSpecList(l.Value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", l.Key, err)
		}
		for _, f := range fs {
			m, err := matcher(r.Info.PatternType, f.Pattern)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", l.Key, err)
			}
			t.patterns = append(t.patterns, patternSpec{m, f})
		}
	}
	return t, nil
}

// matcher compiles a function pattern of the given pattern type.
func matcher(kind, pat string) (func(string) bool, error) {
	switch kind {
	case "simple":
		return func(s string) bool { return s == pat }, nil
	case "glob":
		if _, err := path.Match(pat, ""); err != nil {
			return nil, fmt.Errorf("bad glob %q: %w", pat, err)
		}
		return func(s string) bool { ok, _ := path.Match(pat, s); return ok }, nil
	default:
		re, err := regexp.Compile(pat)
		if err != nil {
			return nil, fmt.Errorf("bad regex %q: %w", pat, err)
		}
		return re.MatchString, nil
	}
}

// lookup returns the merged argument and return specs of function name at
// addr in session s.
func (t *specTable) lookup(name string, s *Session, addr uint64) (args, rets []ArgSpec) {
	var all []ArgSpec
	for _, p := range t.patterns {
		if p.match(name) {
			all = mergeSpecs(all, p.spec.Args)
		}
	}
	if s != nil && t.auto {
		if _, m, ok := s.Resolve(addr); ok {
			for _, f := range m.debugFuncs {
				if f.Name != name {
					continue
				}
				for _, src := range []string{f.ArgSpec, f.RetSpec} {
					if src == "" {
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
// replacing the earlier one.
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
