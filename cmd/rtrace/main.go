// Command rtrace is a ptrace-driven, preload-free tracer for native Linux
// programs that writes uftrace-format directories and sp-rtrace streams.
package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"

	"rtrace/internal/timeline"
	"rtrace/launcher"
)

func main() { os.Exit(profiled(func() int { return run(os.Args) })) }

// init keeps the main goroutine on the main thread for --keep-pid: the
// command execs the program from it, and the thread group's leader is
// the thread its tracer seizes (launcher/keeppid.go). A Go program's main
// goroutine runs on the main thread when init locks it (runtime.LockOSThread).
func init() {
	for _, a := range os.Args {
		if len(a) >= len("--kee") && strings.HasPrefix("--keep-pid", a) { // getopt's prefixes too
			runtime.LockOSThread()
		}
	}
}

// profiled runs f under Go's CPU profiler when RTRACE_CPUPROFILE names a
// file to write the profile to (`go tool pprof -top rtrace FILE`): where
// rtrace's own time goes, for the benchmarks (bench/README.md).
func profiled(f func() int) int {
	timeline.Mark("main")
	defer timeline.Mark("end")
	if launcher.Supervising(os.Args) {
		return f() // the profiles are its tracer's, which gets the same variables
	}
	if mem := os.Getenv("RTRACE_MEMPROFILE"); mem != "" {
		// Where rtrace's memory goes: every allocation's bytes, by stack
		// (`go tool pprof -sample_index=alloc_space -top rtrace FILE`).
		defer func() {
			runtime.GC() // the profile is as of the last collection
			out, err := os.Create(mem)
			if err == nil {
				err = pprof.Lookup("allocs").WriteTo(out, 0)
				if cerr := out.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "rtrace: RTRACE_MEMPROFILE:", err)
			}
		}()
	}
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
