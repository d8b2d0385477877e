package e2e_test

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"rtrace/internal/elfx"
	"rtrace/internal/testutil"
)

// unwoundLine is the -v line on a stripped executable.
var unwoundLine = regexp.MustCompile(`has no symbol table: traced the (\d+) functions its unwind tables bound, .*; left out: (\d+) split-off parts, (\d+) others`)

// A stripped program is traced through the functions its unwind tables
// (FDEs) bound: the tree is the unstripped build's, each function named
// func_<address>, the parts gcc split off (foo.cold) left out as the
// symbol table would have them. `rtrace resolve -i` then names them from
// the debug file that the program's .gnu_debuglink names, and the tree is
// the unstripped one, names included.
func TestRecordStripped(t *testing.T) {
	objcopy := testutil.RequireTool(t, "objcopy")
	for _, c := range []struct {
		src   string
		flags []string
		args  []string
		code  int
	}{
		{"cold.c", []string{"-O2"}, nil, 0},
		{"chain.c", []string{"-O0"}, nil, 18 % 7},
		{"fib.c", []string{"-O2"}, []string{"5"}, 0},
		{"cxx.cc", []string{"-O2"}, nil, 0},
	} {
		t.Run(c.src+c.flags[0], func(t *testing.T) {
			full := testutil.BuildC(t, c.src, append([]string{"-g"}, c.flags...)...)
			tmp := t.TempDir()
			testutil.Run(t, tmp, objcopy, "--only-keep-debug", full, "prog.debug")
			testutil.Run(t, tmp, testutil.RequireTool(t, "strip"), "--strip-all", "-o", "prog", full)
			testutil.Run(t, tmp, objcopy, "--add-gnu-debuglink=prog.debug", "prog")

			r := runCmd(t, tmp, rtraceBin, append([]string{"record", "-d", "U", "--", full}, c.args...)...)
			if r.code != c.code {
				t.Fatalf("unstripped: %+v", r)
			}
			want := tree(replay(t, filepath.Join(tmp, "U")))
			r = runCmd(t, tmp, rtraceBin, append([]string{"record", "-v", "-d", "S", "--", "./prog"}, c.args...)...)
			if r.code != c.code {
				t.Fatalf("stripped: %+v", r)
			}
			raw := replay(t, filepath.Join(tmp, "S"))
			if !strings.Contains(raw, "func_") {
				t.Fatalf("no func_<address> in the stripped program's trace:\n%s", raw)
			}
			got := tree(realNames(t, full, raw))
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("stripped, names mapped back:\n%s\nunstripped:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			// The -v line counts the split-off parts: as many as the
			// symbol table names.
			m := unwoundLine.FindStringSubmatch(r.stderr)
			if m == nil {
				t.Fatalf("no line on the unwind tables in:\n%s", r.stderr)
			}
			f, err := elfx.Open(full)
			if err != nil {
				t.Fatal(err)
			}
			cold := 0
			for _, fn := range f.Funcs {
				if strings.Contains(fn.Name, ".cold") {
					cold++
				}
			}
			if m[2] != strconv.Itoa(cold) {
				t.Errorf("%s split-off parts left out, the symbol table has %d: %s", m[2], cold, m[0])
			}
			if c.src == "cold.c" && cold == 0 {
				t.Errorf("gcc split off no part of cold.c: the test checks less than it says")
			}

			testutil.Run(t, tmp, rtraceBin, "resolve", "-i", "S")
			if got := tree(replay(t, filepath.Join(tmp, "S"))); strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("stripped, after rtrace resolve -i:\n%s\nunstripped:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// realNames replaces each func_<address> of a replay of the stripped
// build of full with the name full's symbol table gives that address.
func realNames(t *testing.T, full, replay string) string {
	t.Helper()
	f, err := elfx.Open(full)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, fn := range f.Funcs {
		names[elfx.SyntheticName(fn.Value)] = fn.Name
	}
	return regexp.MustCompile(`func_[0-9a-f]+`).ReplaceAllStringFunc(replay, func(s string) string {
		if n, ok := names[s]; ok {
			return n
		}
		t.Errorf("%s is no function of %s", s, full)
		return s
	})
}

// Without unwind tables, a stripped program has nothing to bound its
// functions: only its calls into libraries are recorded, and the warning
// says so.
func TestRecordStrippedNoFDE(t *testing.T) {
	tmp := t.TempDir()
	prog := filepath.Join(tmp, "stripped")
	testutil.Run(t, tmp, testutil.RequireTool(t, "strip"), "-o", prog, testutil.BuildC(t, "chain.c", "-O0", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables"))
	r := runCmd(t, tmp, rtraceBin, "record", "-d", "R", "--", prog)
	if r.code != 18%7 || r.stdout != "chain 18\n" || !strings.Contains(r.stderr, "has no function symbols and no unwind tables: only its calls into libraries will be recorded") {
		t.Errorf("stripped program: %+v, want its output and a warning", r)
	}
	if out := replay(t, filepath.Join(tmp, "R")); !strings.Contains(out, "printf()") || strings.Contains(out, "func_") {
		t.Errorf("want the stripped program's library calls only:\n%s", out)
	}
	r = runCmd(t, tmp, rtraceBin, "record", "--no-libcall", "-d", "R2", "--", prog)
	if r.code != 18%7 || !strings.Contains(r.stderr, "has no function symbols and no unwind tables: no calls will be recorded") {
		t.Errorf("stripped program, --no-libcall: %+v", r)
	}
	testutil.Run(t, tmp, testutil.RequireTool(t, "uftrace"), "info", "-d", "R")
}

// Debian's bzip2 is stripped: every function its .eh_frame bounds (as
// readelf lists the FDEs) is instrumented but the entry point, and the
// trace names them func_<address> in its .sym file.
func TestRecordDebianBzip2(t *testing.T) {
	bzip2 := testutil.RequireTool(t, "bzip2")
	readelf := testutil.RequireTool(t, "readelf")
	ef, err := elf.Open(bzip2)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	if syms, _ := ef.Symbols(); len(syms) > 0 {
		t.Skipf("%s has a symbol table: not the stripped program this test is about", bzip2)
	}
	var plt [][2]uint64
	for _, s := range ef.Sections {
		if s.Name == ".plt" || strings.HasPrefix(s.Name, ".plt.") {
			plt = append(plt, [2]uint64{s.Addr, s.Addr + s.Size})
		}
	}
	var fdes []uint64
	for _, m := range regexp.MustCompile(`FDE .* pc=([0-9a-f]+)\.\.`).FindAllStringSubmatch(testutil.Run(t, "", readelf, "--debug-dump=frames", bzip2), -1) {
		pc, _ := strconv.ParseUint(m[1], 16, 64)
		inPLT := false
		for _, r := range plt {
			inPLT = inPLT || pc >= r[0] && pc < r[1]
		}
		if !inPLT && pc != ef.Entry {
			fdes = append(fdes, pc)
		}
	}
	if len(fdes) < 10 {
		t.Fatalf("readelf lists %d FDEs of functions in %s", len(fdes), bzip2)
	}

	tmp := t.TempDir()
	if err := os.WriteFile(filepath.Join(tmp, "in.txt"), []byte(strings.Repeat("rtrace and bzip2\n", 500)), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCmd(t, tmp, rtraceBin, "record", "-v", "-d", "B", "--", bzip2, "-k", "in.txt")
	if r.code != 0 {
		t.Fatalf("rtrace record bzip2: %+v", r)
	}
	m := unwoundLine.FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("no line on the unwind tables in:\n%s", r.stderr)
	}
	traced, _ := strconv.Atoi(m[1])
	parts, _ := strconv.Atoi(m[2])
	if traced+parts != len(fdes) || m[3] != "1" { // the other: the entry point
		t.Errorf("readelf lists %d functions but the entry point; rtrace: %s", len(fdes), m[0])
	}
	sym, err := os.ReadFile(filepath.Join(tmp, "B", "bzip2.sym"))
	if err != nil {
		t.Fatal(err)
	}
	for _, pc := range fdes {
		if !strings.Contains(string(sym), fmt.Sprintf(" %s\n", elfx.SyntheticName(pc))) {
			t.Errorf("bzip2.sym has no %s", elfx.SyntheticName(pc))
		}
	}
	out := replay(t, filepath.Join(tmp, "B"))
	called := map[string]bool{}
	for _, n := range regexp.MustCompile(`func_[0-9a-f]+`).FindAllString(out, -1) {
		called[n] = true
	}
	if len(called) < 5 || !strings.Contains(out, "BZ2_bzWriteOpen()") {
		t.Errorf("bzip2 -k: %d of its functions called, want 5 or more, and its calls into libbz2:\n%s", len(called), out)
	}
	if _, err := os.Stat(filepath.Join(tmp, "in.txt.bz2")); err != nil {
		t.Errorf("bzip2 wrote no output under rtrace: %v", err)
	}
}

// --with-syms DIR: a stripped program traced with the functions of the
// .sym file DIR holds for it (one of its unstripped build's traces): the
// same tree, by name, as the unstripped program's. A .sym of another
// build is refused.
func TestRecordWithSyms(t *testing.T) {
	strip := testutil.RequireTool(t, "strip")
	for _, src := range []string{"chain.c", "cxx.cc"} {
		t.Run(src, func(t *testing.T) {
			tmp := t.TempDir()
			for _, d := range []string{"full", "stripped"} {
				os.Mkdir(filepath.Join(tmp, d), 0o755)
			}
			full := filepath.Join(tmp, "full", "prog")
			testutil.Run(t, tmp, "cp", testutil.BuildC(t, src, "-O2", "-fno-inline"), full)
			testutil.Run(t, tmp, strip, "--strip-all", "-o", filepath.Join(tmp, "stripped", "prog"), full)
			r := runCmd(t, tmp, rtraceBin, "record", "-q", "-d", "U", "--", full)
			want := tree(replay(t, filepath.Join(tmp, "U")))
			got := runCmd(t, tmp, rtraceBin, "record", "-q", "--with-syms", "U", "-d", "W", "--", "stripped/prog")
			if got != r {
				t.Errorf("the stripped program under rtrace printed/exited differently:\nunstripped: %+v\nstripped:   %+v", r, got)
			}
			if tr := tree(replay(t, filepath.Join(tmp, "W"))); strings.Join(tr, "|") != strings.Join(want, "|") {
				t.Errorf("stripped, --with-syms:\n%s\nunstripped:\n%s", strings.Join(tr, "\n"), strings.Join(want, "\n"))
			}
		})
	}
	tmp := t.TempDir()
	runCmd(t, tmp, rtraceBin, "record", "-q", "-d", "U", "--", testutil.BuildC(t, "chain.c", "-O0"))
	os.Rename(filepath.Join(tmp, "U", filepath.Base(testutil.BuildC(t, "chain.c", "-O0"))+".sym"), filepath.Join(tmp, "U", "prog.sym"))
	testutil.Run(t, tmp, "cp", testutil.BuildC(t, "fib.c", "-O0"), filepath.Join(tmp, "prog"))
	r := runCmd(t, tmp, rtraceBin, "record", "-q", "--with-syms", "U", "-d", "W", "--", "./prog")
	if r.code != 2 || !strings.Contains(r.stderr, "is of another build of") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("a .sym of another build: %+v, want one line and exit 2", r)
	}
	if r := runCmd(t, tmp, rtraceBin, "record", "--with-syms", "nowhere", "--", "./prog"); r.code != 2 || !strings.Contains(r.stderr, "--with-syms nowhere: not a directory") {
		t.Errorf("--with-syms nowhere: %+v", r)
	}
}
