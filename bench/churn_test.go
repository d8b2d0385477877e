package bench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"rtrace/internal/testutil"
	"rtrace/internal/trace"
	"rtrace/internal/wire"
)

// churnTool is one way of running testdata/churn.c in BenchmarkChurn.
type churnTool struct {
	name string
	// argv runs churn with arg (its N) writing any trace under dir.
	argv func(dir, arg string) []string
	// check, when set, fails the benchmark unless the trace under dir
	// holds the n pairs.
	check func(b *testing.B, dir string, n int)
	// perCall is the cost in ns per malloc or free; fixed, the cost of a run
	// with one pair (start-up and shutdown), both over the bare program.
	perCall, fixed float64
}

// BenchmarkChurn times N malloc/free pairs (testdata/churn.c at -O2 -g; N from
// RTRACE_BENCH_CHURN, default 40,000) and reports, from one run, the
// nanoseconds per call (malloc or free: 2N calls) of
//   - rtrace: `rtrace sp-rtrace -e memory --start -b 10`, to a closed raw trace
//     that must hold every pair, each malloc with its backtrace;
//   - rtrace-b0: the same without backtraces (-b 0);
//   - ltrace: `ltrace -e malloc+free`, as users run it, and pinned to one CPU
//     with taskset (the advantage rtrace gives itself);
//   - heaptrack: `heaptrack -o`, LD_PRELOAD with backtraces, its own
//     analysis included;
//
// with the ratios ltrace/rtrace, heaptrack/rtrace and rtrace/rtrace-b0. The
// native run time of churn N is subtracted from the traced ones; a missing
// ltrace or heaptrack is left out with a note. The logged table adds each
// tool's fixed cost, a run of one pair: heaptrack's per-call figure is
// mostly that start-up spread over 2N calls.
func BenchmarkChurn(b *testing.B) {
	n := 40000
	if s := os.Getenv("RTRACE_BENCH_CHURN"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 || n > 10000000 {
			b.Fatalf("RTRACE_BENCH_CHURN=%q: want a number from 1 to 10000000", s)
		}
	}
	churn := testutil.BuildC(b, "churn.c", "-O2", "-g")
	tmp := b.TempDir()
	rtrace, err := testutil.BuildRtrace(tmp)
	if err != nil {
		b.Fatal(err)
	}
	record := func(depth int) churnTool {
		return churnTool{
			argv: func(dir, arg string) []string {
				return []string{rtrace, "sp-rtrace", "-e", "memory", "--start", "-b", strconv.Itoa(depth), "-o", dir, "-q", "--", churn, arg}
			},
			check: func(b *testing.B, dir string, n int) { checkChurnTrace(b, dir, n, depth) },
		}
	}
	rt, rt0 := record(10), record(0)
	rt.name, rt0.name = "rtrace", "rtrace-b0"
	tools := []*churnTool{&rt, &rt0}
	var lt, ltPinned, ht *churnTool
	if p := churnPeer(b, "ltrace"); p != "" {
		lt = &churnTool{name: "ltrace", argv: func(_, arg string) []string {
			return []string{p, "-e", "malloc+free", "-o", os.DevNull, churn, arg}
		}}
		tools = append(tools, lt)
		if taskset, err := exec.LookPath("taskset"); err == nil {
			ltPinned = &churnTool{name: "ltrace-pinned", argv: func(dir, arg string) []string {
				return append([]string{taskset, "-c", "0"}, lt.argv(dir, arg)...)
			}}
			tools = append(tools, ltPinned)
		}
	}
	if p := churnPeer(b, "heaptrack"); p != "" {
		ht = &churnTool{name: "heaptrack", argv: func(dir, arg string) []string {
			return []string{p, "-o", filepath.Join(dir, "ht"), churn, arg}
		}}
		tools = append(tools, ht)
	}

	arg := strconv.Itoa(n)
	var native time.Duration
	for i := 0; i < b.N; i++ {
		native = wall(b, churn, arg)
		native1 := wall(b, churn, "1")
		for _, t := range tools {
			dir := filepath.Join(tmp, fmt.Sprintf("%s-%d", t.name, i))
			argv := t.argv(dir, arg)
			t.perCall = float64(wall(b, argv[0], argv[1:]...)-native) / float64(2*n)
			if t.check != nil {
				t.check(b, dir, n)
			}
			argv = t.argv(dir+"-1", "1")
			t.fixed = float64(wall(b, argv[0], argv[1:]...) - native1)
		}
	}

	for _, t := range tools {
		b.ReportMetric(t.perCall, t.name+"-ns/call")
	}
	ratio := func(num, den *churnTool, unit string) string {
		if num == nil {
			return ""
		}
		r := num.perCall / den.perCall
		b.ReportMetric(r, unit)
		return fmt.Sprintf("  %.2fx %s", r, den.name)
	}
	notes := map[*churnTool]string{
		&rt:      ratio(&rt, &rt0, "rtrace/rtrace-b0"),
		lt:       ratio(lt, &rt, "ltrace/rtrace"),
		ltPinned: ratio(ltPinned, &rt, "ltrace-pinned/rtrace"),
		ht:       ratio(ht, &rt, "heaptrack/rtrace"),
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "churn %d: %d malloc/free calls, native run %v\n", n, 2*n, native.Round(time.Microsecond))
	fmt.Fprintf(&sb, "  %-14s %10s %10s\n", "", "ns/call", "fixed ms")
	for _, t := range tools {
		fmt.Fprintf(&sb, "  %-14s %10.0f %10.1f%s\n", t.name, t.perCall, t.fixed/1e6, notes[t])
	}
	b.Log(sb.String())
}

// churnPeer returns the path of a peer tool, or "" with a note when it is
// missing: the benchmark then runs without it.
func churnPeer(b *testing.B, name string) string {
	b.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		b.Logf("%s not found, left out: %v", name, err)
		return ""
	}
	return p
}

// checkChurnTrace fails the benchmark unless dir holds one whole raw trace
// with at least n mallocs and n frees, nothing lost, and a backtrace of 1 to
// depth frames on every allocation (none when depth is 0): a time measured
// on a broken trace would mean nothing.
func checkChurnTrace(b *testing.B, dir string, n, depth int) {
	b.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.rtrace"))
	if err != nil || len(files) != 1 {
		b.Fatalf("rtrace wrote %q into %s, want one raw .rtrace file (%v)", files, dir, err)
	}
	f, err := os.Open(files[0])
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	r, err := wire.NewReader(f)
	if err != nil {
		b.Fatalf("reading %s: %v", files[0], err)
	}
	var calls, mallocs, frees int
	for {
		it, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			b.Fatalf("reading %s: %v", files[0], err)
		}
		switch it := it.(type) {
		case *trace.Lost:
			b.Fatalf("%s: %d events lost", files[0], it.Count)
		case *trace.Call:
			calls++
			switch it.Name {
			case "malloc":
				mallocs++
			case "free":
				frees++
			}
			if it.Alloc && (len(it.Frames) > depth || depth > 0 && len(it.Frames) == 0) {
				b.Fatalf("%s: call %d, %s, has %d frames, want 1 to %d", files[0], it.Index, it.Name, len(it.Frames), depth)
			}
		}
	}
	if calls < 2*n || mallocs < n || frees < n {
		b.Fatalf("%s: %d calls (%d mallocs, %d frees), want at least %d mallocs and %d frees", files[0], calls, mallocs, frees, n, n)
	}
}
