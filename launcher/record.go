package launcher

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"rtrace/internal/cxxname"
	"rtrace/internal/elfx"
	"rtrace/internal/uftrace"
	"rtrace/resolver"
	"rtrace/tracer"
)

// RecordOptions are the options of `rtrace record`.
type RecordOptions struct {
	Dir         string   // output directory (default uftrace.data)
	Args        []string // program and its arguments
	Filter      []string // -F regexes
	NoTrace     []string // -N regexes
	ArgSpecs    []string // -A argument specs (uftrace syntax: func@arg1/i32,arg2/s)
	RetSpecs    []string // -R return-value specs (func@retval/s)
	AutoArgs    bool     // -a: specs of every function from DWARF
	Time        string   // -t: leave out calls shorter than this ("100us", "2ms")
	MaxStack    int      // --max-stack: record no call nested deeper (0: no limit)
	NoLibcall   bool     // --no-libcall: leave out calls into shared libraries
	NestLibcall bool     // --nest-libcall: also calls between libraries
	Patch       []string // -P FUNC@LIB: trace functions inside shared libraries
	Events      []string // -E provider:name globs: USDT probes to record
	Depth       int
	Quiet       bool
	Verbose     bool
	NoPin       bool
	Cmdline     string // rtrace's own command line, for info
	Version     string
	Stderr      io.Writer

	// Resource tracing (sp-rtrace's options).
	Modules      []string // -e: resource modules
	Start        bool     // --start: report from the start, not only once toggled
	OutDir       string   // -o: where raw <pid>-<n>.rtrace files go
	PostOpts     string   // -P "-l -c": post-process into <pid>-<n>.rtrace.txt
	Backtrace    int      // -b frames per backtrace
	BacktraceAll bool
	Monitor      []uint64
	ToggleSignal unix.Signal
	Manage       bool // --manage-preproc
}

// UsageError is a bad option or argument: the CLI exits 2 with its message.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// compile compiles -F/-N patterns (uftrace's rule, uftrace.Pattern).
func compile(flag string, pats []string) ([]uftrace.Pattern, error) {
	ps, err := uftrace.ParsePatterns(flag, pats)
	if err != nil {
		return nil, &UsageError{err.Error()}
	}
	return ps, nil
}

// libPatterns parses -P FUNC@LIB patterns: FUNC as -F patterns are, LIB
// a library's file name (libfoo.so also matches libfoo.so.1).
func libPatterns(pats []string) ([]tracer.LibPattern, error) {
	var out []tracer.LibPattern
	for _, p := range pats {
		i := strings.LastIndex(p, "@")
		if i < 0 || i == len(p)-1 || strings.Contains(p[i+1:], "/") {
			return nil, &UsageError{fmt.Sprintf("-P %q: name the library as FUNC@LIB (e.g. -P 'plug_.*@libplug.so'); the executable's own functions are all traced already (choose with -F/-N)", p)}
		}
		res, err := compile("-P", []string{p[:i]})
		if err != nil {
			return nil, err
		}
		out = append(out, tracer.LibPattern{Func: res[0], Lib: p[i+1:]})
	}
	return out, nil
}

// ListEvents prints the USDT probes of prog, one per line: provider:name,
// the operand string, and "(semaphore)" for a probe behind one.
func ListEvents(prog string, w io.Writer) error {
	path, err := lookPath(prog)
	if err != nil {
		return err
	}
	f, err := elfx.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", prog, err)
	}
	if f.ProbeErr != nil {
		return fmt.Errorf("%s: %w", prog, f.ProbeErr)
	}
	if len(f.Probes) == 0 {
		fmt.Fprintf(w, "# %s has no USDT probes (.note.stapsdt)\n", prog)
		return nil
	}
	for _, p := range f.Probes {
		sem := ""
		if p.Semaphore != 0 {
			sem = " (semaphore)"
		}
		fmt.Fprintf(w, "%s\t%s%s\n", p.FullName(), p.Args, sem)
	}
	return nil
}

