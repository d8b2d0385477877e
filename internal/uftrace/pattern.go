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
func (p Pattern) String() string { return p.text }

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

// ParsePatterns compiles each of ss as a pattern of kind (PatternRegex
// when ""); the error names flag and the pattern.
func ParsePatterns(flag, kind string, ss []string) ([]Pattern, error) {
	out := make([]Pattern, 0, len(ss))
	for _, s := range ss {
		p, err := ParsePattern(s, kind)
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
