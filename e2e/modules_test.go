package e2e_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"rtrace/internal/testutil"
)

// pkgConfig returns the compiler flags of a pkg-config package.
func pkgConfig(t *testing.T, pkg string) []string {
	t.Helper()
	pc := testutil.RequireTool(t, "pkg-config")
	out, err := exec.Command(pc, "--cflags", "--libs", pkg).Output()
	if err != nil {
		testutil.RequireCapability(t, "pkg-config %s: %v (Debian: libglib2.0-dev)", pkg, err)
	}
	return strings.Fields(string(out))
}

// qtCore is QtCore's library, which testdata/qobject.c links directly (it
// needs no Qt headers: Debian's libqt5core5a).
const qtCore = "/usr/lib/x86_64-linux-gnu/libQt5Core.so.5"

// TestResourceModules: the modules sp-rtrace and functracer have beside
// memory and file, each on a fixture that uses it, with both engines:
// gobject (GObject references, refcounted: the object kept is the leak),
// qobject (QObject constructors and destructors), memtransfer (memcpy,
// memset, strcpy, strdup, wcscpy where the program calls them, sizes as
// the program computes them) and audit (the calls of the functions
// --audit names, with their backtraces).
func TestResourceModules(t *testing.T) {
	leaky := testutil.BuildC(t, "leaky.c", "-O0", "-g")
	type check func(t *testing.T, stdout, report, all string)
	leakOf := func(fn, marker, src string) check {
		return func(t *testing.T, stdout, report, all string) {
			var kept string
			fmt.Sscanf(stdout, "kept %s", &kept)
			m := leakSummary.FindStringSubmatch(report)
			if m == nil || m[1] != "1" {
				t.Errorf("leak summary %q, want 1 block\n%s", m, report)
			}
			for _, w := range []string{"= " + kept, fmt.Sprintf("%s() at %s:%d", fn, src, markerLines(t, src)[marker])} {
				if !strings.Contains(report, w) {
					t.Errorf("the leak report lacks %q:\n%s", w, report)
				}
			}
		}
	}
	for _, c := range []struct {
		name  string
		build func(t *testing.T) string
		args  []string
		check check
	}{
		{"gobject", func(t *testing.T) string {
			return testutil.BuildC(t, "gobject.c", append([]string{"-O0", "-g"}, pkgConfig(t, "gobject-2.0")...)...)
		}, []string{"--module", "gobject"}, leakOf("make", "make", "gobject.c")},
		{"qobject", func(t *testing.T) string {
			if _, err := os.Stat(qtCore); err != nil {
				testutil.RequireCapability(t, "%s: %v (Debian: libqt5core5a)", qtCore, err)
			}
			return testutil.BuildC(t, "qobject.c", "-O0", "-g", qtCore)
		}, []string{"--module", "qobject"}, leakOf("make", "make", "qobject.c")},
		{"memtransfer", func(t *testing.T) string {
			return testutil.BuildC(t, "memtransfer.c", "-O0", "-g", "-fno-builtin")
		}, []string{"--module", "memtransfer"}, func(t *testing.T, stdout, _, all string) {
			// Each line the program printed is a call the trace holds:
			// "name size address" for "N. [time] name(size) = address".
			n := 0
			for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
				var name, addr string
				var size int
				if _, err := fmt.Sscanf(l, "%s %d %s", &name, &size, &addr); err != nil {
					t.Fatalf("fixture line %q: %v", l, err)
				}
				n++
				if w := fmt.Sprintf("] %s(%d) = %s", name, size, addr); !strings.Contains(all, w) {
					t.Errorf("no call %q in the trace:\n%s", w, all)
				}
			}
			if got := strings.Count(all, "\n\t0x"); n != 5 || got < 5 {
				t.Errorf("%d calls printed, %d frames in the trace", n, got)
			}
		}},
		{"audit", func(*testing.T) string { return leaky }, []string{"--audit", "small_block,zeroed_block"}, func(t *testing.T, _, _, all string) {
			// 1000 blocks: i % 3 == 0 small, == 1 zeroed.
			for fn, want := range map[string]int{"small_block": 334, "zeroed_block": 333} {
				if got := strings.Count(all, "] "+fn+"(1) = 0x1\n"); got != want {
					t.Errorf("%d calls of %s, want %d", got, fn, want)
				}
			}
			for _, w := range []string{"make_block() at leaky.c:", "main() at leaky.c:"} {
				if !strings.Contains(all, w) {
					t.Errorf("no frame %q in the calls' backtraces", w)
				}
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			prog := c.build(t)
			for _, engine := range engines {
				t.Run(engine, func(t *testing.T) {
					tmp := t.TempDir()
					args := append([]string{"record", "-q", "--engine=" + engine, "--start", "-o", "D"}, c.args...)
					r := runCmd(t, tmp, rtraceBin, append(args, prog)...)
					if r.code != 0 {
						t.Fatalf("record: exit %d\n%s", r.code, r.stderr)
					}
					noResWarnings(t, r.stderr)
					raw := rawFiles(t, filepath.Join(tmp, "D"), ".rtrace")
					if len(raw) != 1 {
						t.Fatalf("raw files %v", raw)
					}
					report := runCmd(t, tmp, rtraceBin, "postproc", "-l", "-c", "-r", "-i", raw[0]).stdout
					all := runCmd(t, tmp, rtraceBin, "postproc", "-r", "-i", raw[0]).stdout
					c.check(t, r.stdout, report, all)
				})
			}
		})
	}
}

