// Command run is `make bench`: it prepares the workloads (rtrace's C
// fixtures, and Lua, sqlite3 and bzip2 built from Debian's source
// packages, cached in bench/build), runs each under rtrace and its peers,
// and prints one table per workload. RTRACE_BENCH_QUICK=1 (or -quick)
// makes every workload small: a run of a few minutes.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"rtrace/bench/suite"
	"rtrace/internal/testutil"
)

func main() {
	quick := flag.Bool("quick", os.Getenv("RTRACE_BENCH_QUICK") == "1", "small workloads (also RTRACE_BENCH_QUICK=1)")
	runs := flag.Int("runs", 5, "runs of each tool on each workload; the table shows the median and the range")
	only := flag.String("only", "", "run only these workloads (comma-separated: "+strings.Join(suite.Names, ",")+")")
	tools := flag.String("tools", "", "run only these tools (comma-separated rows, e.g. 'rtrace,uftrace -pg'; the untraced row always runs)")
	flag.Parse()
	if err := run(*quick, *runs, *only, *tools); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(quick bool, runs int, only, tools string) error {
	if runs < 1 {
		return fmt.Errorf("-runs %d: want 1 or more", runs)
	}
	root := testutil.Root()
	log := os.Stderr
	start := time.Now()
	b := &suite.Builder{Dir: filepath.Join(root, "bench", "build"), Root: root, Log: log}
	want := map[string]bool{}
	for _, n := range strings.Split(only, ",") {
		if n == "" {
			continue
		}
		if !slices.Contains(suite.Names, n) {
			return fmt.Errorf("-only %s: no such workload (%s)", n, strings.Join(suite.Names, ", "))
		}
		want[n] = true
	}
	for _, t := range [][2]string{{"gcc", "gcc"}, {"make", "make"}, {"uftrace", "uftrace"}} {
		if _, err := suite.Need(t[0], t[1], log); err != nil {
			return err
		}
	}
	rtrace := filepath.Join(b.Dir, "rtrace")
	// The toolchain that runs the bench builds rtrace (make bench GO=...).
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	cmd := exec.Command(goBin, "build", "-tags", testutil.BuildTags, "-o", rtrace, "./cmd/rtrace")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building rtrace: %v\n%s", err, out)
	}
	floor, err := b.Fixture("int3loop.c", "-O2")
	if err != nil {
		return err
	}
	ws, failed := suite.Workloads(b, suite.Scale{Quick: quick, Runs: runs, Only: want})
	scratch, err := os.MkdirTemp("", "rtrace-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	// Ctrl-C or SIGTERM: the measured command runs in its own process
	// group, out of the terminal's reach; stop it, and leave no scratch.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		suite.KillRunning()
		os.RemoveAll(scratch)
		fmt.Fprintf(log, "bench: %v: stopped\n", sig)
		os.Exit(130)
	}()
	// A peer that takes a minute a run (ltrace on a real program) is run
	// once; one that would take over two is stopped and its row skipped.
	budget, timeout := 60*time.Second, 2*time.Minute
	if quick {
		budget, timeout = 5*time.Second, 30*time.Second
	}
	all, err := pickTools(suite.Tools(rtrace), tools)
	if err != nil {
		return err
	}
	r := &suite.Runner{Tools: all, Runs: runs, Scratch: scratch, Log: log, FloorBin: floor, Budget: budget, Timeout: timeout}
	fmt.Printf("rtrace bench: %s, %d runs each; %s\n", map[bool]string{true: "quick", false: "full"}[quick], runs, machine())
	var reps []*suite.Report
	for _, w := range ws {
		if len(want) > 0 && !want[w.Name] {
			continue
		}
		rep := r.Run(w)
		suite.Print(os.Stdout, rep)
		reps = append(reps, rep)
	}
	suite.PrintMarginals(os.Stdout, suite.Marginals(reps))
	if lines := suite.ThreadScaling(reps); len(lines) > 0 {
		fmt.Println("\n== threads")
		for _, l := range lines {
			fmt.Println("  " + l)
		}
	}
	for name, err := range failed {
		if len(want) == 0 || want[name] {
			fmt.Printf("\n== %s: not prepared: %v\n", name, err)
		}
	}
	fmt.Printf("\nbench: done in %s\n", time.Since(start).Round(time.Second))
	return nil
}

// pickTools keeps the tools named in the comma-separated list (all when
// it is empty).
func pickTools(all []suite.Tool, list string) ([]suite.Tool, error) {
	if list == "" {
		return all, nil
	}
	var names []string
	for _, t := range all {
		if !slices.Contains(names, t.Name) {
			names = append(names, t.Name)
		}
	}
	var kept []suite.Tool
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(names, n) {
			return nil, fmt.Errorf("-tools %q: no such tool (%s)", n, strings.Join(names, ", "))
		}
		for _, t := range all {
			if t.Name == n {
				kept = append(kept, t)
			}
		}
	}
	return kept, nil
}

// machine names the CPU, the cores and the kernel.
func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	kernel := "?"
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("%s, %d cores, Linux %s", cpu, runtime.NumCPU(), kernel)
}
