package launcher

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"rtrace/internal/timeline"
	"rtrace/internal/uftrace"
	"rtrace/tracer"
)

// endSignals are the signals that end a session (or its finishing).
var endSignals = []os.Signal{unix.SIGINT, unix.SIGTERM, unix.SIGHUP}

// catchSignals starts catching the signals that end a session, into the
// channel watchSignals reads. It runs first: Go's first signal.Notify
// waits for the runtime's signal thread to start, which took 0.2-0.9 ms
// once elfx.Prefetch kept a CPU busy.
func catchSignals() chan os.Signal {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, endSignals...)
	return sigs
}

// watchSignals answers the signals rtrace itself gets while tracing. The
// first SIGINT, SIGTERM or SIGHUP ends the session: record kills the
// target (the tracer sees it die, closes its frames and everything
// recorded is kept), attach detaches. A second SIGINT aborts (s.aborted).
// The toggle signal sent to rtrace is passed on to the target. With
// attach's duration, the timer detaches. It returns the function that
// stops watching. sigs already has the ending signals (catchSignals).
func (s *session) watchSignals(sigs chan os.Signal) (stop func()) {
	if s.c.toggleable() {
		signal.Notify(sigs, s.c.toggleSignal())
	}
	s.aborted, s.aborted3 = make(chan struct{}), make(chan struct{})
	quit := make(chan struct{})
	var timer <-chan time.Time
	if s.c.Duration > 0 {
		timer = time.After(s.c.Duration)
	}
	go func() {
		for {
			select {
			case sig := <-sigs:
				s.signal(sig.(unix.Signal))
			case <-timer:
				s.tr.Detach()
			case <-quit:
				return
			}
		}
	}()
	return func() {
		close(quit)
		// signal.Stop waits for the runtime's signal thread (0.04-0.4 ms
		// at the end of every run): a goroutine does it. A signal that
		// comes meanwhile is dropped: the session is over, its files are
		// being closed.
		go signal.Stop(sigs)
	}
}

// signal handles one signal rtrace got.
func (s *session) signal(sig unix.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sig == s.c.toggleSignal() && s.c.toggleable() {
		if s.pid > 0 {
			unix.Kill(s.pid, sig) // the tracer intercepts it there
		}
		return
	}
	if s.caught != nil {
		switch {
		case sig != unix.SIGINT:
		case !s.abort:
			s.abort = true
			close(s.aborted)
		case !s.abort3:
			s.abort3 = true
			close(s.aborted3)
		}
		return
	}
	s.caught = sig
	if s.c.Pid != 0 {
		s.tr.Detach()
		return
	}
	if s.pid > 0 {
		if s.rs != nil {
			s.rs.killed.Store(true)
		}
		unix.Kill(s.pid, unix.SIGKILL)
	}
}

