package resolver

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"rtrace/internal/testutil"
	"rtrace/internal/trace"
)

// fixtureRun is what a run of testdata/resolve.c printed: return
// addresses by tag, function addresses by name, and its r-xp mappings.
type fixtureRun struct {
	exe, lib string
	rets     map[string]uint64
	syms     map[string]uint64
	maps     []trace.Mapping
}

// fixtureBuild is one way of building resolve.c (flags and link) and
// resolvelib.c (flags and -shared -fPIC).
type fixtureBuild struct {
	name        string
	flags, link []string
}

var fixtureBuilds = []fixtureBuild{
	{"O0-pie", []string{"-O0"}, []string{"-pie", "-fPIE"}},
	{"O2-pie", []string{"-O2"}, []string{"-pie", "-fPIE"}},
	{"O0-nopie", []string{"-O0"}, []string{"-no-pie", "-fno-PIE"}},
	{"O2-nopie", []string{"-O2"}, []string{"-no-pie", "-fno-PIE"}},
	// DWARF 4 (DW_AT_ranges, .debug_ranges) in compressed sections.
	{"O2-pie-dwarf4-gz", []string{"-O2", "-gdwarf-4", "-gz"}, []string{"-pie", "-fPIE"}},
}

// buildFixture builds the library and the program linked to it (by
// absolute path, so that it needs no rpath).
func buildFixture(t testing.TB, b fixtureBuild) (exe, lib string) {
	t.Helper()
	lib = testutil.BuildC(t, "resolvelib.c", append([]string{"-g", "-shared", "-fPIC"}, b.flags...)...)
	flags := append([]string{"-g", "-DWITH_LIB"}, b.flags...)
	exe = testutil.BuildC(t, "resolve.c", append(append(flags, b.link...), lib)...)
	return exe, lib
}

// runFixture builds and runs the fixture and parses what it printed.
func runFixture(t testing.TB, b fixtureBuild) *fixtureRun {
	t.Helper()
	exe, lib := buildFixture(t, b)
	out := testutil.Run(t, "", exe)
	run := &fixtureRun{exe: exe, lib: lib, rets: map[string]uint64{}, syms: map[string]uint64{}}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 3 && (f[0] == "ret" || f[0] == "sym"):
			v, err := strconv.ParseUint(strings.TrimPrefix(f[2], "0x"), 16, 64)
			if err != nil {
				t.Fatalf("fixture output %q: %v", sc.Text(), err)
			}
			if f[0] == "ret" {
				run.rets[f[1]] = v
			} else {
				run.syms[f[1]] = v
			}
		case len(f) >= 7 && f[0] == "map":
			// map from-to perms offset dev inode path
			from, to, ok := strings.Cut(f[1], "-")
			a, err1 := strconv.ParseUint(from, 16, 64)
			z, err2 := strconv.ParseUint(to, 16, 64)
			if !ok || err1 != nil || err2 != nil {
				t.Fatalf("fixture maps line %q", sc.Text())
			}
			run.maps = append(run.maps, trace.Mapping{From: a, To: z, Path: strings.Join(f[6:], " ")})
		}
	}
	for _, tag := range []string{"mid", "inlined", "top", "main", "main-lib", "lib", "libc"} {
		if run.rets[tag] == 0 {
			t.Fatalf("fixture printed no return address %q:\n%s", tag, out)
		}
	}
	return run
}

// resolver returns a Resolver given the run's mappings, with paths
// renamed by rename (old path to new).
func (run *fixtureRun) resolver(opts Options, rename map[string]string) *Resolver {
	r := New(opts)
	for _, m := range run.maps {
		if p, ok := rename[m.Path]; ok {
			m.Path = p
		}
		r.AddMapping(m)
	}
	return r
}

// markerLine returns the line of testdata/src holding "LINE:name".
func markerLine(t testing.TB, src, name string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testutil.Root(), "testdata", src))
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "LINE:"+name+" ") {
			return i + 1
		}
	}
	t.Fatalf("%s has no marker LINE:%s", src, name)
	return 0
}

// wantFrames are the frame texts a fully resolved run gives, by tag.
func wantFrames(t testing.TB) map[string]string {
	at := func(fn, src, marker string) string {
		return fmt.Sprintf("%s() at %s:%d", fn, src, markerLine(t, src, marker))
	}
	return map[string]string{
		"mid":      at("mid", "resolve.c", "mid-call"),
		"inlined":  at("twice", "resolve.c", "inlined-call"),
		"top":      at("top", "resolve.c", "top-leaf"),
		"main":     at("main", "resolve.c", "main-leaf"),
		"main-lib": at("main", "resolve.c", "main-lib"),
		"lib":      at("lib_entry", "resolvelib.c", "lib-call"),
	}
}

// checkFrames compares the frames of run's return addresses with want.
func checkFrames(t *testing.T, r *Resolver, run *fixtureRun, want map[string]string) {
	t.Helper()
	for tag, w := range want {
		if got := r.Frame(run.rets[tag]); got != w {
			t.Errorf("Frame(%#x) (%s) = %q, want %q", run.rets[tag], tag, got, w)
		}
	}
}
