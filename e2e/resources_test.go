package e2e_test

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"rtrace/internal/testutil"
	"rtrace/internal/trace"
	"rtrace/internal/wire"
)

// markerLines maps the LINE:name markers of a fixture to their line numbers.
func markerLines(t *testing.T, src string) map[string]int {
	b, err := os.ReadFile(filepath.Join(testutil.Root(), "testdata", src))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for i, l := range strings.Split(string(b), "\n") {
		if _, m, ok := strings.Cut(l, "// LINE:"); ok {
			out[strings.TrimSpace(m)] = i + 1
		}
	}
	return out
}

// rawFiles returns the <pid>-<n>.rtrace files in dir, sorted.
func rawFiles(t *testing.T, dir, ext string) []string {
	m, err := filepath.Glob(filepath.Join(dir, "*-*"+ext))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// readCalls reads the calls of a raw stream, failing on a broken one.
func readCalls(t *testing.T, path string) []*trace.Call {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd, err := wire.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var calls []*trace.Call
	for {
		it, err := rd.Next()
		if err == io.EOF {
			return calls
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if c, ok := it.(*trace.Call); ok {
			calls = append(calls, c)
		}
	}
}

var leakSummary = regexp.MustCompile(`(?m)^# (\d+) block\(s\) leaked with total size of (\d+) bytes$`)

// checkLeakReport checks a resolved, compressed leak report of the leaky
// fixture: the fixture's own count and size, and frames naming each
// allocating function at its source line, and main.
func checkLeakReport(t *testing.T, report, fixtureOut string, lines map[string]int) {
	t.Helper()
	var n, size int
	if _, err := fmt.Sscanf(fixtureOut, "leaked %d blocks, %d bytes", &n, &size); err != nil {
		t.Fatalf("fixture output %q: %v", fixtureOut, err)
	}
	m := leakSummary.FindStringSubmatch(report)
	if m == nil || m[1] != strconv.Itoa(n) || m[2] != strconv.Itoa(size) {
		t.Errorf("leak summary %q, want %d blocks of %d bytes\n%s", m, n, size, report)
	}
	for fn, marker := range map[string]string{"small_block": "small", "zeroed_block": "zeroed", "grown_block": "grown"} {
		want := fmt.Sprintf("%s() at leaky.c:%d", fn, lines[marker])
		if !strings.Contains(report, want) {
			t.Errorf("no frame %q in the report:\n%s", want, report)
		}
	}
	if !strings.Contains(report, "main() at leaky.c:") {
		t.Errorf("no main() frame in the report:\n%s", report)
	}
	if got := strings.Count(report, "# allocation summary:"); got != 3 {
		t.Errorf("%d allocation groups, want 3 (one per call path)", got)
	}
}

// TestRecordLeaks: the leaky fixture under -e memory, its raw trace through
// postproc -l -c | resolve, and the same report made in-process with -P,
// at -O0 and at -O2 -fomit-frame-pointer (CFI unwinding), PIE and not, and
// with the allocating code in a -g shared library.
func TestRecordLeaks(t *testing.T) {
	testutil.RequireTool(t, "gcc")
	lines := markerLines(t, "leaky.c")
	for _, v := range []struct {
		name  string
		flags []string
		lib   bool // the allocating code in a shared library
	}{
		{"O0", []string{"-O0", "-g"}, false},
		{"O0-nopie", []string{"-O0", "-g", "-no-pie", "-fno-PIE"}, false},
		{"O2-omit-fp", []string{"-O2", "-g", "-fomit-frame-pointer"}, false},
		{"O2-nopie", []string{"-O2", "-g", "-fomit-frame-pointer", "-no-pie", "-fno-PIE"}, false},
		{"O2-lib", []string{"-O2", "-g", "-fomit-frame-pointer"}, true},
	} {
		t.Run(v.name, func(t *testing.T) {
			prog := testutil.BuildC(t, "leaky.c", v.flags...)
			if v.lib {
				lib := testutil.BuildC(t, "leaky.c", append([]string{"-DLEAKY_LIB", "-shared", "-fPIC"}, v.flags...)...)
				prog = testutil.BuildC(t, "leakymain.c", "-O2", lib)
			}
			tmp := t.TempDir()
			raw, fixtureOut := recordLeaky(t, tmp, prog)
			pp := exec.Command(rtraceBin, "postproc", "-l", "-c", "-i", raw)
			rs := exec.Command(rtraceBin, "resolve")
			pipe, _ := pp.StdoutPipe()
			rs.Stdin = pipe
			var out strings.Builder
			rs.Stdout = &out
			if err := rs.Start(); err != nil {
				t.Fatal(err)
			}
			if err := pp.Run(); err != nil {
				t.Fatalf("postproc: %v", err)
			}
			if err := rs.Wait(); err != nil {
				t.Fatalf("resolve: %v", err)
			}
			checkLeakReport(t, out.String(), fixtureOut, lines)
			direct := runCmd(t, tmp, rtraceBin, "postproc", "-l", "-c", "-r", "-i", raw)
			if direct.stdout != out.String() {
				t.Errorf("postproc -l -c | resolve and postproc -l -c -r differ:\n%s\n---\n%s", out.String(), direct.stdout)
			}

			// -P: the same report, post-processed as it is recorded.
			r := runCmd(t, tmp, rtraceBin, "sp-rtrace", "-e", "memory", "--start", "-b", "10", "-P", "-l -c -r", "-o", "P", "--", prog)
			if r.code != 0 {
				t.Fatalf("record -P: exit %d\n%s", r.code, r.stderr)
			}
			txt := rawFiles(t, filepath.Join(tmp, "P"), ".rtrace.txt")
			if len(txt) != 1 || !strings.HasSuffix(txt[0], "-0.rtrace.txt") {
				t.Fatalf("text files %v, want one <pid>-0.rtrace.txt", txt)
			}
			b, _ := os.ReadFile(txt[0])
			checkLeakReport(t, string(b), r.stdout, lines)
		})
	}
}

// TestRecordFileLeaks: the file module reports exactly the descriptors and
// streams the fixture leaves open; failed calls are neither allocations
// nor releases, and fopen's own open() is not reported twice.
func TestRecordFileLeaks(t *testing.T) {
	prog := testutil.BuildC(t, "fileleak.c", "-O0", "-g")
	tmp := t.TempDir()
	r := runCmd(t, tmp, rtraceBin, "sp-rtrace", "-e", "file", "--start", "-o", "D", "-q", "--", prog)
	if r.code != 0 {
		t.Fatalf("record: exit %d\n%s", r.code, r.stderr)
	}
	raw := rawFiles(t, filepath.Join(tmp, "D"), ".rtrace")
	if len(raw) != 1 {
		t.Fatalf("raw files %v", raw)
	}
	rep := runCmd(t, tmp, rtraceBin, "postproc", "-l", "-i", raw[0]).stdout
	for _, want := range []string{
		"# Resource - fd (file descriptor):\n# 3 block(s) leaked",
		"# Resource - fp (file pointer):\n# 2 block(s) leaked",
	} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q:\n%s", want, rep)
		}
	}
	// The leaked ids are the fixture's own: fds 3 5 7 and its two streams.
	var a, p, d int
	var f1, f3 string
	fmt.Sscanf(r.stdout, "fds %d %d %d, streams %s %s", &a, &p, &d, &f1, &f3)
	for _, id := range []string{fmt.Sprintf("= %#x", a), fmt.Sprintf("= %#x", p), fmt.Sprintf("= %#x", d), "= " + f1, "= " + f3} {
		if !strings.Contains(rep, id) {
			t.Errorf("report lacks the leaked %q:\n%s", id, rep)
		}
	}
	calls := readCalls(t, raw[0])
	opens := 0
	for _, c := range calls {
		if c.Name == "open" || c.Name == "openat" {
			opens++
			if len(c.Args) == 0 || c.Args[0].Name != "path" || c.Args[0].Value != "/dev/null" {
				t.Errorf("%s args %+v, want $path = /dev/null", c.Name, c.Args)
			}
		}
	}
	if opens != 2 { // fopen's opens are inside fopen; the failed open is no allocation
		t.Errorf("%d open/openat calls reported, want 2", opens)
	}
}

