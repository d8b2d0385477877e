package elfx

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rtrace/internal/testutil"
)

func TestOpenFixture(t *testing.T) {
	for _, flags := range [][]string{{"-O0", "-pie", "-fPIE"}, {"-O0", "-no-pie", "-fno-PIE"}, {"-O0", "-static"}} {
		path := testutil.BuildC(t, "chain.c", append([]string{"-g"}, flags...)...)
		f, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		for _, fn := range f.Funcs {
			names[fn.Name] = true
		}
		for _, want := range []string{"main", "a", "b", "c", "d"} {
			if !names[want] {
				t.Errorf("%v: no function %s", flags, want)
			}
		}
		if len(f.BuildID) != 40 || f.IsGo || f.Setuid {
			t.Errorf("%v: build id %q go %v setuid %v", flags, f.BuildID, f.IsGo, f.Setuid)
		}
		if static := flags[1] == "-static"; f.Static() != static {
			t.Errorf("%v: Static() = %v", flags, f.Static())
		}
		subs, err := Subprograms(path)
		if err != nil || len(subs) < 5 {
			t.Errorf("%v: %d subprograms, %v", flags, len(subs), err)
		}
	}
}

// Open parses a file once, and again when its contents change.
func TestOpenKeepsParsed(t *testing.T) {
	chain := testutil.BuildC(t, "chain.c", "-O0")
	other := testutil.BuildC(t, "chain.c", "-O2")
	path := filepath.Join(t.TempDir(), "prog")
	copyFile := func(from string) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(chain)
	a, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := Open(path); err != nil || b != a {
		t.Errorf("a second Open parsed the file again (%v)", err)
	}
	copyFile(other)
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if c == a || c.BuildID == a.BuildID {
		t.Errorf("Open of a rewritten file returned the old parse (build id %s)", c.BuildID)
	}
}

// Prefetch parses the loader and libc of a dynamic executable.
func TestLibPaths(t *testing.T) {
	f, err := Open(testutil.BuildC(t, "chain.c", "-O0"))
	if err != nil {
		t.Fatal(err)
	}
	paths := libPaths(f)
	if len(paths) != 2 || paths[0] != f.Interp || filepath.Base(paths[1]) != "libc.so.6" {
		t.Errorf("libPaths = %q, want the loader %s and libc.so.6 (needed %q)", paths, f.Interp, f.Needed)
	}
	static, err := Open(testutil.BuildC(t, "chain.c", "-O0", "-static"))
	if err != nil {
		t.Fatal(err)
	}
	if paths := libPaths(static); len(paths) != 0 {
		t.Errorf("libPaths of a static executable = %q", paths)
	}
}

func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile("/bin/true"); err == nil {
		f.Add(b[:min(len(b), 8192)])
	}
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		Parse(bytes.NewReader(data)) // must not panic
	})
}

// Imports names each library function with the PLT stub or GOT slot it is
// called through, whatever the binding: lazy, -z now, or no PLT at all.
func TestImports(t *testing.T) {
	for _, flags := range [][]string{{"-O0"}, {"-O0", "-Wl,-z,now"}, {"-O0", "-fno-plt"}, {"-O0", "-no-pie", "-fno-PIE"}} {
		path := testutil.BuildC(t, "libcalls.c", flags...)
		f, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]Import{}
		for _, im := range f.Imports {
			byName[im.Name] = im
		}
		for _, name := range []string{"getpid", "malloc", "free", "printf"} {
			im, ok := byName[name]
			if !ok {
				t.Errorf("%v: no import %s in %+v", flags, name, f.Imports)
				continue
			}
			noPLT := flags[len(flags)-1] == "-fno-plt"
			if (im.Stub == 0) != noPLT {
				t.Errorf("%v: %s stub %#x", flags, name, im.Stub)
			}
			if addr, size := im.Site(); addr == 0 || size == 0 {
				t.Errorf("%v: %s site %#x+%d", flags, name, addr, size)
			}
		}
	}
}

