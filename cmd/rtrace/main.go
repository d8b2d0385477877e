// Command rtrace is a ptrace-driven, preload-free tracer for native Linux
// programs that writes uftrace-format directories and sp-rtrace streams.
package main

import (
	"fmt"
	"os"
	"runtime/pprof"

	"rtrace/internal/timeline"
)

func main() { os.Exit(profiled(func() int { return run(os.Args) })) }

// profiled runs f under Go's CPU profiler when RTRACE_CPUPROFILE names a
// file to write the profile to (`go tool pprof -top rtrace FILE`): where
// rtrace's own time goes, for the benchmarks (bench/README.md).
func profiled(f func() int) int {
	timeline.Mark("main")
	defer timeline.Mark("end")
	path := os.Getenv("RTRACE_CPUPROFILE")
	if path == "" {
		return f()
	}
	out, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rtrace: RTRACE_CPUPROFILE:", err)
		return 1
	}
	defer out.Close()
	if err := pprof.StartCPUProfile(out); err != nil {
		fmt.Fprintln(os.Stderr, "rtrace: RTRACE_CPUPROFILE:", err)
		return 1
	}
	defer pprof.StopCPUProfile()
	return f()
}