// TestRecordMemoryUftrace: with -d the resource calls also appear in the
// uftrace.data output, with sizes and returned pointers; also from record
// with --match=glob, whose argument specs are globs then.
func TestRecordMemoryUftrace(t *testing.T) {
	prog := testutil.BuildC(t, "leaky.c", "-O0", "-g")
	for _, args := range [][]string{
		{"sp-rtrace", "-e", "memory", "-d", "OUT", "--start", "-o", "D", "-q", "--", prog},
		{"record", "--match=glob", "--module", "memory", "-d", "OUT", "--start", "-o", "D", "-q", prog},
	} {
		t.Run(args[0], func(t *testing.T) { recordMemoryUftrace(t, args) })
	}
}

func recordMemoryUftrace(t *testing.T, args []string) {
	uft := testutil.RequireTool(t, "uftrace")
	tmp := t.TempDir()
	r := runCmd(t, tmp, rtraceBin, args...)
	if r.code != 0 {
		t.Fatalf("record: exit %d\n%s", r.code, r.stderr)
	}
	noResWarnings(t, r.stderr)
	out := runCmd(t, tmp, uft, "replay", "-d", "OUT").stdout
	for _, re := range []string{
		`small_block\(\) \{\n.*\|\s+malloc\(1[6-9]|2[0-2]\) = 0x[0-9a-f]+;`,
		`calloc\(4, \d+\) = 0x[0-9a-f]+;`,
		`realloc\(0x[0-9a-f]+, 20[0-2]\) = 0x[0-9a-f]+;`,
		`free\(0x[0-9a-f]+\);`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("uftrace replay shows no %s:\n%s", re, clipLines(out, 30))
		}
	}
	if n := strings.Count(out, "free("); n != 983 {
		t.Errorf("%d free() calls shown, want 983 (1000 less the 17 leaked)", n)
	}
}