// TestResourceStatic: a static program's allocator is its own code: its
// calls are recorded too (they were not at all).
func TestResourceStatic(t *testing.T) {
	prog := testutil.BuildC(t, "leaky.c", "-O2", "-g", "-static")
	lines := markerLines(t, "leaky.c")
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			tmp := t.TempDir()
			r := runCmd(t, tmp, rtraceBin, "record", "-q", "--engine="+engine, "--module", "memory", "--start", "-o", "D", prog)
			if r.code != 0 {
				t.Fatalf("record: exit %d\n%s", r.code, r.stderr)
			}
			raw := rawFiles(t, filepath.Join(tmp, "D"), ".rtrace")
			if len(raw) != 1 {
				t.Fatalf("raw files %v", raw)
			}
			rep := runCmd(t, tmp, rtraceBin, "postproc", "-l", "-c", "-r", "-i", raw[0]).stdout
			for fn, marker := range map[string]string{"small_block": "small", "zeroed_block": "zeroed", "grown_block": "grown"} {
				if w := fmt.Sprintf("%s() at leaky.c:%d", fn, lines[marker]); !strings.Contains(rep, w) {
					t.Errorf("no frame %q in the report:\n%s", w, clipLines(rep, 40))
				}
			}
		})
	}
}

// TestForeignBreakpoint: a resource function whose entry holds another
// tracer's breakpoint (a uprobe from bpftrace or perf probe on a shared
// library puts its int3 into every process mapping it: that is how
// malloc once went missing from a window, and how a uprobe registered on
// a function rtrace had patched killed the program with SIGSEGV) is not
// instrumented, and a warning names it and says why, with both engines.
func TestForeignBreakpoint(t *testing.T) {
	needAttach(t)
	prog := testutil.BuildC(t, "foreignbp.c", "-O0", "-g")
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			cmd := exec.Command(prog)
			in, _ := cmd.StdinPipe()
			out, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cmd.Process.Kill(); cmd.Wait() }()
			lines := newLineLog(out)
			var pid int
			fmt.Sscanf(lines.waitFor("ready "), "ready %d", &pid)
			if pid == 0 {
				t.Fatal("the fixture did not start")
			}
			tmp := t.TempDir()
			at := exec.Command(rtraceBin, "attach", "--engine="+engine, "--audit", "victim", "--start", "-o", "D", "--duration", "100ms", strconv.Itoa(pid))
			at.Dir = tmp
			stderr, err := at.CombinedOutput()
			if err != nil {
				t.Fatalf("attach: %v\n%s", err, stderr)
			}
			want := "rtrace: warning: victim in " + prog + " is not traced (cannot displace instruction: an int3 is there already: another tracer's breakpoint"
			if !strings.Contains(string(stderr), want) {
				t.Errorf("rtrace does not say why victim is not traced:\n%s\nwant %q", stderr, want)
			}
			in.Close()
			if err := cmd.Wait(); err != nil {
				t.Errorf("the program after the detach: %v", err)
			}
		})
	}
}

