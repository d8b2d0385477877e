package postproc

import (
	"strings"
	"testing"

	"rtrace/internal/trace"
)

// TestTemplateMatch: LeakSanitizer's patterns (compiler-rt's
// TemplateMatch): pieces anywhere and in order, ^ and $ anchors.
func TestTemplateMatch(t *testing.T) {
	for _, c := range []struct {
		templ, str string
		want       bool
	}{
		{"foo", "foo", true},
		{"foo", "xfooy", true},
		{"^foo", "foobar", true},
		{"^foo", "xfoo", false},
		{"foo$", "xfoo", true},
		{"foo$", "foox", false},
		{"foo$", "foofoo", false}, // the first foo is taken, as in compiler-rt
		{"a*c", "abc", true},
		{"a*c", "cab", false},
		{"^a*c$", "abxc", true},
		{"*$", "anything", true},
		{"lib*.so", "/usr/lib/libfoo.so.1", true},
		{"foo", "", false},
		{"", "x", true},
	} {
		if got := templateMatch(c.templ, c.str); got != c.want {
			t.Errorf("templateMatch(%q, %q) = %v, want %v", c.templ, c.str, got, c.want)
		}
	}
}

func TestParseSuppressions(t *testing.T) {
	got, err := ParseSuppressions([]byte("# mine\n\nleak:libfoo.so\n  leak: parse_config \n"))
	if err != nil || strings.Join(got, "|") != "libfoo.so|parse_config" {
		t.Errorf("got %q, %v", got, err)
	}
	for _, bad := range []string{"leak:\n", "race:x\n", "libfoo\n"} {
		if _, err := ParseSuppressions([]byte(bad)); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestSuppressionMatch: a built-in matches any frame's function, of a
// memory leak only; a user's pattern any frame's function, file or module.
func TestSuppressionMatch(t *testing.T) {
	loc := func(f trace.Frame) trace.Location { return frameLocation(f.Text) }
	stdio := []trace.Frame{{Text: "__GI__IO_file_doallocate() at filedoalloc.c:101"}, {Text: "main() at app.c:3"}}
	tz := []trace.Frame{{Text: "__strdup() at strdup.c:42"}, {Text: "tzset_internal() at tzset.c:401"}, {Text: "main() at app.c:3"}}
	mine := []trace.Frame{{Text: "make() at app.c:9"}, {Text: "main() at app.c:3"}}
	lib := []trace.Frame{{Text: "from /usr/lib/libfoo.so.1"}}
	s := &Suppressions{Builtin: true}
	if p := s.match(stdio, true, loc); p != "_IO_file_doallocate" {
		t.Errorf("stdio's buffer: %q", p)
	}
	if p := s.match(tz, true, loc); p != "tzset_internal" {
		t.Errorf("tzset's strdup: %q", p)
	}
	if p := s.match(stdio, false, loc); p != "" {
		t.Errorf("not memory: %q", p)
	}
	if p := s.match(mine, true, loc); p != "" {
		t.Errorf("a leak of the program's own: %q", p)
	}
	if p := (&Suppressions{User: []string{"app.c"}}).match(mine, false, loc); p != "app.c" {
		t.Errorf("by file: %q", p)
	}
	if p := (&Suppressions{User: []string{"^/usr/lib/libfoo.so.1$"}}).match(lib, true, loc); p != "^/usr/lib/libfoo.so.1$" {
		t.Errorf("by module: %q", p)
	}
	if p := (&Suppressions{User: []string{"^from"}}).match(lib, true, loc); p != "" {
		t.Errorf("the text's own words matched: %q", p)
	}
	if p := (&Suppressions{}).match(stdio, true, loc); p != "" {
		t.Errorf("none: %q", p)
	}
}

// FuzzSuppressions: any file parses or is refused with a line number, and
// its patterns match any text without panicking.
func FuzzSuppressions(f *testing.F) {
	f.Add([]byte("# c\nleak:^a*b$\nleak:lib*.so\n"), "xab")
	f.Add([]byte("leak:$\nleak:^\nleak:**\n"), "")
	f.Add([]byte("race:x\n"), "x")
	f.Fuzz(func(t *testing.T, file []byte, str string) {
		pats, err := ParseSuppressions(file)
		if err != nil {
			if !strings.Contains(err.Error(), "line ") {
				t.Fatalf("error without a line: %v", err)
			}
			return
		}
		for _, p := range pats {
			if p == "" {
				t.Fatalf("an empty pattern from %q", file)
			}
			templateMatch(p, str)
		}
	})
}

// stubLocator knows the module of every address, no function (a binary
// gone or without symbols since the trace was resolved).
type stubLocator struct{ Resolver }

func (stubLocator) Locate(uint64) trace.Location { return trace.Location{Module: "/lib/libgone.so"} }

// TestLocatorKeepsTextNames: a frame resolved in the trace keeps its
// function when the resolver finds none, and gets the resolver's module.
func TestLocatorKeepsTextNames(t *testing.T) {
	l := locatorOf(stubLocator{})(trace.Frame{Addr: 0x1100, Text: "mine() at a.c:3"})
	if l.Func != "mine" || l.File != "a.c" || l.Module != "/lib/libgone.so" {
		t.Errorf("%+v", l)
	}
}
