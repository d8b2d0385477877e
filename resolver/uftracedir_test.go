package resolver

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"rtrace/internal/elfx"
	"rtrace/internal/testutil"
	"rtrace/internal/uftrace"
)

// uftraceFixture is a trace of resolve.c calling into resolvelib.c (built
// with -g), recorded by the real uftrace (both built with -pg) or by
// rtrace. The program and the library sit in their own directories so
// that a test can take them away: uftrace then has only the .sym and .dbg
// files.
type uftraceFixture struct {
	tmp      string
	dir      string // the uftrace.data directory
	exe, lib string // as the session map names them
	replay   string // uftrace replay of the trace as recorded
}

// newFixture builds the program named exeName and the library libName
// (also its soname) with the extra flags, and records a trace of the
// program with the command that record returns for it.
func newFixture(t *testing.T, exeName, libName string, flags []string, record func(fx *uftraceFixture) *exec.Cmd) *uftraceFixture {
	t.Helper()
	uft := testutil.RequireTool(t, "uftrace")
	lib := testutil.BuildC(t, "resolvelib.c", append([]string{"-g", "-shared", "-fPIC", "-Wl,-soname," + libName}, flags...)...)
	exe := testutil.BuildC(t, "resolve.c", append([]string{"-DWITH_LIB", lib}, flags...)...)
	tmp := t.TempDir()
	fx := &uftraceFixture{
		tmp: tmp,
		dir: filepath.Join(tmp, "uftrace.data"),
		exe: filepath.Join(tmp, "bin", exeName),
		lib: filepath.Join(tmp, "lib", libName),
	}
	copyFile(t, exe, fx.exe)
	copyFile(t, lib, fx.lib)
	cmd := record(fx)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+filepath.Dir(fx.lib))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	fx.replay = testutil.Run(t, "", uft, "replay", "-d", fx.dir)
	if !strings.Contains(fx.replay, "lib_entry()") {
		t.Fatalf("no call of lib_entry recorded:\n%s", fx.replay)
	}
	return fx
}