// finish closes the outputs, reports how the session ended and returns
// the exit code: the program's for record, 0 for a detach.
func (s *session) finish(res *tracer.Result, runErr error) (int, error) {
	c := s.c
	var outs []string
	var errs []error
	if s.fs != nil {
		var ended *tracer.Result
		if c.Pid == 0 && runErr == nil {
			ended = res
		}
		o, err := s.fs.finish(ended)
		timeline.Mark("finished")
		switch {
		case c.send != nil && err == nil:
			o, err = c.send.send(s.fs.dirs)
		case c.send != nil:
			o = nil // the temporary directory goes: nothing to name
		}

		outs, errs = append(outs, o...), append(errs, err)
	}
	if s.rs != nil {
		o, err := s.rs.finish()
		outs, errs = append(outs, o...), append(errs, err)
	}
	finishErr := errors.Join(errs...)
	if errors.Is(runErr, tracer.ErrStreamClosed) {
		runErr = nil // a window closed: its sink said why, or finishErr does
	}
	what := c.Args
	if c.Pid != 0 {
		what = []string{"pid " + strconv.Itoa(c.Pid)}
	}
	if runErr != nil {
		var ref *tracer.Refusal
		if errors.As(runErr, &ref) {
			return 126, fmt.Errorf("%s: %w", what[0], runErr)
		}
		return 1, errors.Join(runErr, finishErr)
	}
	if c.ShowTime && res != nil && c.Pid == 0 {
		printTime(c.Stdout, s.ran, &res.Rusage)
	}
	if !c.Quiet || c.Verbose {
		s.reportSkipped(res)
		s.unmatched()
	}
	// saved ends the last line: where the trace is, or why there is none.
	saved := "trace saved in " + strings.Join(outs, ", ")
	if len(outs) == 0 {
		why := "no --start, no toggle"
		if c.Disable {
			why = "started with --disable, no toggle"
		}
		saved = "nothing saved: tracing was never turned on (" + why + ")"
	}
	if c.nopDir != "" {
		saved = "no trace kept (--nop)"
	}
	s.mu.Lock()
	caught := s.caught
	s.mu.Unlock()
	if finishErr != nil {
		// An output failed (a full disk): one line, the first failure
		// (the rest follow from it), and the program's own status.
		code := 1 // an attach: the trace is what it made
		switch {
		case c.Pid != 0:
		case caught != nil:
			code = 128 + int(caught.(unix.Signal))
		case res != nil:
			code = res.ExitCode()
		}
		msg, more, _ := strings.Cut(finishErr.Error(), "\n")
		if more != "" {
			if n := strings.Count(more, "\n") + 1; n == 1 {
				msg += " (and 1 more error)"
			} else {
				msg += fmt.Sprintf(" (and %d more errors)", n)
			}
		}
		where := "nothing saved"
		if len(outs) > 0 {
			where = "the trace in " + strings.Join(outs, ", ") + " is incomplete"
		}
		return code, &ExitError{code, fmt.Errorf("%s; %s", msg, where)}
	}
	switch {
	case c.Pid != 0:
		if !c.Quiet {
			fmt.Fprintf(c.Stderr, "rtrace: detached from pid %d; %s; %s\n", c.Pid, s.summary(res), saved)
		}
		return 0, nil
	case caught != nil && c.NoSummary && len(outs) > 0:
		fmt.Fprintf(c.Stderr, "rtrace: %v: target killed\n", caught)
		return 128 + int(caught.(unix.Signal)), nil
	case caught != nil:
		fmt.Fprintf(c.Stderr, "rtrace: %v: target killed; %s; %s\n", caught, s.summary(res), saved)
		return 128 + int(caught.(unix.Signal)), nil
	}
	summary := "; " + s.summary(res) + "; " + saved
	if c.NoSummary && len(outs) > 0 {
		summary = ""
	}
	if res.Status.Signaled() && !c.Quiet {
		// The shell would have said so; under rtrace it sees an exit code.
		sig := res.Status.Signal()
		fmt.Fprintf(c.Stderr, "rtrace: %s terminated by signal %d (%v)%s\n", c.Args[0], int(sig), sig, summary)
	} else if !c.Quiet && summary != "" {
		fmt.Fprintf(c.Stderr, "rtrace: %s\n", summary[2:])
	}
	return res.ExitCode(), nil
}

// printTime prints the program's running time (elapsed: from its start
// to rtrace's end of tracing) and its system and user time (ru, the
// program's own), in uftrace record --time's format (cmds/record.c,
// print_child_time and print_child_usage).
func printTime(w io.Writer, elapsed time.Duration, ru *unix.Rusage) {
	ns := elapsed.Nanoseconds()
	fmt.Fprintf(w, "elapsed time: %20s\n", fmt.Sprintf("%d.%09d sec", ns/1e9, ns%1e9))
	fmt.Fprintf(w, " system time: %6d.%06d000 sec\n", ru.Stime.Sec, ru.Stime.Usec)
	fmt.Fprintf(w, "   user time: %6d.%06d000 sec\n", ru.Utime.Sec, ru.Utime.Usec)
}

// summary is the one-line account of a session: events, lost, duration.
func (s *session) summary(res *tracer.Result) string {
	var parts []string
	if s.fs != nil {
		parts = append(parts, fmt.Sprintf("%d records", s.fs.records))
	}
	if s.rs != nil {
		parts = append(parts, fmt.Sprintf("%d resource calls", s.rs.calls))
	}
	var lost uint64
	if res != nil {
		lost = res.Lost
	}
	return fmt.Sprintf("%s, %d lost, in %s", strings.Join(parts, ", "), lost, time.Since(s.start).Round(time.Millisecond))
}

