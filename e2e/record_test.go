package e2e_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"rtrace/internal/testutil"
	"rtrace/internal/uftrace"
)

var rtraceBin string

// TestMain builds the rtrace binary once: the tests run it as users do, so
// signals sent to it and its exit status are real.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rtrace-bin-")
	if err != nil {
		panic(err)
	}
	if rtraceBin, err = testutil.BuildRtrace(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// rtrace is built with the race detector when the tests are: a race
	// any run of it reports fails the package, whatever that run's test
	// expected of its exit status.
	testutil.RaceLog(dir)
	code := m.Run()
	if r := testutil.RaceReports(dir); r != "" {
		fmt.Fprintf(os.Stderr, "FAIL: rtrace's race detector reported data races:\n%s", r)
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// engines are rtrace's ways of recording calls: every function-tracing
// test that names them passes with both.
var engines = []string{"int3", "fast"}

// variant is one way the fixtures are built.
type variant struct {
	name  string
	flags []string
}

var variants = []variant{
	{"O0-pie", []string{"-O0", "-pie", "-fPIE"}},
	{"O0-nopie", []string{"-O0", "-no-pie", "-fno-PIE"}},
	{"O2-pie", []string{"-O2", "-fno-inline", "-pie", "-fPIE"}},
	{"O2-nopie", []string{"-O2", "-fno-inline", "-no-pie", "-fno-PIE"}},
}

type run struct {
	stdout, stderr string
	code           int
}

func runCmd(t *testing.T, dir, name string, args ...string) run {
	t.Helper()
	return runCmdEnv(t, dir, nil, name, args...)
}

// runCmdEnv is runCmd with env added to the environment.
func runCmdEnv(t *testing.T, dir string, env []string, name string, args ...string) run {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
		if ee.ProcessState.Sys() != nil && code < 0 {
			code = -1
		}
	} else if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return run{so.String(), se.String(), code}
}

// tree is the shape of each task's call tree in `uftrace replay -f tid`
// output (uftrace.ReplayTrees). Closing lines, events and durations are
// dropped: uftrace -pg leaves frames open at exit() where rtrace closes
// them, which changes no entry.
func tree(replay string) []string { return uftrace.ReplayTrees(replay, nil) }

func replay(t *testing.T, dir string) string {
	t.Helper()
	return testutil.Run(t, "", testutil.RequireTool(t, "uftrace"), "replay", "--no-pager", "-f", "tid", "-d", dir)
}

// fixture describes one comparison: how to build and run a program.
type fixture struct {
	src  string
	args func(t *testing.T, v variant, pg bool) []string // extra program arguments
	libs []string
	// plain: flags of rtrace's build only (how library calls bind: -z now,
	// -fno-plt); uftrace records the lazily bound -pg build, the only one
	// whose library calls its PLT hooks see.
	plain []string
	// closings: compare the closing lines too, where uftrace leaves frames
	// open (an exec, a longjmp) and its replay rewinds its display. Other
	// fixtures compare entries only: rtrace closes the frames open at
	// exit(), uftrace -pg does not.
	closings bool
	// views: compare uftrace report and graph too (sameViews). Not where
	// the program ends in exit() or forks: uftrace -pg leaves the frames
	// open at exit() that rtrace closes, and its report counts some of
	// those calls and not others (exit itself, a forked child's inherited
	// main); the order of a graph's callees follows two processes' timing.
	views bool
}

func TestRecordMatchesUftrace(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	fixtures := []fixture{
		{src: "chain.c", views: true},
		{src: "fib.c", views: true},
		{src: "threads.c", libs: []string{"-pthread"}, views: true},
		{src: "fork.c"},
		{src: "fork.c", args: func(t *testing.T, v variant, pg bool) []string {
			// fork + exec: the child execs the chain fixture of the same build.
			return []string{build(t, "chain.c", v, pg, nil)}
		}, closings: true},
		{src: "signal.c", views: true},
		{src: "exit.c", closings: true}, // frames open at exit() stay open, as uftrace leaves them
		{src: "daemon.c", closings: true},
		{src: "cxx.cc", views: true},
		{src: "tail.c", views: true},
		{src: "cold.c", views: true},
		{src: "throw.cc", closings: true, views: true}, // a rethrow: one unwind through two unwinder hooks
		{src: "nested.cc", views: true},
		{src: "longjmp.c", closings: true, views: true},
		// backtrace() sees the real return addresses: the program prints
		// as many frames as without rtrace.
		{src: "backtrace.c", views: true},
		// A destructor's calls from a landing pad return in turn.
		{src: "dtorcalls.cc", views: true},
		{src: "libcalls.c", views: true},
		{src: "libcalls.c", plain: []string{"-Wl,-z,now"}, views: true},
		{src: "libcalls.c", plain: []string{"-fno-plt"}, views: true},
	}
	for _, f := range fixtures {
		for _, v := range variants {
			name := strings.TrimSuffix(f.src, filepath.Ext(f.src)) + "/" + v.name
			if f.args != nil {
				name += "/exec"
			}
			if f.plain != nil {
				name += "/" + strings.Join(f.plain, "")
			}
			t.Run(name, func(t *testing.T) {
				plain := build(t, f.src, v, false, append(f.plain, f.libs...))
				pg := build(t, f.src, v, true, f.libs)
				var plainArgs, pgArgs []string
				if f.args != nil {
					plainArgs, pgArgs = f.args(t, v, false), f.args(t, v, true)
				}
				tmp := t.TempDir()
				wantReplay, err := uftraceReplay(t, tmp, uft, pg, pgArgs)
				if err != nil {
					// uftrace 0.13 records nothing for some -O2 -pg builds
					// (exit.c: "No data available"); -fno-inline keeps the
					// calls of the -O0 build, so its tree is the oracle.
					t.Logf("uftrace record failed on the -pg build (%v); comparing with the -O0 build", err)
					o0 := variant{"O0", append([]string{"-O0"}, v.flags[len(v.flags)-2:]...)}
					if f.args != nil {
						pgArgs = f.args(t, o0, true)
					}
					if wantReplay, err = uftraceReplay(t, tmp, uft, build(t, f.src, o0, true, f.libs), pgArgs); err != nil {
						t.Fatal(err)
					}
				}
				wantTree := uftrace.WithoutPgStartup(tree(wantReplay))
				bare := runCmd(t, tmp, plain, plainArgs...)
				for _, engine := range engines {
					dir := "R-" + engine
					got := runCmd(t, tmp, rtraceBin, append([]string{"record", "-q", "--engine", engine, "-d", dir, "--", plain}, plainArgs...)...)
					if got != bare {
						t.Errorf("%s: under rtrace the program printed/exited differently:\nwithout: %+v\nwith:    %+v", engine, bare, got)
					}
					gotReplay := replay(t, filepath.Join(tmp, dir))
					gotTree := tree(gotReplay)
					// libmcount writes a library call's ENTRY when it returns or
					// calls one of its flush functions (exit, fork, exec...):
					// _exit() never shows under uftrace. rtrace writes it.
					for i := range gotTree {
						gotTree[i] = regexp.MustCompile(`(?m)^ *_exit\(\)\n`).ReplaceAllString(gotTree[i], "")
					}
					gotTree = slices.DeleteFunc(gotTree, func(tr string) bool { return tr == "" })
					if strings.Join(gotTree, "\n") != strings.Join(wantTree, "\n") {
						t.Errorf("%s: call trees differ\nuftrace -pg:\n%s\nrtrace:\n%s", engine, strings.Join(wantTree, "\n"), strings.Join(gotTree, "\n"))
					}
					if want, got := replayLines(wantReplay, false), replayLines(gotReplay, false); f.closings && got != want {
						t.Errorf("%s: replays differ\nuftrace -pg:\n%s\nrtrace:\n%s", engine, want, got)
					}
					if f.views {
						sameViews(t, filepath.Join(tmp, "U"), filepath.Join(tmp, dir))
					}
					for _, cmd := range [][]string{{"info"}, {"dump", "--chrome"}} {
						testutil.Run(t, tmp, uft, append(cmd, "--no-pager", "-d", dir)...)
					}
				}
			})
		}
	}
}

// uftraceTree records prog (a -pg build) with the real uftrace, library
// calls included, and returns the tree of its replay without what -pg
// itself adds (uftrace.WithoutPgStartup).
func uftraceTree(t *testing.T, tmp, uft, prog string, args []string) ([]string, error) {
	t.Helper()
	r, err := uftraceReplay(t, tmp, uft, prog, args)
	return uftrace.WithoutPgStartup(tree(r)), err
}

// uftraceReplay records prog with the real uftrace, library calls
// included, and returns its `replay -f tid`.
func uftraceReplay(t *testing.T, tmp, uft, prog string, args []string) (string, error) {
	t.Helper()
	dir := filepath.Join(tmp, "U")
	os.RemoveAll(dir)
	runCmd(t, tmp, uft, append([]string{"record", "--no-event", "-d", dir, prog}, args...)...)
	r := runCmd(t, tmp, uft, "replay", "--no-pager", "-f", "tid", "-d", dir)
	if r.code != 0 {
		return "", fmt.Errorf("uftrace replay: exit %d: %s", r.code, strings.TrimSpace(r.stderr))
	}
	return r.stdout, nil
}

// replayLines is the text of each task's lines in a `replay -f tid`,
// closing lines included, at their indentation: tids, durations, events
// and what -pg adds before main dropped, tasks in order of their text.
// A call whose lines another task's came between ("fork() {", then
// "} /* fork */") reads as the leaf it is ("fork();"). With events, the
// events' lines stay.
func replayLines(replay string, events bool) string {
	tasks := map[string]*strings.Builder{}
	leaf := regexp.MustCompile(`(?m)^( *)(\S+)\(\) \{\n *\} /\* (\S+) \*/$`)
	for _, line := range strings.Split(replay, "\n") {
		head, body, ok := strings.Cut(line, "] | ")
		if !ok || strings.HasPrefix(line, "#") || !events && strings.HasPrefix(strings.TrimSpace(body), "/*") {
			continue
		}
		if fn := strings.TrimSpace(body); fn == "__monstartup();" || fn == "__cxa_atexit();" && strings.TrimLeft(body, " ") == body {
			continue
		}
		tid := head[strings.LastIndexByte(head, '[')+1:]
		if tasks[tid] == nil {
			tasks[tid] = &strings.Builder{}
		}
		fmt.Fprintln(tasks[tid], body)
	}
	var out []string
	for _, b := range tasks {
		out = append(out, leaf.ReplaceAllStringFunc(b.String(), func(m string) string {
			g := leaf.FindStringSubmatch(m)
			if g[2] != g[3] {
				return m
			}
			return g[1] + g[2] + "();"
		}))
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

func build(t *testing.T, src string, v variant, pg bool, libs []string) string {
	flags := append([]string{"-g"}, v.flags...)
	if pg {
		flags = append(flags, "-pg")
	}
	return testutil.BuildC(t, src, append(flags, libs...)...)
}

// A static program: uftrace cannot record static binaries, so the oracle is
// uftrace -pg on the same source linked dynamically.
func TestRecordStatic(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	static := testutil.BuildC(t, "chain.c", "-g", "-O0", "-static")
	pg := testutil.BuildC(t, "chain.c", "-g", "-O0", "-pg")
	tmp := t.TempDir()
	runCmd(t, tmp, uft, "record", "--no-libcall", "--no-event", "-d", "U", pg)
	for _, engine := range engines {
		dir := "R-" + engine
		got := runCmd(t, tmp, rtraceBin, "record", "-q", "--engine", engine, "-d", dir, "--", static)
		if bare := runCmd(t, tmp, static); got != bare {
			t.Errorf("%s: output differs under rtrace: %+v vs %+v", engine, got, bare)
		}
		if w, g := tree(replay(t, filepath.Join(tmp, "U"))), tree(replay(t, filepath.Join(tmp, dir))); strings.Join(w, "") != strings.Join(g, "") {
			t.Errorf("%s: call trees differ\nuftrace -pg (dynamic):\n%s\nrtrace (static):\n%s", engine, strings.Join(w, "\n"), strings.Join(g, "\n"))
		}
		for _, cmd := range [][]string{{"report"}, {"graph"}, {"info"}, {"dump", "--chrome"}} {
			testutil.Run(t, tmp, uft, append(cmd, "--no-pager", "-d", dir)...)
		}
	}
}

// Functions whose entry a jump cannot replace: the fast engine aims the
// direct calls of a 4-byte function at its stub, and runs a function whose
// loop jumps into its first bytes from a copy of its whole body. Both
// engines record the same calls, and -v says which function keeps an
// int3 entry and which of its calls avoid it.
func TestRecordShortFunctions(t *testing.T) {
	prog := testutil.BuildC(t, "detour.c", "-O0", "-g")
	tmp := t.TempDir()
	bare := runCmd(t, tmp, prog)
	var trees [][]string
	for _, engine := range engines {
		dir := "R-" + engine
		r := runCmd(t, tmp, rtraceBin, "record", "-v", "--engine", engine, "-d", dir, "--", prog)
		if r.code != 0 || r.stdout != bare.stdout {
			t.Fatalf("%s: %+v, want the program's %+v", engine, r, bare)
		}
		trees = append(trees, tree(replay(t, filepath.Join(tmp, dir))))
		if engine == "fast" {
			if !strings.Contains(r.stderr, "tiny: cannot displace instruction: function of 4 bytes is too short for a jump (its 1 direct call site(s) call its stub without a stop)") {
				t.Errorf("fast: -v does not say tiny's call goes to its stub:\n%s", r.stderr)
			}
			if strings.Contains(r.stderr, "countdown") {
				t.Errorf("fast: countdown is not traced through a copy of its body:\n%s", r.stderr)
			}
		}
	}
	want := "main()\n" + strings.Repeat("  tiny()\n", 5) + "  countdown()\n  printf()\n"
	for i, tr := range trees {
		if strings.Join(tr, "") != want {
			t.Errorf("%s: tree\n%s\nwant\n%s", engines[i], strings.Join(tr, ""), want)
		}
	}
}

// A second recording into a directory moves the first aside to DIR.old, as
// uftrace record does; a third replaces that DIR.old, and nothing else is
// left beside them.
func TestRecordMovesOldTraceAside(t *testing.T) {
	prog := testutil.BuildC(t, "fib.c", "-O0")
	tmp := t.TempDir()
	for _, n := range []string{"5", "6", "7"} {
		if r := runCmd(t, tmp, rtraceBin, "record", "-q", "-d", "T", "--", prog, n); r.code != 0 {
			t.Fatalf("record %s: %+v", n, r)
		}
	}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "T T.old" {
		t.Fatalf("directory holds %v, want T and T.old", names)
	}
	// fib(7) calls fib 41 times, fib(6) 25; main, atoi and printf once.
	for dir, calls := range map[string]int{"T": 41, "T.old": 25} {
		if entries, _ := testutil.CountRecords(t, filepath.Join(tmp, dir)); entries != calls+3 {
			t.Errorf("%s: %d entries, want %d", dir, entries, calls+3)
		}
	}
}