// recordUftrace records the fixture with uftrace.
func recordUftrace(t *testing.T, exeName, libName string) *uftraceFixture {
	t.Helper()
	uft := testutil.RequireTool(t, "uftrace")
	return newFixture(t, exeName, libName, []string{"-pg"}, func(fx *uftraceFixture) *exec.Cmd {
		return exec.Command(uft, "record", "-d", fx.dir, fx.exe)
	})
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// removeModuleFiles deletes every .sym and .dbg of the trace.
func (fx *uftraceFixture) removeModuleFiles(t *testing.T) {
	t.Helper()
	for _, ext := range []string{"*.sym", "*.dbg"} {
		files, _ := filepath.Glob(filepath.Join(fx.dir, ext))
		for _, f := range files {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// stripMapIDs removes the " build-id:" uftrace appends to map lines,
// leaving maps like rtrace's: uftrace then names files by path checksum.
func (fx *uftraceFixture) stripMapIDs(t *testing.T) {
	t.Helper()
	maps, _ := filepath.Glob(filepath.Join(fx.dir, "sid-*.map"))
	for _, m := range maps {
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		b = regexp.MustCompile(` build-id:[0-9a-f]+`).ReplaceAll(b, nil)
		if err := os.WriteFile(m, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// hideModules moves the program and the library away: uftrace can no
// longer read their symbols from the ELF files.
func (fx *uftraceFixture) hideModules(t *testing.T) {
	t.Helper()
	for _, d := range []string{filepath.Dir(fx.exe), filepath.Dir(fx.lib)} {
		if err := os.Rename(d, d+".gone"); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
}

// declLine returns the line of testdata/src that holds text.
func declLine(t *testing.T, src, text string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testutil.Root(), "testdata", src))
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, text) {
			return i + 1
		}
	}
	t.Fatalf("%s has no line with %q", src, text)
	return 0
}

// written returns the report entry of the module at path.
func written(t *testing.T, rep ModuleReport, path string) ModuleFiles {
	t.Helper()
	for _, w := range rep.Written {
		if w.Path == path {
			return w
		}
	}
	t.Fatalf("no files written for %s; report: %+v", path, rep)
	return ModuleFiles{}
}

// checkReplay runs uftrace on the trace with the modules hidden: replay
// must show every name as it did with uftrace's own files, and --srcline
// the declaration line of the library's functions from the .dbg written.
func (fx *uftraceFixture) checkReplay(t *testing.T) {
	t.Helper()
	fx.hideModules(t)
	uft := testutil.RequireTool(t, "uftrace")
	if got := testutil.Run(t, "", uft, "replay", "-d", fx.dir); got != fx.replay {
		t.Errorf("uftrace replay with the files written:\n%s\nwant, as recorded:\n%s", got, fx.replay)
	}
	src := testutil.Run(t, "", uft, "replay", "--srcline", "-d", fx.dir)
	for fn, decl := range map[string]string{"lib_entry": "int lib_entry(int x)", "lib_leaf": "static void lib_leaf(void)"} {
		want := fmt.Sprintf("resolvelib.c:%d */", declLine(t, "resolvelib.c", decl))
		if !regexp.MustCompile(`\b` + fn + `\(\).*` + regexp.QuoteMeta(want)).MatchString(src) {
			t.Errorf("uftrace replay --srcline shows no %s ... %s:\n%s", fn, want, src)
		}
	}
	// uftrace drops a .dbg it cannot parse, or whose functions the .sym
	// lacks, with this debug message.
	cmd := exec.Command(uft, "replay", "--srcline", "-v", "-d", fx.dir)
	out, err := cmd.CombinedOutput()
	if err != nil || bytes.Contains(out, []byte("invalid dbg file")) {
		t.Errorf("uftrace replay --srcline -v: %v\n%s", err, grepLines(out, "dbg"))
	}
}

// grepLines returns the lines of out that contain s.
func grepLines(out []byte, s string) string {
	var b strings.Builder
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, s) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// TestWriteModuleFiles rewrites the .sym and .dbg files of a trace the
// real uftrace recorded, from scratch or over its own, with its maps as
// they are (build ids on the lines) and as rtrace writes them (none).
func TestWriteModuleFiles(t *testing.T) {
	for _, c := range []struct {
		name          string
		keep, stripID bool
	}{
		{"from scratch", false, false},
		{"over uftrace's files", true, false},
		{"maps without build ids", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			fx := recordUftrace(t, "resolve", "libresolve.so")
			if !c.keep {
				fx.removeModuleFiles(t)
			}
			if c.stripID {
				fx.stripMapIDs(t)
			}
			var warn strings.Builder
			rep, err := WriteModuleFiles(fx.dir, ModuleOptions{Warn: &warn})
			if err != nil {
				t.Fatal(err)
			}
			if warn.Len() > 0 || len(rep.Skipped) > 0 {
				t.Errorf("warnings:\n%s\nskipped: %v", warn.String(), rep.Skipped)
			}
			lib := written(t, rep, fx.lib)
			if lib.Name != "libresolve.so" || lib.DebugFuncs < 2 {
				t.Errorf("library: %+v, want libresolve.so with .dbg blocks for lib_entry and lib_leaf", lib)
			}
			if exe := written(t, rep, fx.exe); exe.Name != "resolve" || exe.DebugFuncs != 0 {
				t.Errorf("program: %+v, want resolve without .dbg (built without -g)", exe)
			}
			checkLibc(t, fx, rep)
			fx.checkReplay(t)
		})
	}
}

// checkLibc checks the files of the C library: with its separate debug
// file installed (libc6-dbg), the full symbol table and source lines.
func checkLibc(t *testing.T, fx *uftraceFixture, rep ModuleReport) {
	t.Helper()
	libc := libcFiles(t, rep)
	f, err := elfx.Open(libc.Path)
	if err != nil {
		t.Fatal(err)
	}
	debug := filepath.Join("/usr/lib/debug/.build-id", f.BuildID[:2], f.BuildID[2:]+".debug")
	if _, err := os.Stat(debug); err != nil {
		// The other checks of the fixture go on; under CI=true, where
		// .ci/run installs libc6-dbg, a missing file fails.
		if testutil.InCI() {
			t.Errorf("no debug file for %s (CI=true: .ci/run installs libc6-dbg): %v", libc.Path, err)
		} else {
			t.Logf("no debug file for %s (libc6-dbg): %v", libc.Path, err)
		}
		return
	}
	if libc.DebugFile != debug || libc.DebugFuncs == 0 {
		t.Errorf("libc: %+v, want symbols and lines from %s", libc, debug)
	}
	syms, err := os.ReadFile(filepath.Join(fx.dir, libc.Name+".sym"))
	if err != nil {
		t.Fatal(err)
	}
	// A static function of qsort's (msort_with_tmp.part.0 in glibc 2.36):
	// in .symtab only, which libc.so.6 lacks.
	if !bytes.Contains(syms, []byte(" t msort_with_tmp")) {
		t.Errorf("%s.sym lacks the local symbols of the debug file", libc.Name)
	}
	dbg, err := os.Open(filepath.Join(fx.dir, libc.Name+".dbg"))
	if err != nil {
		t.Fatal(err)
	}
	defer dbg.Close()
	funcs, err := uftrace.ParseDebug(dbg)
	if err != nil {
		t.Fatal(err)
	}
	for _, fn := range funcs {
		if strings.HasPrefix(fn.Name, "msort_with_tmp") && fn.Line > 0 && strings.HasSuffix(fn.File, "msort.c") {
			return
		}
	}
	t.Errorf("%s.dbg has no line of msort_with_tmp in msort.c (%d functions)", libc.Name, len(funcs))
}

// libcFiles returns the report entry of the C library.
func libcFiles(t *testing.T, rep ModuleReport) ModuleFiles {
	t.Helper()
	for _, w := range rep.Written {
		if filepath.Base(w.Path) == "libc.so.6" {
			return w
		}
	}
	t.Fatalf("no files written for libc.so.6: %+v", rep)
	return ModuleFiles{}
}

// TestWriteModuleFilesSameBasename names the program and the library
// alike: the second module's files take the suffix uftrace looks for,
// from the map's build id or, without one, from the path; over the files
// uftrace's recorder wrote, the same names as it chose.
func TestWriteModuleFilesSameBasename(t *testing.T) {
	for _, c := range []struct {
		name          string
		keep, stripID bool
	}{
		{"build ids", false, false},
		{"no build ids", false, true},
		{"over uftrace's files", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			fx := recordUftrace(t, "app", "app")
			recorded := moduleFileNames(t, fx.dir)
			if !c.keep {
				fx.removeModuleFiles(t)
			}
			if c.stripID {
				fx.stripMapIDs(t)
			}
			rep, err := WriteModuleFiles(fx.dir, ModuleOptions{Warn: testWriter{t}})
			if err != nil {
				t.Fatal(err)
			}
			// One module takes the plain name, the other the suffix.
			names := map[string]string{written(t, rep, fx.exe).Name: fx.exe, written(t, rep, fx.lib).Name: fx.lib}
			other := fx.lib
			if names["app"] == fx.lib {
				other = fx.exe
			}
			f, err := elfx.Open(other)
			if err != nil {
				t.Fatal(err)
			}
			alt := "app-" + f.BuildID[:4]
			if c.stripID {
				alt = "app-" + uftrace.AltSymSuffix(other, "")
			}
			if names["app"] == "" || names[alt] != other {
				t.Fatalf("files named %v, want app and %s (for %s)", names, alt, other)
			}
			if c.keep && !reflect.DeepEqual(moduleFileNames(t, fx.dir)[alt], recorded[alt]) {
				t.Errorf("files named %v; uftrace record named them %v", names, recorded)
			}
			fx.checkReplay(t)
			// Under another suffix uftrace does not find the files: the
			// names above are the ones it looks up.
			if err := os.Rename(filepath.Join(fx.dir, alt+".sym"), filepath.Join(fx.dir, "app-zzzz.sym")); err != nil {
				t.Fatal(err)
			}
			fn := map[string]string{fx.exe: "top()", fx.lib: "lib_leaf()"}[other]
			if out := testutil.Run(t, "", testutil.RequireTool(t, "uftrace"), "replay", "-d", fx.dir); strings.Contains(out, fn) {
				t.Errorf("uftrace found %s without %s.sym:\n%s", fn, alt, out)
			}
		})
	}
}

// moduleFileNames returns the "# path name:" of each .sym file of dir, by
// file name without .sym.
func moduleFileNames(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.sym"))
	out := map[string]string{}
	for _, f := range files {
		out[strings.TrimSuffix(filepath.Base(f), ".sym")] = headerPath(f)
	}
	return out
}

// testWriter sends warnings to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// TestWriteModuleFilesRtrace rewrites the files of a trace rtrace
// recorded, with functions of the library and of the C library: its maps
// are /proc copies without build ids, and with libc6-dbg installed qsort
// gets its source line from libc's separate debug file.
func TestWriteModuleFilesRtrace(t *testing.T) {
	rtrace, err := testutil.BuildRtrace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fx := newFixture(t, "resolve", "libresolve.so", nil, func(fx *uftraceFixture) *exec.Cmd {
		return exec.Command(rtrace, "record", "-d", fx.dir, "-P", ".", "-P", "lib_.*@libresolve.so", "-P", "qsort@libc.so.6", "--", fx.exe)
	})
	fx.removeModuleFiles(t)
	var warn strings.Builder
	rep, err := WriteModuleFiles(fx.dir, ModuleOptions{Warn: &warn})
	if err != nil {
		t.Fatal(err)
	}
	if warn.Len() > 0 || len(rep.Skipped) > 0 {
		t.Errorf("warnings:\n%s\nskipped: %v", warn.String(), rep.Skipped)
	}
	checkLibc(t, fx, rep)
	fx.checkReplay(t)
	if libc := libcFiles(t, rep); libc.DebugFile != "" {
		src := testutil.Run(t, "", testutil.RequireTool(t, "uftrace"), "replay", "--srcline", "-d", fx.dir)
		if !regexp.MustCompile(`\bqsort\(\) \{ /\* \S*msort\.c:\d+ \*/`).MatchString(src) {
			t.Errorf("uftrace replay --srcline shows no line of qsort in msort.c:\n%s", src)
		}
	}
}

// TestWriteModuleFilesKeepsArgSpecs leaves alone a .dbg with argument
// specs: a trace recorded with auto-args decodes its argument records by
// them, so specs rtrace derives differently would break replay.
func TestWriteModuleFilesKeepsArgSpecs(t *testing.T) {
	fx := recordUftrace(t, "resolve", "libresolve.so")
	fx.removeModuleFiles(t)
	path := filepath.Join(fx.dir, "libresolve.so.dbg")
	specs := []byte("# path name: " + fx.lib + "\nF: 1140 lib_entry\nA: @arg1/i32\nR: @retval/i32\n")
	if err := os.WriteFile(path, specs, 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := WriteModuleFiles(fx.dir, ModuleOptions{Warn: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	if lib := written(t, rep, fx.lib); !lib.KeptDbg || lib.DebugFuncs != 0 {
		t.Errorf("library: %+v, want its .dbg kept", lib)
	}
	if b, err := os.ReadFile(path); !bytes.Equal(b, specs) {
		t.Errorf("libresolve.so.dbg changed (%v):\n%s", err, b)
	}
	if _, err := os.Stat(filepath.Join(fx.dir, "libresolve.so.sym")); err != nil {
		t.Error(err)
	}
}

// TestWriteModuleFilesBadModules adds modules that are corrupt, not ELF
// or gone to the trace's map: one warning each, no panic, their existing
// files untouched, and the other modules' files written.
func TestWriteModuleFilesBadModules(t *testing.T) {
	fx := recordUftrace(t, "resolve", "libresolve.so")
	fx.removeModuleFiles(t)
	orig, err := os.ReadFile(fx.lib)
	if err != nil {
		t.Fatal(err)
	}
	ef, err := elf.Open(fx.lib)
	if err != nil {
		t.Fatal(err)
	}
	info := ef.Section(".debug_info")
	ef.Close()
	if info == nil {
		t.Fatal("fixture library has no .debug_info")
	}
	garble := func(off, n uint64) []byte {
		b := bytes.Clone(orig)
		for i := off; i < off+n && i < uint64(len(b)); i++ {
			b[i] = 0xa5
		}
		return b
	}
	shoff := binary.LittleEndian.Uint64(orig[0x28:]) // e_shoff (gABI ELF64 header)
	bad := filepath.Join(fx.tmp, "bad")
	files := map[string][]byte{
		"libbadshdr.so":  garble(shoff, uint64(len(orig))-shoff),
		"libtrunc.so":    orig[:len(orig)/3],
		"libbaddwarf.so": garble(info.Offset, info.Size),
		"libtext.so":     []byte("not an ELF file\n"),
	}
	for name, b := range files {
		if err := os.MkdirAll(bad, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bad, name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A module gone since the recording keeps the file it had.
	gone := filepath.Join(bad, "libgone.so")
	old := []byte("# path name: " + gone + "\n0000000000001000 T gone_func\n0000000000001010 ? __sym_end\n")
	if err := os.WriteFile(filepath.Join(fx.dir, "libgone.so.sym"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	maps, _ := filepath.Glob(filepath.Join(fx.dir, "sid-*.map"))
	if len(maps) != 1 {
		t.Fatalf("want one session map, got %v", maps)
	}
	var extra strings.Builder
	for i, name := range []string{"libbadshdr.so", "libtrunc.so", "libbaddwarf.so", "libtext.so", "libgone.so"} {
		start := uint64(0x100000000) + uint64(i)<<24
		fmt.Fprintf(&extra, "%x-%x r-xp 00000000 00:00 0 %s\n", start, start+0x1000, filepath.Join(bad, name))
	}
	recorded, err := os.ReadFile(maps[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(maps[0], append(bytes.Clone(recorded), extra.String()...), 0o644); err != nil {
		t.Fatal(err)
	}

	var warn strings.Builder
	rep, err := WriteModuleFiles(fx.dir, ModuleOptions{Warn: &warn})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("warnings:\n" + warn.String())
	lines := strings.Split(strings.TrimSpace(warn.String()), "\n")
	if len(lines) != 5 {
		t.Errorf("want 5 warnings, got %d", len(lines))
	}
	for _, name := range []string{"libbadshdr.so", "libtrunc.so", "libbaddwarf.so", "libtext.so", "libgone.so"} {
		n := 0
		for _, l := range lines {
			if strings.Contains(l, filepath.Join(bad, name)) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d warnings name %s, want 1", n, name)
		}
	}
	if len(rep.Skipped) != 4 {
		t.Errorf("skipped %v, want the 4 unreadable modules", rep.Skipped)
	}
	// Corrupt DWARF: symbols, no source lines.
	if w := written(t, rep, filepath.Join(bad, "libbaddwarf.so")); w.Warning == nil || w.DebugFuncs != 0 || w.Symbols == 0 {
		t.Errorf("libbaddwarf.so: %+v, want symbols, a warning and no .dbg", w)
	}
	for name, want := range map[string]bool{
		"libbaddwarf.so.sym": true, "libbaddwarf.so.dbg": false,
		"libbadshdr.so.sym": false, "libtrunc.so.sym": false, "libtext.so.sym": false,
	} {
		if _, err := os.Stat(filepath.Join(fx.dir, name)); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", name, err == nil, want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(fx.dir, "libgone.so.sym")); !bytes.Equal(b, old) {
		t.Errorf("libgone.so.sym changed or removed (%v):\n%s", err, b)
	}
	written(t, rep, fx.lib)
	written(t, rep, fx.exe)
	// uftrace 0.13 itself crashes (SIGSEGV) reading a module with
	// garbled section headers that has no .sym: drop the bad modules.
	if err := os.WriteFile(maps[0], recorded, 0o644); err != nil {
		t.Fatal(err)
	}
	fx.checkReplay(t)
}