// TestAliasNames: glibc exports some functions under two names (open and
// open64, mmap and mmap64, fopen and fopen64 are one function each on
// x86-64), so rtrace's breakpoint sees one; sp-rtrace's wrappers of each
// name told the calls apart. rtrace's post-processor names each call as
// its caller called it, from the call instruction before the first frame:
// through the PLT, or through the GOT (-fno-plt). The text of -P and of
// rtrace postproc on the raw file say the same.
func TestAliasNames(t *testing.T) {
	want := []string{"open", "open64", "mmap", "mmap64", "fopen", "fopen64"}
	record := regexp.MustCompile(`(?m)^[0-9]+\. \[[^\]]+\] ([a-z0-9_]+)<`)
	names := func(text string) []string {
		var got []string
		for _, m := range record.FindAllStringSubmatch(text, -1) {
			if slices.Contains(want, m[1]) {
				got = append(got, m[1])
			}
		}
		return got
	}
	for _, build := range [][]string{{"-O0"}, {"-O0", "-fno-plt"}} {
		t.Run(strings.Join(build, ""), func(t *testing.T) {
			prog := testutil.BuildC(t, "aliases.c", build...)
			tmp := t.TempDir()
			r := runCmd(t, tmp, rtraceBin, "sp-rtrace", "-e", "file:mmap", "-s", "-P-t", "-o", "stdout", "-q", "-x", prog)
			if r.code != 0 {
				t.Fatalf("rtrace sp-rtrace: %s", r.stderr)
			}
			if got := names(r.stdout); !slices.Equal(got, want) {
				t.Errorf("-P: calls %v, want %v:\n%s", got, want, r.stdout)
			}
			if r = runCmd(t, tmp, rtraceBin, "sp-rtrace", "-e", "file:mmap", "-s", "-o", "D", "-q", "-x", prog); r.code != 0 {
				t.Fatalf("rtrace sp-rtrace: %s", r.stderr)
			}
			raw := rawFiles(t, filepath.Join(tmp, "D"), ".rtrace")
			if len(raw) != 1 {
				t.Fatalf("raw files %v", raw)
			}
			r = runCmd(t, tmp, rtraceBin, "postproc", "-i", raw[0])
			if got := names(r.stdout); !slices.Equal(got, want) {
				t.Errorf("postproc: calls %v, want %v:\n%s", got, want, r.stdout)
			}
		})
	}
}

// TestShmSegmentEnd: a System V segment removed while attached ends at
// its last shmdt, reported as a release of the segment by that shmdt; one
// removed with nothing attached ends at the shmctl, as sp-rtrace's
// shmsysv module reports them (its module test expects three shmdt): also
// when the attachment was a child's, gone with it, or a thread's. Both
// engines; nothing left over for -l.
func TestShmSegmentEnd(t *testing.T) {
	prog := testutil.BuildC(t, "shmend.c", "-O0", "-pthread")
	want := []string{"shmget<segment>", "shmat<address>", "shmat<address>", "shmdt<address>", "shmdt<address>", "shmdt<segment>",
		"shmget<segment>", "shmctl<segment>",
		"shmget<segment>", "shmctl<segment>",
		"shmget<segment>", "shmat<address>", "shmdt<address>", "shmdt<segment>"}
	record := regexp.MustCompile(`(?m)^[0-9]+\. \[[^\]]+\] (shm[a-z]+<[a-z]+>)`)
	for _, engine := range []string{"fast", "int3"} {
		t.Run(engine, func(t *testing.T) {
			tmp := t.TempDir()
			env := []string{"RTRACE_ENGINE=" + engine}
			r := runCmdEnv(t, tmp, env, rtraceBin, "sp-rtrace", "-e", "shm", "-s", "-P-t", "-o", "D", "-q", "-x", prog)
			pid := strings.TrimPrefix(strings.TrimSpace(r.stdout), "pid ")
			if r.code != 0 || pid == "" {
				t.Fatalf("rtrace sp-rtrace: %+v", r)
			}
			text, err := os.ReadFile(filepath.Join(tmp, "D", pid+"-0.rtrace.txt"))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range record.FindAllStringSubmatch(string(text), -1) {
				got = append(got, m[1])
			}
			if !slices.Equal(got, want) {
				t.Errorf("calls %v,\nwant %v:\n%s", got, want, text)
			}
			r = runCmdEnv(t, tmp, env, rtraceBin, "postproc", "-l", "-i", filepath.Join(tmp, "D", pid+"-0.rtrace.txt"))
			if leaks := regexp.MustCompile(`(?m)^[0-9]+\. .*shm`).FindAllString(r.stdout, -1); r.code != 0 || len(leaks) > 0 {
				t.Errorf("-l: %v (exit %d), want no segment or attachment left:\n%s", leaks, r.code, r.stdout)
			}
		})
	}
}
