package launcher

import (
	"path"

	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"rtrace/internal/perfcomm"
	"rtrace/internal/tty"
	"rtrace/internal/uftrace"
	"rtrace/tracer"
)

// ErrAborted is a session left at a second Ctrl-C, its trace unfinished.
var ErrAborted = errors.New("interrupted twice, aborting")

// Record traces a program (o.Args) and returns the exit code rtrace
// should exit with: the program's (128+N when a signal N killed it).
func Record(o Options) (int, error) { return run(o) }

// Attach traces the running process o.Pid until Ctrl-C, o.Duration or
// its end, then detaches and leaves it running as it was. The tracer is a
// child process that detaches when this one dies, however (supervise).
func Attach(o Options) (int, error) {
	if supervisorPid() == 0 {
		return supervise(o)
	}
	// In a process group of its own: writing to the terminal must not
	// stop it (SIGTTOU, with stty tostop). Nor may a reader of its output
	// that went away kill it (SIGPIPE, which Go lets kill a program that
	// writes to a closed pipe on fd 1 or 2): it holds a process, which it
	// must still detach from. Its writes fail instead.
	signal.Ignore(unix.SIGTTOU, unix.SIGPIPE)
	return run(o)
}

// run checks o, then runs one session.
func run(o Options) (int, error) {
	switch {
	case o.KeepPid && os.Getenv(keepPidSpawnEnv) != "":
		return spawnTracer()
	case o.KeepPid && os.Getenv(keepPidEnv) == "":
		return keepPid(o) // returns on an error only: the program replaced it
	}
	sigs := catchSignals()
	ready := startupGC() // before check, which parses the executable
	defer ready()
	ctx, stopEarly := earlySignals(sigs)
	c, err := check(ctx, o)
	stopEarly()
	if err != nil {
		signal.Stop(sigs)
		return exitCode(err), err
	}
	defer c.close()
	s := newSession(c, ready)
	return s.run(sigs)
}

// interrupted is the error that ends a run a signal stopped before the
// program started (ctx's cause, earlySignals): 128 plus the signal.
func interrupted(ctx context.Context) error {
	sig := unix.SIGINT
	if s, ok := context.Cause(ctx).(signalCause); ok {
		sig = s.sig
	}
	return &ExitError{128 + int(sig), fmt.Errorf("interrupted (%v)", sig)}
}

// signalCause is the signal that cancelled a context.
type signalCause struct{ sig unix.Signal }

func (s signalCause) Error() string { return s.sig.String() }

// earlySignals cancels the context it returns when an ending signal comes
// while the session is set up (connecting to uftrace recv may take long),
// and puts the signal back for the session to act on. The function it
// returns stops watching.
func earlySignals(sigs chan os.Signal) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case sig := <-sigs:
			s, _ := sig.(unix.Signal)
			cancel(signalCause{s})
			select {
			case sigs <- sig: // for the session
			default: // more came meanwhile: they stand for it
			}
		case <-quit:
		}
	}()
	return ctx, func() {
		close(quit)
		<-done
		cancel(nil)
	}
}

// exitCode is the status an error calls for: 2 for usage, the code of an
// *ExitError, else 1.
func exitCode(err error) int {
	var ue *UsageError
	var ee *ExitError
	switch {
	case errors.As(err, &ue):
		return 2
	case errors.As(err, &ee):
		return ee.Code
	}
	return 1
}

// session is one run of the tracer, record or attach: the streams it
// feeds, the signals it answers, and how it ends.
type session struct {
	c     *config
	con   *tty.Line
	tr    *tracer.Tracer
	fs    *funcStream // nil: no function trace
	rs    *resStream  // nil: no resource trace
	marks marks
	start time.Time
	ran   time.Duration // from start to the tracer's end

	mu      sync.Mutex
	pid     int           // the target, once it runs
	caught  os.Signal     // the signal that stopped the session
	aborted chan struct{} // closed at a second Ctrl-C
	abort   bool          // aborted is closed
	// aborted3 is closed at a third Ctrl-C: an attach leaves the process
	// as it is, without waiting for the detach any longer.
	aborted3 chan struct{}
	abort3   bool
	files    []string // control files to remove at the end
}

