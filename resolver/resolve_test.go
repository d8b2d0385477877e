package resolver

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"rtrace/internal/elfx"
	"rtrace/internal/testutil"
)

// TestFrames resolves real return addresses of the fixture, built PIE and
// not, at -O0 and -O2, in the program and in a shared library.
func TestFrames(t *testing.T) {
	want := wantFrames(t)
	for _, b := range fixtureBuilds {
		t.Run(b.name, func(t *testing.T) {
			run := runFixture(t, b)
			var warn strings.Builder
			r := run.resolver(Options{Warn: &warn}, nil)
			checkFrames(t, r, run, want)
			for _, tag := range []string{"mid", "inlined", "lib", "libc"} {
				t.Logf("%#x %s", run.rets[tag], r.Frame(run.rets[tag]))
			}
			t.Logf("%#x %s", uint64(0x10), r.Frame(0x10))
			if warn.Len() > 0 {
				t.Errorf("warnings: %s", warn.String())
			}
			// Asked again: the cached answer.
			if got := r.Frame(run.rets["mid"]); got != want["mid"] {
				t.Errorf("second Frame = %q", got)
			}
		})
	}
}

func TestFullPaths(t *testing.T) {
	run := runFixture(t, fixtureBuilds[0])
	r := run.resolver(Options{FullPaths: true}, nil)
	got := r.Frame(run.rets["mid"])
	want := fmt.Sprintf("mid() at %s:%d", filepath.Join(testutil.Root(), "testdata", "resolve.c"), markerLine(t, "resolve.c", "mid-call"))
	if got != want {
		t.Errorf("Frame = %q, want %q", got, want)
	}
}

// TestUnresolved covers the forms without a source line: no mapping, a
// stripped copy (no symbol at all, or a .dynsym one), a vanished file, a
// file that is not ELF.
func TestUnresolved(t *testing.T) {
	run := runFixture(t, fixtureBuilds[0])
	dir := t.TempDir()
	exe, lib := filepath.Join(dir, "exe"), filepath.Join(dir, "lib.so")
	stripCopy(t, run.exe, exe)
	stripCopy(t, run.lib, lib)
	var warn strings.Builder
	r := run.resolver(Options{Warn: &warn, DebugDirs: []string{}}, map[string]string{run.exe: exe, run.lib: lib})
	checkFrames(t, r, run, map[string]string{
		"mid":      "from " + exe,             // static symbols are gone
		"main-lib": "from " + exe,             // main is not exported
		"lib":      "lib_entry() from " + lib, // exported: in .dynsym
		"inlined":  "from " + exe,             // no DWARF, no inline
		"main":     "from " + exe,             //
		"top":      "from " + exe,             //
	})
	if got := r.Frame(0x10); got != "in ??" {
		t.Errorf("unmapped: %q", got)
	}
	if warn.Len() > 0 {
		t.Errorf("a stripped file is no reason to warn: %s", warn.String())
	}

	text := filepath.Join(dir, "text")
	os.WriteFile(text, []byte("#!/bin/sh\necho not ELF\n"), 0o755)
	gone := filepath.Join(dir, "gone")
	warn.Reset()
	r = run.resolver(Options{Warn: &warn}, map[string]string{run.exe: gone, run.lib: text})
	if got := r.Frame(run.rets["mid"]); got != "from "+gone {
		t.Errorf("vanished file: %q", got)
	}
	if got := r.Frame(run.rets["lib"]); got != "from "+text {
		t.Errorf("not ELF: %q", got)
	}
	r.Frame(run.rets["main"]) // no second warning for the same module
	if n := strings.Count(warn.String(), "\n"); n != 2 || !strings.Contains(warn.String(), gone) || !strings.Contains(warn.String(), text) {
		t.Errorf("want one warning per module, got:\n%s", warn.String())
	}
}

// stripCopy writes a copy of src without symbols or debug sections.
func stripCopy(t *testing.T, src, dst string) {
	t.Helper()
	stripTool := testutil.RequireTool(t, "strip")
	if b, err := exec.Command(stripTool, "--strip-all", "-o", dst, src).CombinedOutput(); err != nil {
		t.Fatalf("strip %s: %v\n%s", src, err, b)
	}
}

// TestSystemLibrary resolves a return address in the C library (into
// qsort's caller of the fixture's comparator) and compares the function
// and source position with addr2line's, which finds the same separate
// debug file when the system has one.
func TestSystemLibrary(t *testing.T) {
	run := runFixture(t, fixtureBuilds[0])
	addr := run.rets["libc"]
	r := run.resolver(Options{}, nil)
	m := r.mappingAt(addr)
	if m == nil || !strings.Contains(filepath.Base(m.Path), "libc") {
		t.Fatalf("return address %#x not in the C library: %v", addr, run.maps)
	}
	got := r.Frame(addr)
	if strings.HasPrefix(got, "from ") || strings.HasPrefix(got, "in ") || !strings.HasSuffix(got, " from "+m.Path) && !strings.Contains(got, " at ") {
		t.Fatalf("Frame(%#x) = %q: no function", addr, got)
	}
	a2l := testutil.RequireTool(t, "addr2line")
	pc := addr - m.bias - 1
	out := testutil.Run(t, "", a2l, "-f", "-e", m.Path, fmt.Sprintf("%#x", pc))
	fn, pos, _ := strings.Cut(strings.TrimSpace(out), "\n")
	file, line, _ := strings.Cut(pos, ":")
	if fn == "??" || file == "??" || line == "" || line == "?" || line == "0" {
		// No debug file: the names of a .dynsym lookup may differ in
		// which alias they pick; nothing to compare (libc6-dbg has it).
		testutil.RequireCapability(t, "addr2line has no source line for %#x in %s (%q); we say %q", pc, m.Path, out, got)
	}
	want := fn + "() at " + filepath.Base(file) + ":" + strings.Fields(line)[0]
	if got != want {
		t.Errorf("Frame(%#x) = %q; addr2line -f -e %s %#x says %q", addr, got, m.Path, pc, want)
	}
	t.Logf("%#x %s", addr, got)
}

// TestSplitMapping: a text mapping split in two r-xp lines (part of it
// mprotected and back) keeps the bias of its start.
func TestSplitMapping(t *testing.T) {
	run := runFixture(t, fixtureBuilds[0])
	addr := run.rets["libc"]
	whole := run.resolver(Options{}, nil)
	m := whole.mappingAt(addr)
	cut := elfx.PageDown(addr - 1)
	if m == nil || cut <= m.From {
		t.Skipf("return address %#x too near its mapping's start", addr)
	}
	r := New(Options{})
	for _, mm := range run.maps {
		if mm.From == m.From {
			first, second := mm, mm
			first.To, second.From = cut, cut
			r.AddMapping(first)
			r.AddMapping(second)
			continue
		}
		r.AddMapping(mm)
	}
	if got, want := r.Frame(addr), whole.Frame(addr); got != want {
		t.Errorf("split mapping: Frame = %q, want %q", got, want)
	}
}