// BenchmarkParseLibc parses the C library as the tracer does for every
// program (elfx.Prefetch): its symbols sorted and deduplicated.
func BenchmarkParseLibc(b *testing.B) {
	const libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
	f, err := os.Open(libc)
	if err != nil {
		b.Skip(err)
	}
	defer f.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(f); err != nil {
			b.Fatal(err)
		}
	}
}

// TestFrameFuncs strips a program with a split-off cold part and checks
// that the FDEs give back every function of its symbol table that has
// code of its own: at the same address, with the same size, named by
// SyntheticName (the entry point: _start); nothing of the PLT.
func TestFrameFuncs(t *testing.T) {
	for _, flags := range [][]string{{"-O2"}, {"-O0", "-no-pie", "-fno-PIE"}} {
		full := testutil.BuildC(t, "cold.c", flags...)
		f, err := Open(full)
		if err != nil {
			t.Fatal(err)
		}
		if f.Stripped {
			t.Fatalf("%v: the unstripped build reads as stripped", flags)
		}
		s, err := Open(testutil.Strip(t, full))
		if err != nil {
			t.Fatal(err)
		}
		if !s.Stripped {
			t.Fatalf("%v: the stripped build reads as having a symbol table", flags)
		}
		got, err := FrameFuncs(s)
		if err != nil {
			t.Fatal(err)
		}
		at := map[uint64]Func{}
		for _, fn := range got {
			at[fn.Value] = fn
		}
		// crtstuff's functions are built without unwind tables.
		noFDE := map[string]bool{"_init": true, "_fini": true, "deregister_tm_clones": true, "register_tm_clones": true, "__do_global_dtors_aux": true, "frame_dummy": true}
		seen := 0
		for _, want := range f.Funcs {
			if noFDE[want.Name] {
				continue
			}
			fn, ok := at[want.Value]
			switch {
			case !ok:
				t.Errorf("%v: %s at %#x is not in the stripped build's functions", flags, want.Name, want.Value)
				continue
			case want.Name == "_start" && fn.Name != "_start":
				t.Errorf("%v: the entry point is named %s", flags, fn.Name)
			case want.Name != "_start" && fn.Name != SyntheticName(want.Value):
				t.Errorf("%v: %s is named %s, want %s", flags, want.Name, fn.Name, SyntheticName(want.Value))
			}
			if !fn.Synthetic || fn.Size != want.Size {
				t.Errorf("%v: %s: %+v, want a synthetic function of %d bytes", flags, want.Name, fn, want.Size)
			}
			seen++
		}
		if seen != len(got) {
			t.Errorf("%v: %d functions from the FDEs, %d of them in the symbol table: %+v", flags, len(got), seen, got)
		}
		if flags[0] == "-O2" && !slices.ContainsFunc(f.Funcs, func(fn Func) bool { return strings.HasSuffix(fn.Name, ".cold") }) {
			t.Errorf("%v: gcc split off no cold part: the test checks less than it says", flags)
		}
	}
}

// FuzzFrameFuncs feeds arbitrary objects to FrameFuncs' reading of the
// FDEs: errors are fine, panics are not.
func FuzzFrameFuncs(f *testing.F) {
	if b, err := os.ReadFile("/usr/bin/bzip2"); err == nil { // stripped on Debian
		f.Add(b)
	}
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		xf, err := Parse(bytes.NewReader(data))
		if err != nil || !xf.Stripped {
			return
		}
		ef, err := NewELF(bytes.NewReader(data))
		if err != nil {
			return
		}
		funcs, err := frameFuncs(xf, ef)
		if err == nil && len(funcs) < len(xf.Funcs) {
			t.Errorf("%d functions from the FDEs, fewer than .dynsym's %d", len(funcs), len(xf.Funcs))
		}
	})
}