// noResWarnings fails when rtrace warned that a resource function is not
// traced: a recording that misses malloc must never look whole.
func noResWarnings(t *testing.T, stderr string) {
	t.Helper()
	if strings.Contains(stderr, "is not traced") {
		t.Errorf("rtrace left a resource function untraced:\n%s", stderr)
	}
}

func clipLines(s string, n int) string {
	l := strings.Split(s, "\n")
	if len(l) > n {
		l = l[:n]
	}
	return strings.Join(l, "\n")
}

// TestToggle: a program started without --start runs untraced until
// rtrace toggle turns tracing on; toggled on and off twice it gives two raw
// files, each holding exactly the steps run inside its window: the test
// runs the steps itself (testdata/attachee.c), between the toggles.
func TestToggle(t *testing.T) {
	prog := testutil.BuildC(t, "attachee.c", "-O0", "-g")
	tmp := t.TempDir()
	s, errs, pid := startStepped(t, tmp, nil, "sp-rtrace", "-e", "memory", "-o", "D", "-q", "--", prog)
	rec, in := s.cmd, s.in
	if pid == 0 {
		t.Fatalf("the fixture did not start:\n%s", errs.String())
	}
	window := func(n int) { t.Helper(); toggleWindow(t, tmp, s, pid, n) }
	s.steps(3) // the first steps also allocate stdio's buffers: untraced
	window(5)
	s.steps(2)
	window(4)
	s.steps(1)
	in.Close()
	s.out.drain()
	errs.drain()
	if err := rec.Wait(); err != nil {
		t.Fatalf("record: %v\n%s", err, errs.String())
	}
	noResWarnings(t, errs.String())
	raw := rawFiles(t, filepath.Join(tmp, "D"), ".rtrace")
	if len(raw) != 2 {
		t.Fatalf("raw files %v, want two", raw)
	}
	// Each step mallocs 512 bytes and frees them, nothing else allocates
	// once stdio's buffers exist: a window of n steps holds n of each.
	for i, want := range []int{5, 4} {
		var allocs, frees int
		var list []string
		for _, c := range readCalls(t, raw[i]) {
			list = append(list, fmt.Sprintf("%s(%d)", c.Name, c.Size))
			switch {
			case c.Alloc && c.Name == "malloc" && c.Size == 512:
				allocs++
			case !c.Alloc && c.Name == "free":
				frees++
			default:
				t.Errorf("%s: unexpected call %s(%d)", raw[i], c.Name, c.Size)
			}
		}
		if allocs != want || frees != want {
			t.Errorf("%s: %d mallocs and %d frees, want %d of each (the window's steps): %v", raw[i], allocs, frees, want, list)
		}
	}
}