func newSession(c *config, ready func()) *session {
	s := &session{c: c, con: tty.NewLine(c.Stderr)}
	info := uftrace.Info{Cmdline: c.Cmdline, Version: "rtrace " + c.Version, ArgSpecs: c.specLine, PatternType: cmp.Or(c.Match, uftrace.PatternRegex)}
	if c.EstimateReturn {
		info.Features |= uftrace.FeatEstimateReturn // the reader estimates the returns
	}
	if c.taskNames() {
		info.Features |= uftrace.FeatPerfEvent // perf-cpuN.dat: the reader merges them
	}
	if c.exe != nil {
		info.ExeName = c.prog
		if len(c.untraced) == 0 { // a script's is its interpreter's
			info.BuildID = c.exe.BuildID
		}
	} else if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", c.Pid)); err == nil {
		info.ExeName = exe
	}
	var funcs tracer.FuncSink
	var res tracer.ResSink
	if c.funcDir != "" || c.rawDir != "" {
		s.fs = newFuncStream(c, &s.marks, info)
		funcs = s.fs
	}
	if len(c.mods) > 0 {
		s.rs = newResStream(c, &s.marks)
		res = s.rs
	}
	s.tr = tracer.New(tracer.Config{
		Path: c.prog, Args: c.Args, Pin: !c.NoPin,
		Libcalls:     !c.NoLibcall,
		NestLibcall:  c.NestLibcall && !c.NoLibcall,
		CloseAtEnd:   c.EstimateReturn,
		Select:       c.sel,
		NoRandomize:  c.NoRandomize,
		Env:          c.env(),
		Events:       c.Events,
		Warn:         s.con,
		Specs:        c.specs,
		Reads:        c.reads(),
		WatchCPU:     c.watchCPU,
		WithSyms:     c.WithSyms,
		Modules:      c.mods,
		Start:        c.onAtStart(),
		Toggle:       c.toggleable(),
		ToggleSignal: c.ToggleSignal,
		Backtrace:    c.Backtrace,
		BacktraceAll: c.BacktraceAll,
		Monitor:      c.Monitor,
		Started:      s.started,
		Ready:        ready,
		Fast:         c.Engine == "fast",
		Untraced:     c.untraced,
		Signals:      c.signals,
	}, funcs, res)
	if s.fs != nil {
		s.fs.listener.gone = s.tr.CloseWindow
	}
	if s.rs != nil {
		s.rs.listener.gone = s.tr.CloseWindow
	}
	return s
}

// onAtStart says whether tracing is on from the start: resource tracing
// waits for --start or a toggle (sp-rtrace), function tracing for a
// toggle only with --disable (uftrace).
func (c *config) onAtStart() bool {
	return !c.Disable && (len(c.mods) == 0 || c.Start || c.Pid != 0)
}

// taskNames says whether an -E pattern selects linux:task-name, the
// task name changes uftrace records with perf events (perfcomm).
func (c *config) taskNames() bool {
	for _, e := range c.Events {
		if ok, _ := path.Match(e, "linux:task-name"); ok {
			return true
		}
	}
	return false
}

// toggleable says whether the toggle signal is rtrace's: with resource
// tracing, --disable or -g (the agent). Otherwise it stays the program's.
func (c *config) toggleable() bool { return len(c.mods) > 0 || c.Disable || c.Agent }

// started is the tracer's word that the target runs (pid): it is
// announced for toggling, or killed at once if a signal came meanwhile.
func (s *session) started(pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pid = pid
	if s.caught != nil && s.c.Pid == 0 {
		unix.Kill(pid, unix.SIGKILL)
		return
	}
	if s.fs != nil && s.c.taskNames() {
		if r, err := perfcomm.Open(pid); err != nil {
			fmt.Fprintf(s.con, "rtrace: warning: -E linux:task-name records nothing: %v\n", err)
		} else {
			s.fs.perf.Store(r)
		}
	}
	switch {
	case s.c.toggleable():
		s.marks.clearStale(pid, s.c.Pid == 0)
		s.announce(pid)
	case s.c.Pid == 0 && !s.c.Quiet && tty.Background(s.c.Stderr):
		fmt.Fprintf(s.con, "rtrace: tracing pid %d\n", pid)
	}
	if s.c.Pid != 0 && !s.c.Quiet {
		how := "Ctrl-C detaches"
		if s.c.Duration > 0 {
			how = fmt.Sprintf("detaching in %v or at Ctrl-C", s.c.Duration)
		}
		fmt.Fprintf(s.con, "rtrace: attached to pid %d; %s\n", pid, how)
	}
}

