package bench

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"rtrace/internal/testutil"
)

// fibCalls is how many times fib(n) of testdata/fib.c calls fib.
func fibCalls(n int) int {
	if n < 2 {
		return 1
	}
	return 1 + fibCalls(n-1) + fibCalls(n-2)
}

// wall runs a command with its output discarded and returns how long it took.
func wall(b *testing.B, name string, args ...string) time.Duration {
	b.Helper()
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s %v: %v", name, args, err)
	}
	return time.Since(start)
}

// BenchmarkFib traces fib(N) (testdata/fib.c at -O0; N from RTRACE_BENCH_FIB,
// default 25: 485,570 events) and reports, from one run, the nanoseconds per
// event of
//   - floor: the bare ptrace breakpoint loop (int3 → wait4 → PTRACE_CONT)
//     on testdata/int3loop.c, measured by this program, pinned like rtrace;
//   - rtrace int3: `rtrace record --engine=int3` of fib(N), from start to a
//     closed trace (a stop per event: the floor is its bound);
//   - rtrace: the same with the default engine (fast: no stop per event);
//   - ltrace: `ltrace -x fib` of fib(N), as users run it, and pinned to one
//     CPU with taskset (the advantage rtrace gives itself);
//
// with the ratios rtrace-int3/floor (target ≤ 1.3) and ltrace/rtrace-int3
// (target ≥ 7). bench/suite compares the fast engine with uftrace.
// The native run time of fib(N) is subtracted from the traced ones.
func BenchmarkFib(b *testing.B) {
	n := 25
	if s := os.Getenv("RTRACE_BENCH_FIB"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 2 || n > 32 {
			b.Fatalf("RTRACE_BENCH_FIB=%q: want a number from 2 to 32", s)
		}
	}
	fib := testutil.BuildC(b, "fib.c", "-O0")
	loop := testutil.BuildC(b, "int3loop.c", "-O2")
	ltrace := testutil.RequireTool(b, "ltrace")
	taskset, _ := exec.LookPath("taskset")
	tmp := b.TempDir()
	rtrace, err := testutil.BuildRtrace(tmp)
	if err != nil {
		b.Fatal(err)
	}
	arg := strconv.Itoa(n)
	// fib's calls and main's, each an entry and an exit.
	events := 2 * (fibCalls(n) + 1)
	per := func(d, native time.Duration, events int) float64 {
		return float64(d-native) / float64(events)
	}
	var floor, rt, rtFast, lt, ltPinned float64
	for i := 0; i < b.N; i++ {
		native := wall(b, fib, arg)
		d, err := Floor(loop, min(events, 200000), true)
		if err != nil {
			b.Fatal(err)
		}
		floor = float64(d)
		out := filepath.Join(tmp, "uftrace.data")
		// rtrace records the two library calls too, as ltrace does.
		for _, engine := range []struct {
			flag string
			ns   *float64
		}{{"--engine=int3", &rt}, {"--engine=fast", &rtFast}} {
			*engine.ns = per(wall(b, rtrace, "record", "-q", engine.flag, "-d", out, "--", fib, arg), native, events+4)
			if entries, exits := testutil.CountRecords(b, out); entries+exits != events+4 {
				b.Fatalf("rtrace %s recorded %d entries and %d exits of fib(%d) and its 2 library calls, want %d events", engine.flag, entries, exits, n, events+4)
			}
		}
		// ltrace also shows the two library calls (atoi, printf).
		lt = per(wall(b, ltrace, "-x", "fib", "-o", os.DevNull, fib, arg), native, events+4)
		if taskset != "" {
			ltPinned = per(wall(b, taskset, "-c", "0", ltrace, "-x", "fib", "-o", os.DevNull, fib, arg), native, events+4)
		}
	}
	b.ReportMetric(floor, "floor-ns/event")
	b.ReportMetric(rt, "rtrace-int3-ns/event")
	b.ReportMetric(rtFast, "rtrace-ns/event")
	b.ReportMetric(lt, "ltrace-ns/event")
	b.ReportMetric(rt/floor, "rtrace-int3/floor")
	b.ReportMetric(lt/rt, "ltrace/rtrace-int3")
	summary := fmt.Sprintf("fib(%d), %d events, ns per event:\n"+
		"  floor        %8.0f\n  rtrace int3  %8.0f  (%.2fx the floor; target <= 1.3)\n"+
		"  ltrace       %8.0f  (%.1fx rtrace int3; target >= 7)\n"+
		"  rtrace       %8.1f  (the fast engine, the default)\n", n, events, floor, rt, rt/floor, lt, lt/rt, rtFast)
	if taskset != "" {
		b.ReportMetric(ltPinned/rt, "ltrace-pinned/rtrace-int3")
		summary += fmt.Sprintf("  ltrace pinned (taskset -c 0) %8.0f  (%.1fx rtrace int3)\n", ltPinned, ltPinned/rt)
	}
	b.Log(summary)
}
