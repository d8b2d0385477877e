package uftrace

import "testing"

func TestPattern(t *testing.T) {
	for _, c := range []struct {
		pat, kind string
		match     []string
		miss      []string
	}{
		{"main", "", []string{"main"}, []string{"domain", "main2"}},
		{"fib", "", []string{"fib"}, []string{"fibonacci"}},
		{"^fi", "", []string{"fib", "fixture"}, []string{"afi"}},
		{"b.c", "", []string{"abxcd"}, []string{"bc"}},
		{"fo*", "glob", []string{"foo", "fo"}, []string{"afoo"}},
		{"a.b", "simple", []string{"a.b"}, []string{"axb"}},
		// C++: the symbol or the short demangled name.
		{"geo::Shape::area", "", []string{"_ZNK3geo5Shape4areaEv"}, []string{"_ZNK3geo5Shape5widthEv"}},
		{"^_ZNK3geo", "", []string{"_ZNK3geo5Shape4areaEv"}, nil},
	} {
		p, err := ParsePattern(c.pat, c.kind)
		if err != nil {
			t.Fatalf("ParsePattern(%q, %q): %v", c.pat, c.kind, err)
		}
		for _, n := range c.match {
			if !p.MatchSymbol(n) {
				t.Errorf("%q (%s) does not match %q", c.pat, c.kind, n)
			}
		}
		for _, n := range c.miss {
			if p.MatchSymbol(n) {
				t.Errorf("%q (%s) matches %q", c.pat, c.kind, n)
			}
		}
	}
	for _, c := range [][2]string{{"(", ""}, {"", ""}, {"[", "glob"}, {"x", "fuzzy"}} {
		if _, err := ParsePattern(c[0], c[1]); err == nil {
			t.Errorf("ParsePattern(%q, %q): no error", c[0], c[1])
		}
	}
}

func TestMatchLibName(t *testing.T) {
	for _, c := range []struct {
		path, lib string
		want      bool
	}{
		{"/usr/lib/libfoo.so", "libfoo.so", true},
		{"/usr/lib/libfoo.so.1.2", "libfoo.so", true},
		{"/usr/lib/libfoo.so.1", "libfoo.so.1", true},
		{"/usr/lib/libfoobar.so", "libfoo.so", false},
		{"/usr/lib/libfoo.so", "libfoo", true}, // as uftrace's func@libfoo
		{"/usr/lib/libfoo.so", "/usr/lib/libfoo.so", true},
		{"/opt/libfoo.so", "/usr/lib/libfoo.so", false},
	} {
		if got := MatchLibName(c.path, c.lib); got != c.want {
			t.Errorf("MatchLibName(%q, %q) = %v", c.path, c.lib, got)
		}
	}
}

func TestParseTime(t *testing.T) {
	for in, want := range map[string]uint64{
		"100": 100, "100ns": 100, "20us": 20000, "20USEC": 20000, "1.5ms": 1500000, "2s": 2e9,
		"1m": 60e9, "0.5min": 30e9, "0": 0, "2.25us": 2250, "3msec": 3e6, "1sec": 1e9,
	} {
		if got, err := ParseTime(in); err != nil || got != want {
			t.Errorf("ParseTime(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "us", "-1us", "1h", "1e3", "0x10", "1..2ms", "abc", "99999999999999999999s"} {
		if got, err := ParseTime(bad); err == nil {
			t.Errorf("ParseTime(%q) = %d, want an error", bad, got)
		}
	}
}

func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"100", "1.5ms", "2s", "x", "1e400s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { ParseTime(s) })
}

func TestLocPattern(t *testing.T) {
	for _, c := range []struct {
		pat, path string
		want      bool
	}{
		{"testdata", "/work/main/testdata/callers.c", true},
		{"/testdata/", "/work/main/testdata/callers.c", true},
		{"callers", "/work/main/testdata/callers.c", false},
		{"callers.c", "/work/main/testdata/callers.c", true}, // a regex
		{"main/testdata", "/work/main/testdata/callers.c", true},
		{"lib", "/src/libc/c.c", false},
		{"lib", "lib/b.c", true},
		{"a+b", "/x/a+b/c.c", false}, // '+' makes it a regex: a, then b's
	} {
		p, err := ParseLocPattern(c.pat, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Match(c.path); got != c.want {
			t.Errorf("-L %s on %s: %v, want %v", c.pat, c.path, got, c.want)
		}
	}
}
