// Package bench measures rtrace against the ptrace floor and its peers. The
// benchmarks run real programs; `make bench` runs them once and prints the
// ratios the issues set as targets.
//
// # Post-processing and resolving
//
// BenchmarkPostprocLeaks pipes a generated raw memory trace (a window of
// 1000 live blocks, 200 distinct 10-frame stacks, 50 leaks) into `rtrace
// postproc -l -c` at each size of RTRACE_BENCH_POSTPROC_MB (MiB,
// comma-separated, default 64,1024) and reports MB/s and the peak RSS per
// size, and rss-growth, the largest size's peak RSS over the smallest's
// (~1.0: memory stays flat as the trace grows). The report must show
// exactly the leaks generated.
//
// BenchmarkResolveFrames runs `rtrace resolve` over a generated trace of
// RTRACE_BENCH_RESOLVE_FRAMES frames (default 1,000,000; 2000 distinct
// addresses in testdata/leaky.c and libc) and reports frames/s, the steady
// rate without the one-time module loading (warm-frames/s, cold-ms), and
// the same stage in process (inproc-frames/s).
//
// A quick run:
//
//	RTRACE_BENCH_POSTPROC_MB=16,64 RTRACE_BENCH_RESOLVE_FRAMES=100000 \
//	  go test -run '^$' -bench 'Postproc|Resolve' -benchtime 1x ./bench
package bench