// TestRecordForkLeaks: each process of a traced tree keeps its own
// resources and its own file, as sp-rtrace wrote one per process: the
// parent's leaked malloc(100) stays a leak although its forked child
// freed its copy, and the child's own leak is in the child's file. With
// an exec in the child, the new image gets a file of its own.
func TestRecordForkLeaks(t *testing.T) {
	prog := testutil.BuildC(t, "forkleak.c", "-O2", "-g")
	lines := markerLines(t, "forkleak.c")
	for _, execs := range []bool{false, true} {
		t.Run(fmt.Sprintf("exec=%v", execs), func(t *testing.T) {
			tmp := t.TempDir()
			args := []string{"sp-rtrace", "-e", "memory", "--start", "-b", "10", "-o", "D", "-q", "--", prog}
			if execs {
				args = append(args, "/bin/true")
			}
			r := runCmd(t, tmp, rtraceBin, args...)
			if r.code != 0 {
				t.Fatalf("record: exit %d\n%s", r.code, r.stderr)
			}
			noResWarnings(t, r.stderr)
			var ppid, cpid int
			for _, l := range strings.Split(r.stdout, "\n") {
				if strings.HasPrefix(l, "parent ") {
					fmt.Sscanf(l, "parent %d", &ppid)
				}
				if strings.HasPrefix(l, "child ") {
					fmt.Sscanf(l, "child %d", &cpid)
				}
			}
			if ppid == 0 || cpid == 0 {
				t.Fatalf("the fixture printed no pids:\n%s", r.stdout)
			}
			want := []string{fmt.Sprintf("%d-0.rtrace", cpid), fmt.Sprintf("%d-0.rtrace", ppid)}
			if execs {
				want = []string{fmt.Sprintf("%d-0.rtrace", cpid), fmt.Sprintf("%d-1.rtrace", cpid), fmt.Sprintf("%d-0.rtrace", ppid)}
			}
			raw := rawFiles(t, filepath.Join(tmp, "D"), ".rtrace")
			var got []string
			for _, f := range raw {
				got = append(got, filepath.Base(f))
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("raw files %v, want %v", got, want)
			}
			leaks := func(file string) string {
				return runCmd(t, tmp, rtraceBin, "postproc", "-l", "-c", "-r", "-i", filepath.Join(tmp, "D", file)).stdout
			}
			for _, c := range []struct {
				file, fn, marker string
				size             int
			}{
				{fmt.Sprintf("%d-0.rtrace", ppid), "parent_block", "parent", 100},
				{fmt.Sprintf("%d-0.rtrace", cpid), "child_block", "child", 200},
			} {
				rep := leaks(c.file)
				m := leakSummary.FindStringSubmatch(rep)
				if m == nil || m[1] != "1" || m[2] != strconv.Itoa(c.size) {
					t.Errorf("%s: leak summary %q, want 1 block of %d bytes\n%s", c.file, m, c.size, rep)
				}
				if w := fmt.Sprintf("%s() at forkleak.c:%d", c.fn, lines[c.marker]); !strings.Contains(rep, w) {
					t.Errorf("%s: no frame %q in the report:\n%s", c.file, w, rep)
				}
			}
			// The child's free of its copy is in the child's file only.
			frees := map[string]int{}
			for _, f := range raw {
				for _, c := range readCalls(t, f) {
					if c.Name == "free" {
						frees[filepath.Base(f)]++
					}
				}
			}
			if n := frees[fmt.Sprintf("%d-0.rtrace", cpid)]; n < 1 {
				t.Errorf("the child's free is not in its file: frees by file %v", frees)
			}
			if n := frees[fmt.Sprintf("%d-0.rtrace", ppid)]; n != 0 {
				t.Errorf("%d frees in the parent's file, which frees nothing", n)
			}
		})
	}
}

