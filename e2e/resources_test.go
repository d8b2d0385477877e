package e2e_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

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
			r := runCmd(t, tmp, rtraceBin, "record", "-e", "memory", "--start", "-b", "10", "-P", "-l -c -r", "-o", "P", "--", prog)
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
	r := runCmd(t, tmp, rtraceBin, "record", "-e", "file", "--start", "-o", "D", "-q", "--", prog)
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
// uftrace.data output, with sizes and returned pointers.
func TestRecordMemoryUftrace(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	prog := testutil.BuildC(t, "leaky.c", "-O0", "-g")
	tmp := t.TempDir()
	r := runCmd(t, tmp, rtraceBin, "record", "-e", "memory", "-d", "OUT", "--start", "-o", "D", "-q", "--", prog)
	if r.code != 0 {
		t.Fatalf("record: exit %d\n%s", r.code, r.stderr)
	}
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

func clipLines(s string, n int) string {
	l := strings.Split(s, "\n")
	if len(l) > n {
		l = l[:n]
	}
	return strings.Join(l, "\n")
}

// progress follows a fixture's stdout: its first line, then how many
// lines came so far.
type progress struct {
	first chan string
	lines chan int
}

func follow(r io.Reader) *progress {
	p := &progress{first: make(chan string, 1), lines: make(chan int, 100000)}
	go func() {
		sc := bufio.NewScanner(r)
		n := 0
		for sc.Scan() {
			if n == 0 {
				p.first <- sc.Text()
			}
			n++
			p.lines <- n
		}
		close(p.lines)
	}()
	return p
}

// seen drains what has come so far and returns the line count.
func (p *progress) seen(last int) int {
	for {
		select {
		case n, ok := <-p.lines:
			if !ok {
				return last
			}
			last = n
		default:
			return last
		}
	}
}

// TestToggle: a program started without --start runs untraced until
// rtrace toggle turns tracing on; toggled on/off twice it gives two raw
// files, each holding exactly the iterations of its window.
func TestToggle(t *testing.T) {
	prog := testutil.BuildC(t, "toggle.c", "-O0", "-g")
	tmp := t.TempDir()
	rec := exec.Command(rtraceBin, "record", "-e", "memory", "-o", "D", "-q", "--", prog, "1500")
	rec.Dir = tmp
	stdout, _ := rec.StdoutPipe()
	var recErr strings.Builder
	rec.Stderr = &recErr
	if err := rec.Start(); err != nil {
		t.Fatal(err)
	}
	defer rec.Process.Kill()
	p := follow(stdout)
	var pid int
	select {
	case l := <-p.first:
		fmt.Sscanf(l, "pid %d", &pid)
	case <-time.After(10 * time.Second):
		t.Fatal("the fixture did not start")
	}
	seen := 0
	type window struct{ lo, hi int }
	var windows []window
	for range 2 {
		time.Sleep(100 * time.Millisecond)
		listener := exec.Command(rtraceBin, "toggle", "-o", "D", strconv.Itoa(pid))
		listener.Dir = tmp
		lerrPipe, _ := listener.StderrPipe()
		if err := listener.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait until the listener says tracing is on.
		lerr := newLineLog(lerrPipe)
		if lerr.waitFor("turned on") == "" {
			t.Fatalf("the listener ended without turning tracing on:\n%s", lerr.String())
		}
		seen = p.seen(seen)
		lo := seen
		time.Sleep(300 * time.Millisecond)
		seen = p.seen(seen)
		hi := seen
		off := runCmd(t, tmp, rtraceBin, "toggle", strconv.Itoa(pid))
		if off.code != 0 {
			t.Fatalf("toggle off: %s", off.stderr)
		}
		if err := listener.Wait(); err != nil {
			t.Fatalf("listener: %v\n%s", err, lerr.String())
		}
		seen = p.seen(seen)
		windows = append(windows, window{lo, max(hi, seen)})
	}
	if err := rec.Wait(); err != nil {
		t.Fatalf("record: %v\n%s", err, recErr.String())
	}
	raw := rawFiles(t, filepath.Join(tmp, "D"), ".rtrace")
	if len(raw) != 2 {
		t.Fatalf("raw files %v, want two", raw)
	}
	for i, f := range raw {
		calls := readCalls(t, f)
		// Iteration k mallocs 1000+k and frees it; line k+2 of the output
		// (after the pid line) is printed after it.
		var iters []int
		for _, c := range calls {
			if c.Alloc {
				iters = append(iters, int(c.Size)-1000)
			}
		}
		if len(iters) < 20 {
			t.Fatalf("%s: %d iterations traced, want the ~100 of a 300 ms window", f, len(iters))
		}
		for j := 1; j < len(iters); j++ {
			if iters[j] != iters[j-1]+1 {
				t.Fatalf("%s: iterations %d then %d: not one contiguous window", f, iters[j-1], iters[j])
			}
		}
		w := windows[i]
		first, last := iters[0], iters[len(iters)-1]
		// Iteration k is output line k+2. The test saw w.lo lines once the
		// listener said tracing was on and w.hi once it was off; it reads
		// the output a few iterations late, hence the slack.
		const slack = 5
		if first < w.lo-2-slack || last > w.hi-2+slack {
			t.Errorf("%s: iterations %d..%d traced, the window was iterations %d..%d", f, first, last, w.lo-2, w.hi-2)
		}
		if d := len(iters) - (w.hi - w.lo); d < -2*slack || d > 2*slack {
			t.Errorf("%s: %d iterations traced in a window of %d", f, len(iters), w.hi-w.lo)
		}
		frees := len(calls) - len(iters)
		if frees < len(iters)-1 || frees > len(iters)+1 {
			t.Errorf("%s: %d mallocs but %d frees", f, len(iters), frees)
		}
	}
}