// Record traces a program into a uftrace.data directory and returns its
// exit code (128+N when killed by signal N).
func Record(o RecordOptions) (int, error) {
	if len(o.Args) == 0 {
		return 2, &UsageError{"record: no program given (usage: rtrace record [OPTIONS] [--] PROG [ARGS...])"}
	}
	filter, err := compile("-F", o.Filter)
	if err != nil {
		return 2, err
	}
	notrace, err := compile("-N", o.NoTrace)
	if err != nil {
		return 2, err
	}
	libFuncs, err := libPatterns(o.Patch)
	if err != nil {
		return 2, err
	}
	mods, err := tracer.ResolveModules(o.Modules)
	if err != nil {
		return 2, &UsageError{"-e: " + err.Error()}
	}
	var post func(io.Reader, io.Writer) error
	if o.PostOpts != "" {
		if post, err = postFunc(o.PostOpts); err != nil {
			return 2, &UsageError{fmt.Sprintf("-P %q: %v", o.PostOpts, err)}
		}
	}
	// Resource tracing alone records no function calls, unless -d asks
	// for a uftrace.data directory too.
	resOnly := len(mods) > 0 && o.Dir == ""
	if len(mods) > 0 && !resOnly {
		a, r := resSpecs(mods)
		o.ArgSpecs, o.RetSpecs = append(o.ArgSpecs, a...), append(o.RetSpecs, r...)
	}
	specLines, specs, err := argSpecs(o)
	if err != nil {
		return 2, err
	}
	threshold, err := parseTime(o.Time)
	if err != nil {
		return 2, err
	}
	if o.MaxStack < 0 {
		return 2, &UsageError{fmt.Sprintf("--max-stack %d: depth must be positive", o.MaxStack)}
	}
	if o.Depth < 0 {
		return 2, &UsageError{fmt.Sprintf("-D %d: depth must be positive", o.Depth)}
	}
	if o.Dir == "" {
		o.Dir = "uftrace.data"
	}
	prog, err := lookPath(o.Args[0])
	if err != nil {
		return 127, err
	}
	ef, err := elfx.Open(prog)
	if err != nil {
		return 126, fmt.Errorf("%s: cannot trace it: %w", o.Args[0], err)
	}
	var rs *resStream
	if len(mods) > 0 {
		rs = &resStream{mods: mods, depth: o.Backtrace, outDir: o.OutDir, postOpts: o.PostOpts, post: post, manage: o.Manage, start: o.Start}
	}
	con := &console{w: o.Stderr}
	var us *uftraceSink
	var sink tracer.Sink = nopSink{}
	if !resOnly {
		info := uftrace.Info{ExeName: prog, BuildID: ef.BuildID, Cmdline: o.Cmdline, Version: "rtrace " + o.Version, ArgSpecs: specLines}
		if us, err = newUftraceSink(o.Dir, info, con, o.AutoArgs); err != nil {
			return 1, err
		}
		sink = us
	}
	if rs != nil {
		sink = resSink{sink, rs}
	}
	start := time.Now()

	var mu sync.Mutex
	pid := 0
	var caught os.Signal
	tr := tracer.New(tracer.Config{
		Path: prog, Args: o.Args, Filter: filter, NoTrace: notrace, Depth: o.Depth,
		Pin:          !o.NoPin,
		TimeFilter:   threshold,
		MaxStack:     o.MaxStack,
		Libcalls:     !o.NoLibcall,
		NestLibcall:  o.NestLibcall && !o.NoLibcall,
		LibFuncs:     libFuncs,
		Events:       o.Events,
		Warn:         con,
		Specs:        specs,
		NoFuncs:      resOnly,
		Modules:      mods,
		Start:        o.Start,
		Backtrace:    o.Backtrace,
		BacktraceAll: o.BacktraceAll,
		Monitor:      o.Monitor,
		ToggleSignal: o.ToggleSignal,
		Started: func(p int) {
			mu.Lock()
			defer mu.Unlock()
			pid = p
			if caught != nil { // Ctrl-C while the target was being set up
				unix.Kill(pid, unix.SIGKILL)
			}
		},
	}, sink)

	// Ctrl-C and SIGTERM kill the target; the tracer then sees it die,
	// closes its frames, and everything recorded is flushed below.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, unix.SIGINT, unix.SIGTERM, unix.SIGHUP)
	defer signal.Stop(sigs)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				mu.Lock()
				if caught != nil && s == unix.SIGINT {
					// The second Ctrl-C: give up on flushing.
					fmt.Fprintln(o.Stderr, "rtrace: interrupted twice, aborting")
					os.Exit(128 + int(unix.SIGINT))
				}
				caught = s
				if pid > 0 {
					unix.Kill(pid, unix.SIGKILL)
				}
				mu.Unlock()
			case <-done:
				return
			}
		}
	}()
	stopStatus := startStatus(o, con, tr)
	res, runErr := tr.Run()
	close(done)
	stopStatus()

	var finishErr error
	saved := o.Dir
	if us != nil {
		finishErr = errors.Join(us.close(), finish(us.w, res, start))
	}
	if rs != nil {
		if runErr == nil && caught == nil {
			rs.exited()
		}
		files, err := rs.close()
		finishErr = errors.Join(finishErr, err)
		if resOnly {
			saved = strings.Join(files, ", ")
			if saved == "" {
				saved = "no file (tracing was never turned on)"
			}
		}
		if !o.Quiet {
			for _, f := range files {
				fmt.Fprintf(o.Stderr, "rtrace: resource trace written to %s\n", f)
			}
		}
	}
	if runErr != nil {
		var ref *tracer.Refusal
		if errors.As(runErr, &ref) {
			return 126, fmt.Errorf("%s: %w", o.Args[0], runErr)
		}
		return 1, errors.Join(runErr, finishErr)
	}
	if finishErr != nil {
		return 1, finishErr
	}
	if o.Verbose || len(res.Skipped) > 0 && !o.Quiet {
		reportSkipped(o, res)
	}
	mu.Lock()
	defer mu.Unlock()
	if caught != nil {
		fmt.Fprintf(o.Stderr, "rtrace: %v: target killed, trace saved in %s\n", caught, saved)
		return 128 + int(caught.(unix.Signal)), nil
	}
	if res.Status.Signaled() && !o.Quiet {
		// The shell would have said so; under rtrace it sees an exit code.
		sig := res.Status.Signal()
		fmt.Fprintf(o.Stderr, "rtrace: %s terminated by signal %d (%v), trace saved in %s\n", o.Args[0], int(sig), sig, saved)
	}
	return res.ExitCode(), nil
}