// TestResourceJumps: a jump out of a resource call (a fopencookie stream's
// close function jumps out of fclose) does not silence the thread: the
// allocations after a longjmp, which rtrace hooks, and after a
// __builtin_longjmp, which it cannot follow, are both reported, with
// both engines; the dead frame's slot, live memory of a deeper frame
// later, is never written (the program checks and exits 1); and 5000 such
// jumps do not fill the shadow stack (the allocation after them is
// reported).
func TestResourceJumps(t *testing.T) {
	prog := testutil.BuildC(t, "resjump.c", "-O2", "-g")
	lines := markerLines(t, "resjump.c")
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			tmp := t.TempDir()
			r := runCmd(t, tmp, rtraceBin, "record", "-q", "--engine="+engine, "--module", "memory", "--module", "file", "--start", "-o", "D", prog)
			if r.code != 0 {
				t.Fatalf("record: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			noResWarnings(t, r.stderr)
			raw := rawFiles(t, filepath.Join(tmp, "D"), ".rtrace")
			if len(raw) != 1 {
				t.Fatalf("raw files %v", raw)
			}
			rep := runCmd(t, tmp, rtraceBin, "postproc", "-l", "-c", "-r", "-i", raw[0]).stdout
			var p, q, s string
			fmt.Sscanf(r.stdout, "leaked %s %s %s", &p, &q, &s)
			for _, w := range []string{
				fmt.Sprintf("malloc<memory>(123) = %s", p), fmt.Sprintf("after_jump() at resjump.c:%d", lines["after"]),
				fmt.Sprintf("malloc<memory>(321) = %s", q), fmt.Sprintf("after_builtin_jump() at resjump.c:%d", lines["afterbuiltin"]),
				fmt.Sprintf("malloc<memory>(777) = %s", s), fmt.Sprintf("after_many_jumps() at resjump.c:%d", lines["aftermany"]),
			} {
				if !strings.Contains(rep, w) {
					t.Errorf("the leak report lacks %q:\n%s", w, rep)
				}
			}
		})
	}
}