// reportSkipped lists the functions not traced (-v), or counts them.
func (s *session) reportSkipped(res *tracer.Result) {
	w := s.c.Stderr
	for _, u := range res.Unwound {
		if s.c.Verbose && u.Traced+u.Parts+u.Other > 0 {
			fmt.Fprintf(w, "rtrace: %s has no symbol table: traced the %d functions its unwind tables bound, named func_<address> (`rtrace resolve -i DIR` names them from a debug file); left out: %d split-off parts, %d others\n", u.Exe, u.Traced, u.Parts, u.Other)
		}
	}
	if s.c.Verbose && res.Fast {
		fmt.Fprintf(w, "rtrace: fast engine: %d of %d instrumented functions recorded without a stop\n", res.Functions-len(res.Int3Entries), res.Functions)
		if res.Walks > 0 {
			fmt.Fprintf(w, "rtrace: fast engine: %d of %d backtraces found in the process without a stop\n", res.Walks-min(res.WalkStops, res.Walks), res.Walks)
		}
		if res.ValueStops > 0 {
			fmt.Fprintf(w, "rtrace: fast engine: %d stops at entries and returns for what the stubs do not record (strings, floats, structs, stack arguments, read= counters, resource calls kept on stops)\n", res.ValueStops)
		}
	}
	if s.c.Verbose && len(res.Int3Entries) > 0 {
		fmt.Fprintf(w, "rtrace: %d function(s) traced with a slower int3 entry instead of a detour jump:\n", len(res.Int3Entries))
		for _, sk := range res.Int3Entries {
			fmt.Fprintf(w, "  %s: %s\n", sk.Func, sk.Reason)
		}
	}
	if len(res.Skipped) == 0 {
		return
	}
	fmt.Fprintf(w, "rtrace: %d function(s) not traced", len(res.Skipped))
	if !s.c.Verbose {
		fmt.Fprintln(w, " (-v lists them)")
		return
	}
	fmt.Fprintln(w, ":")
	for _, sk := range res.Skipped {
		fmt.Fprintf(w, "  %s: %s\n", sk.Func, sk.Reason)
	}
}

// unmatched warns of each -F, -N, -A and -R pattern that matched no
// traced function: a typo, or a function the program does not have.
func (s *session) unmatched() {
	if s.fs == nil {
		return
	}
	var names []string
	for _, funcs := range s.fs.symbols {
		for _, f := range funcs {
			names = append(names, f.Name)
		}
	}
	check := func(flag, pat string) {
		p, err := uftrace.ParseFuncPattern(pat, s.c.Match) // a module aside: by name
		if err != nil {
			return
		}
		for _, n := range names {
			if p.MatchSymbol(n) {
				return
			}
		}
		fmt.Fprintf(s.c.Stderr, "rtrace: warning: %s %q matches no traced function\n", flag, pat)
	}
	for _, g := range []struct {
		flag string
		pats []string
	}{{"-F", s.c.Filter}, {"-N", s.c.NoTrace}} {
		for _, p := range g.pats {
			check(g.flag, p)
		}
	}
	for _, g := range []struct {
		flag  string
		specs []string
	}{{"-A", s.c.ArgSpecs}, {"-R", s.c.RetSpecs}} {
		for _, spec := range g.specs {
			if fs, err := uftrace.ParseFuncSpec(spec); err == nil {
				check(g.flag, fs.Pattern)
			}
		}
	}
}

// checkAttach refuses a process rtrace cannot attach to, saying why.
func checkAttach(pid int) error {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return fmt.Errorf("pid %d: no such process", pid)
	}
	if _, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err != nil {
		return fmt.Errorf("pid %d: cannot read its executable (a kernel thread, or not yours): %w", pid, err)
	}
	if tp := tracerPid(status); tp != 0 {
		// TracerPid names the tracing thread: say its process.
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tp)); err == nil {
			if tgid := statusField(st, "Tgid:"); tgid > 0 {
				tp = tgid
			}
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", tp))
		return fmt.Errorf("pid %d is already traced by pid %d (%s): a process has one tracer at a time; stop that one first",
			pid, tp, strings.TrimSpace(string(comm)))
	}
	return nil
}

// tracerPid reads TracerPid from a /proc/<pid>/status text (0: none).
func tracerPid(status []byte) int { return statusField(status, "TracerPid:") }

// statusField reads a numeric field of a /proc/<pid>/status text (0:
// none).
func statusField(status []byte, key string) int {
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}