func reportSkipped(o RecordOptions, res *tracer.Result) {
	if o.Verbose && len(res.Int3Entries) > 0 {
		fmt.Fprintf(o.Stderr, "rtrace: %d function(s) traced with a slower int3 entry instead of a detour jump:\n", len(res.Int3Entries))
		for _, s := range res.Int3Entries {
			fmt.Fprintf(o.Stderr, "  %s: %s\n", s.Func, s.Reason)
		}
	}
	if len(res.Skipped) == 0 {
		return
	}
	fmt.Fprintf(o.Stderr, "rtrace: %d function(s) not traced", len(res.Skipped))
	if !o.Verbose {
		fmt.Fprintln(o.Stderr, " (-v lists them)")
		return
	}
	fmt.Fprintln(o.Stderr, ":")
	for _, s := range res.Skipped {
		fmt.Fprintf(o.Stderr, "  %s: %s\n", s.Func, s.Reason)
	}
}

// finish writes what is known only at the end into info and closes the directory.
func finish(w *uftrace.Writer, res *tracer.Result, start time.Time) error {
	elapsed := time.Since(start)
	err := w.UpdateInfo(func(in *uftrace.Info) {
		if res != nil {
			st := int(res.Status)
			in.ExitStatus = &st
			in.Usage = uftrace.UsageFromRusage(&res.Rusage)
		}
		in.RecordDate = start.Format("Mon Jan _2 15:04:05 2006")
		in.Elapsed = fmt.Sprintf("%d.%09d sec", elapsed/time.Second, elapsed%time.Second)
	})
	return errors.Join(err, w.Close())
}