// TestResourceBacktracesMatch: the backtraces the fast engine's stubs find
// in the process equal, frame for frame, those rtrace finds at a stop
// with its remote unwinder (RTRACE_RES_UNWIND=remote), on every resource
// fixture: -O0 and -O2 without frame pointers, PIE or not, a library's
// frames, C++ new/delete and exceptions, qsort's callback under libc
// frames, a signal handler on an alternate stack, threads, forks, jumps.
// The programs run with a fixed layout; threads interleave as they will,
// so each run's calls are compared as a set of (call, size, frames).
// Nearly every walk needs no stop: the first reaches a module without its
// table yet, a handler's starts on another stack.
func TestResourceBacktracesMatch(t *testing.T) {
	leakyLib := testutil.BuildC(t, "leaky.c", "-DLEAKY_LIB", "-shared", "-fPIC", "-O2", "-g", "-fomit-frame-pointer")
	leakyO0 := testutil.BuildC(t, "leaky.c", "-O0", "-g")
	for _, c := range []struct {
		name string
		prog string
		args []string
		mods []string
		opts []string // rtrace's options
	}{
		{"leaky-O0", leakyO0, nil, []string{"memory"}, nil},
		// -b, --backtrace-all (free's backtrace: walked at its return),
		// --monitor (the drain keeps the frames of those sizes only).
		{"leaky-b3", leakyO0, nil, []string{"memory"}, []string{"--backtrace-depth", "3"}},
		{"leaky-all", leakyO0, nil, []string{"memory"}, []string{"--backtrace-all"}},
		{"leaky-monitor", leakyO0, nil, []string{"memory"}, []string{"--monitor", "16,200"}},
		{"leaky-O2-nopie", testutil.BuildC(t, "leaky.c", "-O2", "-g", "-fomit-frame-pointer", "-no-pie", "-fno-PIE"), nil, []string{"memory"}, nil},
		{"leaky-lib", testutil.BuildC(t, "leakymain.c", "-O2", leakyLib), nil, []string{"memory"}, nil},
		{"churn", testutil.BuildC(t, "churn.c", "-O2", "-g"), []string{"20000", "100"}, []string{"memory"}, nil},
		{"allocs", testutil.BuildC(t, "allocs.cc", "-O2", "-g", "-pthread"), nil, []string{"memory"}, nil},
		{"forkleak", testutil.BuildC(t, "forkleak.c", "-O2", "-g"), []string{"/bin/true"}, []string{"memory"}, nil},
		{"resjump", testutil.BuildC(t, "resjump.c", "-O2", "-g"), nil, []string{"memory", "file"}, nil},
		// fopen's calls stop (a path to read): its nested malloc is not
		// recorded, and the frame it hijacked is walked through.
		{"fileleak", testutil.BuildC(t, "fileleak.c", "-O2", "-g"), nil, []string{"memory", "file"}, nil},
		{"forkmany", testutil.BuildC(t, "forkmany.c", "-O2", "-g"), nil, []string{"memory"}, nil},
		// The walk memo's checks (walk.S): a first frame that repeats under
		// other frames, a stack cache slot taken over, a saved rbp that
		// differs under the same return addresses.
		{"memowalk", testutil.BuildC(t, "memowalk.c", "-O2", "-g", testutil.BuildC(t, "memowalk_fp.c", "-c", "-O0", "-g")), nil, []string{"memory"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "memowalk" {
				// Its -O0 part holds its case only when both callers put
				// fp_leaf's frame at one place.
				if out, err := exec.Command(c.prog).Output(); err != nil || !strings.Contains(string(out), "fp frames alike") {
					t.Fatalf("memowalk untraced: %v, %q: want fp_leaf's frames alike", err, out)
				}
			}
			var sets [2][]string
			var verbose string
			for i, env := range []string{"", "remote"} {
				tmp := t.TempDir()
				args := append([]string{"record", "-v", "--engine=fast", "--start", "--no-randomize-addr", "-o", "D"}, c.opts...)
				for _, m := range c.mods {
					args = append(args, "--module", m)
				}
				cmd := exec.Command(rtraceBin, append(append(args, c.prog), c.args...)...)
				cmd.Dir = tmp
				cmd.Env = append(os.Environ(), "RTRACE_RES_UNWIND="+env)
				var stderr strings.Builder
				cmd.Stderr = &stderr
				if err := cmd.Run(); err != nil {
					t.Fatalf("record (RTRACE_RES_UNWIND=%q): %v\n%s", env, err, stderr.String())
				}
				if i == 0 {
					verbose = stderr.String()
				}
				for _, f := range rawFiles(t, filepath.Join(tmp, "D"), ".rtrace") {
					for _, call := range readCalls(t, f) {
						var frames []string
						for _, fr := range call.Frames {
							frames = append(frames, fmt.Sprintf("%#x", fr.Addr))
						}
						sets[i] = append(sets[i], fmt.Sprintf("%s(%d) %s", call.Name, call.Size, strings.Join(frames, " ")))
					}
				}
				slices.Sort(sets[i])
			}
			if len(sets[0]) == 0 {
				t.Fatal("no calls recorded")
			}
			if !slices.Equal(sets[0], sets[1]) {
				for i := range min(len(sets[0]), len(sets[1])) {
					if sets[0][i] != sets[1][i] {
						t.Fatalf("%d calls in the process, %d with rtrace's walker; the first that differs:\n in the process: %s\n rtrace's:       %s", len(sets[0]), len(sets[1]), sets[0][i], sets[1][i])
					}
				}
				t.Fatalf("%d calls in the process, %d with rtrace's walker", len(sets[0]), len(sets[1]))
			}
			var in, all int
			if m := regexp.MustCompile(`(\d+) of (\d+) backtraces found in the process`).FindStringSubmatch(verbose); m != nil {
				in, _ = strconv.Atoi(m[1])
				all, _ = strconv.Atoi(m[2])
			}
			if all == 0 || c.name == "churn" && in*100 < all*99 {
				t.Errorf("%d of %d backtraces found in the process:\n%s", in, all, verbose)
			}
			// A forked child walks with its parent's tables: the stops are
			// the first walks into each module, the parent's.
			if c.name == "forkmany" && all-in > 5 {
				t.Errorf("%d of %d backtraces needed a stop, want 5 at most (the children's need none):\n%s", all-in, all, verbose)
			}
		})
	}
}