// announce writes the control files `rtrace toggle` reads: the toggle
// signal of the target, and the target of this rtrace; and says, unless
// -q, which pid to toggle.
func (s *session) announce(pid int) {
	if err := privateDir(FIFODir()); err != nil {
		fmt.Fprintf(s.con, "rtrace: warning: 'rtrace toggle %d' cannot reach this session: %v\n", pid, err)
		return
	}
	sweepStale(FIFODir())
	type stateFile struct{ path, text string }
	files := []stateFile{{ControlPath(pid), strconv.Itoa(int(s.c.toggleSignal()))}, {TargetPath(os.Getpid()), strconv.Itoa(pid)}}
	if sup := supervisorPid(); sup != 0 {
		files = append(files, stateFile{TargetPath(sup), strconv.Itoa(pid)}) // the command's pid names it too
	}
	for _, f := range files {
		if err := writeState(f.path, f.text); err == nil {
			s.files = append(s.files, f.path)
		} else {
			fmt.Fprintf(s.con, "rtrace: warning: 'rtrace toggle %d' cannot reach this session: %v\n", pid, err)
		}
	}
	if !s.c.Quiet {
		fmt.Fprintf(s.con, "rtrace: tracing pid %d (%s); 'rtrace toggle %d' turns tracing on and off\n", pid, onOff(s.c.onAtStart()), pid)
	}
}

func (c *config) toggleSignal() unix.Signal {
	if c.ToggleSignal == 0 {
		return unix.SIGUSR1
	}
	return c.ToggleSignal
}

// ControlPath is the file naming the toggle signal of a target whose
// tracing `rtrace toggle` may switch.
func ControlPath(pid int) string { return FIFOPath(pid) + ".ctl" }

// run traces until the target ends, a signal stops it, or (attach) the
// duration passes; then finishes the outputs and reports.
func (s *session) run(sigs chan os.Signal) (int, error) {
	s.start = time.Now()
	stopSignals := s.watchSignals(sigs)
	stopStatus := s.startStatus()
	type outcome struct {
		res *tracer.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		var o outcome
		switch {
		case s.c.Pid != 0:
			o.res, o.err = s.tr.Attach(s.c.Pid)
		case s.c.KeepPid:
			o.res, o.err = s.adopt()
		default:
			o.res, o.err = s.tr.Run()
		}
		done <- o
	}()
	var o outcome
	select {
	case o = <-done:
		s.ran = time.Since(s.start)
	case <-s.aborted:
		stopStatus()
		if s.c.Pid != 0 {
			// The process goes on after rtrace: its code is restored and
			// it is detached whatever else is cut short, and signals
			// still come to rtrace meanwhile, not to its default action.
			fmt.Fprintf(s.con, "rtrace: interrupted twice: restoring pid %d's code and detaching first; the trace is cut (a third Ctrl-C leaves the process as it is)\n", s.c.Pid)
			select {
			case <-done:
			case <-s.aborted3:
				stopSignals()
				return 128 + int(unix.SIGINT), fmt.Errorf("%w (pid %d may be left stopped, rtrace's code in it)", ErrAborted, s.c.Pid)
			}
			stopSignals()
			return 128 + int(unix.SIGINT), fmt.Errorf("%w (pid %d detached, its code restored)", ErrAborted, s.c.Pid)
		}
		stopSignals()
		return 128 + int(unix.SIGINT), ErrAborted
	}
	stopFinishing := s.signalsWhileFinishing() // before stopSignals: a signal is never unanswered
	stopSignals()
	stopStatus()
	for _, f := range s.files {
		os.Remove(f)
	}
	code, err := s.finish(o.res, o.err)
	if sig := stopFinishing(); sig != 0 {
		what := "no trace kept (--nop)"
		switch {
		case s.c.send != nil && s.c.send.sent.Load():
			what = "the trace was sent"
		case s.c.send != nil:
			what = "the trace was not sent"
		}
		return 128 + int(sig), fmt.Errorf("%v while finishing: %s", sig, what)
	}
	return code, err
}

// signalsWhileFinishing catches the signals that come while the outputs
// are finished when they live in temporary places (--nop's directory, the
// trace --host sends), which run's caller removes: the first one stops
// sending (its writes fail at once; the end is still sent unless a
// message was cut), a second one removes them and exits at once. The
// function it returns stops catching, and says which signal came (0:
// none).
func (s *session) signalsWhileFinishing() (stop func() unix.Signal) {
	c := s.c
	if c.send == nil && c.nopDir == "" {
		return func() unix.Signal { return 0 }
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, endSignals...)
	var got atomic.Int32
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case sig := <-ch:
				s, _ := sig.(unix.Signal)
				if !got.CompareAndSwap(0, int32(s)) {
					c.close()
					fmt.Fprintf(c.Stderr, "rtrace: %v again while finishing: stopped, no trace kept\n", sig)
					os.Exit(128 + int(s))
				}
				if c.send != nil {
					c.send.abort()
				}
			case <-quit:
				return
			}
		}
	}()
	return func() unix.Signal {
		close(quit)
		<-done
		signal.Stop(ch)
		return unix.Signal(got.Load())
	}
}
