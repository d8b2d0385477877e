package uftrace

import (
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"rtrace/internal/cxxname"
)

// RegexChars are the characters that make a pattern a regex for uftrace;
// a pattern without them matches one name exactly (utils/filter.h
// REGEX_CHARS).
const RegexChars = ".?*+-^$|()[]{}"

// Pattern kinds, as uftrace's --match option and info's pattern_type name
// them.
const (
	PatternRegex  = "regex"  // a regex searched in the name; a plain name matches exactly
	PatternSimple = "simple" // the exact name
	PatternGlob   = "glob"   // a shell glob over the whole name
)

// Pattern matches function names the one way rtrace does everywhere: the
// -F/-N filters of record and postproc, -A/-R specs, -P FUNC@LIB and the
// reader's argspec lookup. It follows uftrace (utils/filter.c): in regex
// mode, a pattern with one of RegexChars is a Go regular expression
// searched anywhere in the name, one without them names one function.
type Pattern struct {
	text string
	kind string
	re   *regexp.Regexp
	// module qualifies a filter's pattern (FUNC@MODULE, ParseFuncPattern):
	// the functions of that module only ("PLT": the executable's calls
	// into libraries). "": any module's.
	module string
}

// ParsePattern compiles s as a pattern of kind (PatternRegex when "").
func ParsePattern(s, kind string) (Pattern, error) {
	if s == "" {
		return Pattern{}, fmt.Errorf("empty function pattern")
	}
	if kind == "" {
		kind = PatternRegex
	}
	p := Pattern{text: s, kind: kind}
	switch kind {
	case PatternRegex:
		if !strings.ContainsAny(s, RegexChars) {
			p.kind = PatternSimple
			return p, nil
		}
		re, err := regexp.Compile(s)
		if err != nil {
			return Pattern{}, fmt.Errorf("function pattern %q: %w", s, err)
		}
		p.re = re
	case PatternSimple:
	case PatternGlob:
		if _, err := path.Match(s, ""); err != nil {
			return Pattern{}, fmt.Errorf("function pattern %q: bad glob: %w", s, err)
		}
	default:
		return Pattern{}, fmt.Errorf("pattern type %q: want regex, simple or glob", kind)
	}
	return p, nil
}

// String is the pattern as given.
func (p Pattern) String() string {
	if p.module != "" {
		return p.text + "@" + p.module
	}
	return p.text
}

// Module is the module a filter's pattern names ("": any).
func (p Pattern) Module() string { return p.module }

// ParseFuncPattern compiles a filter's pattern (-F, -N, -H, -C), which
// may name a module after '@' as uftrace's do (utils/filter.c,
// setup_trigger): FUNC@PLT, the executable's calls into libraries;
// FUNC@LIB, the functions of that library (MatchLibName) or of the
// executable by its name.
func ParseFuncPattern(s, kind string) (Pattern, error) {
	fn, mod, ok := strings.Cut(s, "@") // as uftrace: at the first @
	if !ok {
		return ParsePattern(s, kind)
	}
	if fn == "" || mod == "" {
		return Pattern{}, fmt.Errorf("function pattern %q: want FUNC@MODULE", s)
	}
	if strings.EqualFold(mod, "kernel") {
		return Pattern{}, fmt.Errorf("function pattern %q: rtrace traces no kernel functions", s)
	}
	p, err := ParsePattern(fn, kind)
	p.module = mod
	return p, err
}

// Where says where a function is: the path of its module, and whether it
// is the executable's call into a library (a PLT stub, or a GOT call).
type Where struct {
	Module string
	PLT    bool
}

// MatchModule says whether a function at w is in module as a FUNC@MODULE
// pattern names it ("": any module): "PLT" (any case), the executable's
// library calls; a name with a slash, that path; any other name, a prefix
// of the module's file name, as uftrace finds a module (utils/symbol.c,
// find_map_by_name): libabc_test names libabc_test_lib.so.
func MatchModule(w Where, module string) bool {
	switch {
	case module == "":
		return true
	case strings.EqualFold(module, "PLT"):
		return w.PLT
	case w.Module == "":
		return false
	case strings.Contains(module, "/"):
		return MatchLibName(w.Module, module)
	}
	return strings.HasPrefix(filepath.Base(w.Module), module)
}

// MatchIn says whether the function whose symbol is sym, at w, matches:
// by name (MatchSymbol) and module.
func (p Pattern) MatchIn(sym string, w Where) bool {
	return MatchModule(w, p.module) && p.MatchSymbol(sym)
}

// MatchAnyIn says whether the function sym at w matches one of ps.
func MatchAnyIn(ps []Pattern, sym string, w Where) bool {
	for _, p := range ps {
		if p.MatchIn(sym, w) {
			return true
		}
	}
	return false
}

// Qualified says whether one of ps names a module.
func Qualified(ps []Pattern) bool {
	for _, p := range ps {
		if p.module != "" {
			return true
		}
	}
	return false
}

// Match says whether name matches.
func (p Pattern) Match(name string) bool {
	switch p.kind {
	case PatternGlob:
		ok, _ := path.Match(p.text, name)
		return ok
	case PatternSimple:
		return name == p.text
	}
	return p.re != nil && p.re.MatchString(name)
}

// MatchSymbol says whether the function whose symbol is sym matches: by
// its symbol, or by the short demangled name uftrace shows for a C++
// symbol (geo::Shape::area).
func (p Pattern) MatchSymbol(sym string) bool {
	if p.Match(sym) {
		return true
	}
	short := cxxname.Short(sym)
	return short != sym && p.Match(short)
}

// MatchAny says whether sym matches one of ps (MatchSymbol).
func MatchAny(ps []Pattern, sym string) bool {
	for _, p := range ps {
		if p.MatchSymbol(sym) {
			return true
		}
	}
	return false
}

// ParsePatterns compiles each of ss as a filter's pattern of kind
// (PatternRegex when "", ParseFuncPattern); the error names flag and the
// pattern.
func ParsePatterns(flag, kind string, ss []string) ([]Pattern, error) {
	out := make([]Pattern, 0, len(ss))
	for _, s := range ss {
		p, err := ParseFuncPattern(s, kind)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", flag, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// MatchLibName says whether the library at libPath is the one lib names,
// as uftrace's func@libname qualifier and sp-rtrace's --call-address use
// it: lib is a file name, and a name also covers its versions (libfoo.so
// names libfoo.so.1 and libfoo.so.1.2, libfoo names libfoo.so); a lib with
// a slash must be the path itself.
func MatchLibName(libPath, lib string) bool {
	if strings.Contains(lib, "/") {
		return filepath.Clean(libPath) == filepath.Clean(lib)
	}
	base := filepath.Base(libPath)
	return base == lib || strings.HasPrefix(base, lib+".")
}

// ParseLocPattern compiles s as a -L source location pattern, as uftrace
// does (utils/filter.c, init_locfilter_pattern): one without RegexChars
// names a file or directory and matches whole path components anywhere in
// a path (lib matches /src/lib/a.c and lib/b.c, not libc/c.c); others are
// patterns of kind.
func ParseLocPattern(s, kind string) (Pattern, error) {
	if s == "" || strings.ContainsAny(s, RegexChars) {
		return ParsePattern(s, kind)
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "/"), "/")
	p, err := ParsePattern("((.*/)*)"+regexp.QuoteMeta(s)+"($|(/.*))", PatternRegex)
	p.text = s
	return p, err
}