// TestResourceOrderOneThread: a process of one thread traced for its
// resource calls alone takes their times from the drain's clock (the
// coarse clock, docs/FAST-PATH.md), which lags the TSC: its calls still
// come in program order, those recorded at a stop (string arguments:
// open, fopen) among those its stubs record (pipe, dup, close).
func TestResourceOrderOneThread(t *testing.T) {
	prog := testutil.BuildC(t, "fileleak.c", "-O0", "-g")
	want := []string{"open", "openat", "pipe", "pipe", "dup", "socket", "fopen", "fopen", "fdopen", "close", "close", "close", "fclose"}
	for _, env := range []string{"", "RTRACE_RES_TIME=exact"} {
		tmp := t.TempDir()
		r := runCmdEnv(t, tmp, []string{env}, rtraceBin, "sp-rtrace", "-e", "file", "--start", "-o", "D", "-q", "--", prog)
		if r.code != 0 {
			t.Fatalf("%s: record: exit %d\n%s", env, r.code, r.stderr)
		}
		raw := rawFiles(t, filepath.Join(tmp, "D"), ".rtrace")
		if len(raw) != 1 {
			t.Fatalf("%s: raw files %v", env, raw)
		}
		var got []string
		for _, c := range readCalls(t, raw[0]) {
			got = append(got, c.Name)
		}
		// pipe makes two descriptors; fclose's own close is nested (not
		// reported); the failed close(12345) and open of a missing file
		// are not calls.
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: calls in the trace\n%v\nwant the program's order\n%v", env, got, want)
		}
	}
}

// toggleWindow opens a window of the resource tracing of pid with a
// listening `rtrace toggle -o D PID` in dir, runs n steps of s in it,
// and closes it with a second `rtrace toggle PID`.
func toggleWindow(t *testing.T, dir string, s *stepper, pid, n int) {
	t.Helper()
	listener := exec.Command(rtraceBin, "toggle", "-o", "D", strconv.Itoa(pid))
	listener.Dir = dir
	lerr, _ := listener.StderrPipe()
	if err := listener.Start(); err != nil {
		t.Fatal(err)
	}
	ll := newLineLog(lerr)
	if ll.waitFor("turned on") == "" {
		t.Fatalf("the listener ended without turning tracing on:\n%s", ll.String())
	}
	s.steps(n)
	if off := runCmd(t, dir, rtraceBin, "toggle", strconv.Itoa(pid)); off.code != 0 {
		t.Fatalf("toggle off: %s", off.stderr)
	}
	if err := listener.Wait(); err != nil {
		t.Fatalf("listener: %v\n%s", err, ll.String())
	}
}