// moveAside renames an existing output directory to DIR.old, as uftrace
// record does, so a new trace never mixes with an old one.
func moveAside(dir string) error {
	st, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("output %s exists and is not a directory", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "info")); err != nil {
		ents, _ := os.ReadDir(dir)
		if len(ents) == 0 {
			return nil
		}
		return fmt.Errorf("output directory %s exists and is not a trace; remove it or choose another with -d", dir)
	}
	old := strings.TrimRight(dir, "/") + ".old"
	os.RemoveAll(old)
	return os.Rename(dir, old)
}

func lookPath(prog string) (string, error) {
	p := prog
	if !strings.Contains(prog, "/") {
		var err error
		if p, err = exec.LookPath(prog); err != nil {
			return "", fmt.Errorf("%s: not found in PATH", prog)
		}
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("%s: %w", prog, err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%s: not an executable file", prog)
	}
	return abs, nil
}

// argSpecs checks -A and -R and returns info's argspec lines and the lookup
// the tracer uses to find each function's specs, nil without any. With -a
// (auto-args), each executable's DWARF adds the specs the resolver writes
// as its .dbg A:/R: lines, merged as uftrace's reader merges them.
func argSpecs(o RecordOptions) ([]uftrace.ArgSpecLine, func(exe *elfx.File, name string) (args, rets []uftrace.ArgSpec), error) {
	var lines []uftrace.ArgSpecLine
	for _, g := range []struct {
		flag, key string
		specs     []string
	}{{"-A", "argspec", o.ArgSpecs}, {"-R", "retspec", o.RetSpecs}} {
		if len(g.specs) == 0 {
			continue
		}
		for _, s := range g.specs {
			fs, err := uftrace.ParseFuncSpec(s)
			if err == nil && fs.Pattern == "" {
				err = fmt.Errorf("no function before '@'")
			}
			if err == nil {
				_, err = regexp.Compile(fs.Pattern)
			}
			if err != nil {
				return nil, nil, &UsageError{fmt.Sprintf("%s %q: %v", g.flag, s, err)}
			}
		}
		lines = append(lines, uftrace.ArgSpecLine{Key: g.key, Value: strings.Join(g.specs, ";")})
	}
	if o.AutoArgs {
		lines = append(lines, uftrace.ArgSpecLine{Key: "auto-args", Value: "1"})
	}
	if len(lines) == 0 {
		return nil, nil, nil
	}
	table, err := uftrace.NewSpecs(lines, "regex")
	if err != nil {
		return nil, nil, &UsageError{err.Error()}
	}
	auto := map[string]map[string][]uftrace.ArgSpec{} // by executable, by function
	return lines, func(exe *elfx.File, name string) (args, rets []uftrace.ArgSpec) {
		args, rets = table.Lookup(cxxname.Short(name)) // as uftrace's reader matches
		if !o.AutoArgs {
			return args, rets
		}
		specs, ok := auto[exe.Path]
		if !ok {
			specs = map[string][]uftrace.ArgSpec{}
			dbg, _ := resolver.DebugFuncs(exe.Path, exe, true) // no DWARF: no auto specs
			for _, d := range dbg {
				for _, s := range []string{d.ArgSpec, d.RetSpec} {
					if fs, err := uftrace.ParseFuncSpec(s); err == nil {
						specs[d.Name] = append(specs[d.Name], fs.Args...)
					}
				}
			}
			auto[exe.Path] = specs
		}
		return uftrace.Merge(args, rets, specs[name])
	}, nil
}

// parseTime parses a -t threshold as uftrace does (a bare number is ns).
func parseTime(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	t, err := uftrace.ParseTime(s)
	if err != nil {
		return 0, &UsageError{"-t: " + err.Error()}
	}
	return t, nil
}
