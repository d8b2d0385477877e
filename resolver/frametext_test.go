package resolver

import (
	"testing"

	"rtrace/internal/elfx"
	"rtrace/internal/testutil"
	"rtrace/internal/trace"
)

func TestDisplayName(t *testing.T) {
	for sym, want := range map[string]string{
		"main":                   "main()",
		"leaf.cold":              "leaf.cold()",
		"IA__g_malloc":           "g_malloc()", // glib alias, as sp-rtrace strips it
		"_ZN3geo5Shape4areaEv":   "geo::Shape::area()",
		"_ZNK3geo5Shape4areaEv":  "geo::Shape::area() const",
		"_ZN4util5inner5countEi": "util::inner::count(int)",
		"_ZN3geo5twiceIdEET_S1_": "double geo::twice<double>(double)",
		"_ZN3geo5ShapeC2Ei":      "geo::Shape::Shape(int)",
		"_Z3fooi.cold":           "foo(int) [clone .cold]",
		"_Znot-really-mangled":   "_Znot-really-mangled()",
	} {
		if got := displayName(sym); got != want {
			t.Errorf("displayName(%q) = %q, want %q", sym, got, want)
		}
	}
}

func TestFrameText(t *testing.T) {
	for _, c := range []struct {
		name, file string
		line       int
		full       bool
		want       string
	}{
		{"mid", "/src/dir/resolve.c", 24, false, "mid() at resolve.c:24"},
		{"mid", "/src/dir/resolve.c", 24, true, "mid() at /src/dir/resolve.c:24"},
		{"mid", "", 0, false, "mid() from /lib/m.so"},
		{"mid", "/src/resolve.c", 0, false, "mid() from /lib/m.so"},
		{"", "/src/resolve.c", 3, false, "from /lib/m.so"},
	} {
		if got := frameText(c.name, c.file, c.line, "/lib/m.so", c.full); got != c.want {
			t.Errorf("frameText(%q, %q, %d, %v) = %q, want %q", c.name, c.file, c.line, c.full, got, c.want)
		}
	}
}

// TestCxxFrames resolves the entries of testdata/cxx.cc's functions,
// mapped where they were linked: C++ names come demangled with their
// parameters, as sp-rtrace shows them.
func TestCxxFrames(t *testing.T) {
	exe := testutil.BuildC(t, "cxx.cc", "-g", "-O0", "-no-pie", "-fno-PIE")
	f, err := elfx.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	r := New(Options{})
	for _, l := range f.Loads {
		if l.Exec {
			r.AddMapping(trace.Mapping{From: l.Vaddr &^ 0xfff, To: l.Vaddr + l.Memsz, Path: exe})
		}
	}
	want := map[string]string{
		"_ZNK3geo5Shape4areaEv":  "geo::Shape::area() const at cxx.cc:10",
		"_ZN4util5inner5countEi": "util::inner::count(int) at cxx.cc:18",
		"_ZN3geo5twiceIdEET_S1_": "double geo::twice<double>(double) at cxx.cc:5",
		"main":                   "main() at cxx.cc:23",
	}
	for _, fn := range f.Funcs {
		w, ok := want[fn.Name]
		if !ok {
			continue
		}
		delete(want, fn.Name)
		// A return address one past the entry looks the entry up.
		if got := r.Frame(fn.Value + 1); got != w {
			t.Errorf("%s: Frame = %q, want %q", fn.Name, got, w)
		}
	}
	if len(want) > 0 {
		t.Errorf("symbols not in %s: %v", exe, want)
	}
}
