package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"rtrace/internal/testutil"
)

// spModuleGaps are the expectations of sp-rtrace's module tests rtrace
// does not meet yet, with why. The test fails when one is met, so that
// the list stays true.
var spModuleGaps = map[string]string{}

// spSnapshot returns a reader of the files of sp-rtrace's snapshot that
// SPRTRACE_GIT names (a git clone, or a bare git dir), skipping the test
// without it (CI cannot fetch it).
func spSnapshot(t *testing.T) (show func(path string) string, gitDir string) {
	t.Helper()
	gitDir = os.Getenv("SPRTRACE_GIT")
	if gitDir == "" {
		t.Skip("set SPRTRACE_GIT to a git clone of github.com/mer-tools/sp-rtrace to run its own tests and tools")
	}
	if _, err := exec.Command("git", "--git-dir", gitDir, "rev-parse", "HEAD").Output(); err != nil {
		gitDir = filepath.Join(gitDir, ".git") // a clone's work tree
	}
	return func(path string) string {
		t.Helper()
		out, err := exec.Command("git", "--git-dir", gitDir, "show", "HEAD:"+path).Output()
		if err != nil {
			t.Fatalf("git show %s from %s: %v", path, gitDir, err)
		}
		return string(out)
	}, gitDir
}

// sp-rtrace's own module tests (tests/sp-rtrace.modules/*.exp in
// github.com/mer-tools/sp-rtrace), run as its runner runs them
// (tests/lib/sp-rtrace.exp, test_generic_module): `sp-rtrace -e MODULE
// -P-t -s -o stdout -x PROG bin`, counting the calls of each function in
// the text on stdout, with rtrace as sp-rtrace. They need the snapshot:
// SPRTRACE_GIT names a git clone (or bare git dir) of it.
func TestSpRtraceModuleTests(t *testing.T) {
	show, _ := spSnapshot(t)
	line := regexp.MustCompile(`(?m)^[0-9]+\. \[[^\]]+\] ([^\(<]+)(?:<[^>]+>)?\([0-9a-fA-Fx]+\)`)
	testModule := regexp.MustCompile(`test_module (\S+)((?:\\\n|[^\n])*)`)
	for _, name := range []string{"memory", "file", "memtransfer", "shmposix", "shmseg", "gobject"} {
		t.Run(name, func(t *testing.T) {
			exp := show("tests/sp-rtrace.modules/" + name + ".exp")
			m := testModule.FindStringSubmatch(exp)
			if m == nil {
				t.Fatalf("%s.exp: no test_module line", name)
			}
			module, items := m[1], strings.Fields(strings.ReplaceAll(m[2], "\\\n", " "))
			for _, it := range items {
				if !regexp.MustCompile(`^[a-z_0-9]+(:[0-9]+)?$`).MatchString(it) {
					t.Fatalf("%s.exp: %q is no FUNC[:COUNT]", name, it)
				}
			}
			tmp := t.TempDir()
			src := filepath.Join(tmp, name+"_test.c")
			if err := os.WriteFile(src, []byte(show("tests/sp-rtrace.modules/"+name+"_test.c")), 0o644); err != nil {
				t.Fatal(err)
			}
			flags := []string{"-O0"}
			if o := regexp.MustCompile(`set src_opts "([^"]*)"`).FindStringSubmatch(exp); o != nil {
				flags = strings.Fields(o[1])
			}
			if strings.Contains(exp, "pkg-config") {
				// gtk+-2.0 in the .exp; the test uses GObject alone.
				out, err := exec.Command("pkg-config", "--cflags", "--libs", "gobject-2.0").Output()
				if err != nil {
					testutil.RequireTool(t, "pkg-config-gobject-2.0")
				}
				flags = append(flags, strings.Fields(string(out))...)
			}
			prog := filepath.Join(tmp, name+"_test")
			if out, err := exec.Command("gcc", append([]string{"-o", prog, src}, flags...)...).CombinedOutput(); err != nil {
				t.Fatalf("gcc %s: %v\n%s", name, err, out)
			}
			r := runCmd(t, tmp, rtraceBin, "sp-rtrace", "-e", module, "-P-t", "-s", "-o", "stdout", "-x", prog, "bin")
			if r.code != 0 {
				t.Fatalf("rtrace sp-rtrace -e %s: %+v", module, r)
			}
			tracked := map[string]int{}
			for _, f := range line.FindAllStringSubmatch(r.stdout, -1) {
				tracked[f[1]]++
			}
			for _, it := range items {
				fn, count, _ := strings.Cut(it, ":")
				want := 1
				if count != "" {
					want, _ = strconv.Atoi(count)
				}
				ok := tracked[fn] >= want
				gap, known := spModuleGaps[module+"/"+fn]
				switch {
				case ok && known:
					t.Errorf("%s: %s found %d times (want %d): remove it from spModuleGaps", module, fn, tracked[fn], want)
				case !ok && known:
					t.Logf("%s: %s %d times, want %d: a known gap: %s", module, fn, tracked[fn], want, gap)
				case !ok:
					t.Errorf("%s module: function %s: %d hits, want %d\n%s", module, fn, tracked[fn], want, r.stdout)
				}
			}
		})
	}
}
