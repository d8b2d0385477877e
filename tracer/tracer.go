package tracer

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"rtrace/internal/elfx"
	"rtrace/internal/timeline"
	"rtrace/internal/trace"
	"rtrace/internal/uftrace"
	"rtrace/tracer/fast"
	"rtrace/tracer/fast/drain"
	"rtrace/tracer/ptrace"
)

// Config says what to run and what to trace.
type Config struct {
	Path string   // program to run (looked up in PATH)
	Args []string // argv, Args[0] included
	Env  []string // nil: the caller's environment
	Pin  bool     // run the tracer thread and the target on one CPU
	// Libcalls: record the executable's calls into shared libraries, as
	// uftrace's PLT hooks do (off with --no-libcall).
	Libcalls bool
	// CloseAtEnd: the frames a thread has open when it ends get EXIT
	// records at its end (uftrace record -e); without it they stay open.
	CloseAtEnd bool
	// NestLibcall: record the calls libraries make through their own PLT
	// too (but not those of the C runtime's libraries).
	NestLibcall bool
	// Select chooses the functions traced (-P, -U, -Z): the executable's,
	// and those inside shared libraries (-P FUNC@LIB).
	Select Selection
	// NoRandomize runs the program without address space randomization
	// (personality(2), ADDR_NO_RANDOMIZE).
	NoRandomize bool
	// Events select USDT probes by provider:name globs (-E).
	Events []string
	// Warn receives rtrace's warnings while tracing (nil: os.Stderr).
	Warn io.Writer
	// Specs returns the argument and return-value specs of the function
	// whose symbol is name, at link-time address value (0 for a library
	// call), in the module exe, in payload order (nil: none).
	Specs func(exe *elfx.File, name string, value uint64) (args, rets []uftrace.ArgSpec)
	// Reads says what uftrace's read= trigger reads at each call of the
	// function name, and again at its return (nil: nothing).
	Reads func(name string) uftrace.ReadKind
	// WatchCPU (-W cpu): record the CPU a thread runs on when it is not
	// the one of its last call or return, as uftrace's watch point.
	WatchCPU bool
	// WithSyms: a module's functions are read from the .sym file this
	// directory holds for it, when it does (uftrace's --with-syms;
	// withsyms.Apply), not from its ELF symbol table.
	WithSyms string
	// Started is called with the target's pid once it runs.
	Started func(pid int)
	// Ready is called once the first image is set up: the executable and
	// the libraries the loader mapped are planted (at the program's entry
	// point, or at once when attaching). nil: not called.
	Ready func()
	// Modules are the resource modules whose calls are reported (-e).
	Modules []*ResModule
	// Start: trace from the start; otherwise only once toggled on.
	Start bool
	// Toggle: the toggle signal turns tracing on and off; rtrace
	// intercepts it (the program never sees it). Without, the signal is
	// the program's.
	Toggle bool
	// ToggleSignal is the toggle signal (0: SIGUSR1).
	ToggleSignal unix.Signal
	// Backtrace is the number of frames per backtrace (0: none);
	// BacktraceAll gives releases backtraces too; Monitor limits
	// backtraces to allocations of these sizes.
	Backtrace    int
	BacktraceAll bool
	Monitor      []uint64
	// Fast: the fast engine (docs/FAST-PATH.md), not a ptrace stop per
	// event. Function tracing only (no -e).
	Fast bool
	// Untraced are executables whose functions and library calls are not
	// traced, though the programs they run are: a script's interpreter.
	Untraced []string
	// Signals are uftrace's --signal triggers: at one of these signals,
	// tracing turns on, off, or off for good. The program does not get the
	// signal. One taken from the toggle signal is the trigger's.
	Signals map[unix.Signal]SignalAction
}

// SignalAction is what a --signal trigger does. The order of the values is
// the order uftrace applies them in: of a trigger's actions, the larger
// wins.
type SignalAction int

const (
	// TraceOn turns tracing on, in the same trace (a gap in it), or in a
	// new window when none is open (started with --disable).
	TraceOn SignalAction = iota + 1
	// TraceOff turns tracing off; the window stays open.
	TraceOff
	// Finish closes the window, the trace done, and nothing turns tracing
	// on again; the program goes on.
	Finish
)

// Result is how a trace ended.
type Result struct {
	Status unix.WaitStatus // of the launched process
	Rusage unix.Rusage
	Events uint64
	Lost   uint64 // records a full ring had no room for (the fast engine)
	// Walks counts the resource calls whose backtrace the fast engine
	// found in the process; WalkStops those of them rtrace finished.
	Walks, WalkStops uint64
	// ValueStops counts the fast engine's stops at an entry or a return to
	// record what a stub does not (strings, floats, resource calls...).
	ValueStops uint64
	Skipped    []Skip
	// Int3Entries are functions instrumented with an int3 at the entry
	// instead of a detour jump (3 system calls more per call), with why.
	Int3Entries []Skip
	// Functions is the number of functions instrumented; Fast says the
	// fast engine recorded them (those not in Int3Entries without a stop).
	Functions int
	Fast      bool
	// Unwound lists the stripped executables whose functions came from
	// their unwind tables (FDEs), one per exec.
	Unwound []Unwound
}

// Unwound counts the functions a stripped executable's FDEs bound: those
// instrumented (named func_<address>, or by .dynsym), the parts split off a
// function (foo.cold) and others left out (the entry point, -P).
type Unwound struct {
	Exe                  string
	Traced, Parts, Other int
}

// ExitCode is the shell-style exit code of the traced program: its status,
// or 128+N when a signal N killed it.
func (r *Result) ExitCode() int {
	if r.Status.Signaled() {
		return 128 + int(r.Status.Signal())
	}
	return r.Status.ExitStatus()
}

// Tracer runs one traced program. Create it with New; every method runs on
// its ptrace thread.
type Tracer struct {
	cfg     Config
	funcs   FuncSink // nil: no function trace (resource tracing alone)
	res     ResSink  // nil: no resource trace
	th      *ptrace.Thread
	procs   map[int]*process      // by pid (tgid)
	threads map[int]*thread       // by tid
	libs    map[string]*elfx.File // parsed libraries by path; nil: not ELF
	root    int                   // pid of the launched process
	skipped []Skip
	int3s   []Skip
	events  atomic.Uint64
	// eventHit: the -E patterns that selected a probe.
	eventHit map[string]bool
	// eventIDs are the user event ids given to probe names.
	eventIDs map[string]uint64
	result   Result
	err      error // first sink error: the trace goes on without recording
	// on: tracing is on (records and resource calls are reported);
	// resIDs number the resource types.
	on bool
	// window: the sinks have a window open (they were told tracing is on
	// and not told since that it is off); finished: a Finish signal came.
	window, finished bool
	resIDs           map[*ResType]int
	attachState
	// closeReq: CloseWindow asked for the window to close.
	closeReq atomic.Bool
	// drain moves the fast engine's records to the sink (nil: int3 engine).
	drain       *drain.Drainer
	warnedState bool
	planted     int // functions instrumented
	// tables are the unwind tables compiled for the in-process walker;
	// walkStops counts the walks rtrace finished (fastWalkStop).
	tables    tableCache
	walkStops int
	// valueStops counts the fast engine's stops at a function's entry or
	// return for what a stub does not record (fastValues, fastExitValue).
	valueStops  uint64
	warnedArena bool
	warnedLife  bool    // said once: a process without a lifeline (fast_lifeline.go)
	keeper      *keeper // the tracer thread's robust list of lifeline words
	keeperErr   error
}

// Events returns how many records the tracer produced so far (safe from any goroutine).
func (t *Tracer) Events() uint64 { return t.events.Load() }

// New prepares a tracer of a function trace into funcs and a resource
// trace into res (either may be nil); Run starts the program.
func New(cfg Config, funcs FuncSink, res ResSink) *Tracer {
	if cfg.Warn == nil {
		cfg.Warn = os.Stderr
	}
	if cfg.ToggleSignal == 0 {
		cfg.ToggleSignal = unix.SIGUSR1
	}
	t := &Tracer{cfg: cfg, funcs: funcs, res: res, procs: map[int]*process{}, threads: map[int]*thread{}, libs: map[string]*elfx.File{}, eventIDs: map[string]uint64{},
		on: cfg.Start, window: cfg.Start, resIDs: resIDs(cfg.Modules)}
	return t
}

// startFast sets up the fast engine's drainer. Without a function trace
// (resource tracing alone) the records of its rings go nowhere.
func (t *Tracer) startFast() error {
	clock, err := fast.NewClock()
	if err != nil {
		return fmt.Errorf("the fast engine: %w: use --engine=int3", err)
	}
	if t.funcs == nil {
		t.drain = drain.New(discardSink{}, clock, func(uint64) {})
	} else {
		t.drain = drain.New(t.funcs, clock, func(n uint64) { t.events.Add(n) })
		t.funcs = &lockedSink{t.drain, t.funcs}
	}
	if t.res != nil {
		t.drain.SetRes(t.res, t.cfg.BacktraceAll, t.cfg.Monitor)
		t.res = &lockedResSink{t.drain, t.res}
	}
	return nil
}

// ptraceOptions are the options of every tracee: the fast engine also
// stops threads at their exit, before their TLS can be reused, and a vfork
// parent when its child has left its memory; a resource trace stops them
// at their exit for the process's peak RSS (usage.go).
func (t *Tracer) ptraceOptions() int {
	if t.drain != nil {
		return ptrace.Options | unix.PTRACE_O_TRACEEXIT | unix.PTRACE_O_TRACEVFORKDONE
	}
	if t.res != nil {
		return ptrace.Options | unix.PTRACE_O_TRACEEXIT
	}
	return ptrace.Options
}

// Run launches the program and traces it until every traced process has
// exited. It returns the launched process's status.
func (t *Tracer) Run() (*Result, error) {
	path, err := exec.LookPath(t.cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("program %s: %w", t.cfg.Path, err)
	}
	if t.cfg.Fast {
		if err := t.startFast(); err != nil {
			return nil, err
		}
	}
	return t.onThread(func() error { return t.run(path) })
}

// onThread runs trace on a new ptrace thread and returns the result.
func (t *Tracer) onThread(trace func() error) (*Result, error) {
	t.th = ptrace.NewThread()
	defer t.th.Close()
	var runErr error
	forgetReaped() // an earlier session's
	t.th.Do(func() { runErr = trace() })
	for _, pat := range t.cfg.Events {
		if ok, _ := path.Match(pat, "linux:task-name"); !ok && !t.eventHit[pat] {
			fmt.Fprintf(t.cfg.Warn, "rtrace: warning: -E %q matches no USDT probe of the program or its libraries (rtrace record --list-event PROG lists them)\n", pat)
		}
	}
	t.result.Events = t.events.Load()
	t.result.Skipped = t.skipped
	t.result.Int3Entries = t.int3s
	t.result.Functions = t.planted
	t.result.Fast = t.drain != nil
	if runErr == nil {
		runErr = t.err
	}
	return &t.result, runErr
}

// run is the whole trace, on the tracer thread.
func (t *Tracer) run(path string) error {
	timeline.Mark("tracer run")
	// Pinned where the target stops often: every call with the int3
	// engine, and every resource call with the fast one when those stop
	// (a function trace beside them, RTRACE_RES_UNWIND=remote). A
	// cross-CPU wake-up costs about 4x a same-CPU stop
	// (docs/ptrace-costs.md); without stops the drain wants the other CPU.
	if t.cfg.Pin && (t.drain == nil || len(t.cfg.Modules) > 0 && (t.funcs != nil || resUnwindRemote)) {
		ptrace.PinToCurrentCPU()
	}
	env := t.cfg.Env
	if env == nil {
		env = os.Environ()
	}
	args := t.cfg.Args
	if len(args) == 0 {
		args = []string{t.cfg.Path}
	}
	if t.cfg.NoRandomize {
		restore, err := NoRandomize()
		if err != nil {
			return err
		}
		defer restore()
	}
	pid, err := syscall.ForkExec(path, args, &syscall.ProcAttr{
		Env:   env,
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Ptrace: true},
	})
	if err != nil {
		return fmt.Errorf("starting %s: %w", path, err)
	}
	t.root = pid
	if err := t.start(pid); err != nil {
		unix.Kill(pid, unix.SIGKILL)
		t.reap(pid)
		return err
	}
	return t.traceRoot(pid)
}

// Adopt traces pid, a process of its own about to exec the program (rtrace
// record --keep-pid: the program keeps the pid the command had). It seizes
// pid, calls seized, passes pid's signals on until it execs, then traces
// the program as Run does the one it launches; pid is killed if rtrace
// dies (PTRACE_O_EXITKILL). It returns the program's status.
func (t *Tracer) Adopt(pid int, seized func()) (*Result, error) {
	if t.cfg.Fast {
		if err := t.startFast(); err != nil {
			return nil, err
		}
	}
	return t.onThread(func() error { return t.adopt(pid, seized) })
}

// errNoExec: the adopted process ended before its exec.
var errNoExec = errors.New("--keep-pid: the command ended before it exec'd the program")

// adopt is Adopt on the tracer thread. Until the exec, only the thread
// that will exec is traced (without PTRACE_O_TRACECLONE: the threads of
// rtrace's runtime stay untraced) and only for its exec event.
func (t *Tracer) adopt(pid int, seized func()) error {
	if err := ptrace.Seize(pid, unix.PTRACE_O_EXITKILL|unix.PTRACE_O_TRACEEXEC); err != nil {
		return fmt.Errorf("seizing pid %d: %w", pid, err)
	}
	seized()
	for {
		var ws unix.WaitStatus
		if _, err := unix.Wait4(pid, &ws, unix.WALL, nil); err != nil {
			return fmt.Errorf("waiting for pid %d to exec: %w", pid, err)
		}
		switch {
		case ws.Exited() || ws.Signaled():
			return errNoExec
		case !ws.Stopped():
			continue
		case ptraceEvent(ws) == unix.PTRACE_EVENT_EXEC:
		case ptraceEvent(ws) == 0:
			ptrace.Cont(pid, int(ws.StopSignal())) // a signal for rtrace's runtime
			continue
		case ptraceEvent(ws) == unix.PTRACE_EVENT_STOP:
			ptrace.Listen(pid) // a group-stop (Ctrl-Z): stopped until SIGCONT
			continue
		default:
			ptrace.Cont(pid, 0)
			continue
		}
		break
	}
	timeline.Mark("exec stop")
	t.root = pid
	if err := ptrace.SetOptions(pid, t.ptraceOptions()); err != nil {
		unix.Kill(pid, unix.SIGKILL)
		return fmt.Errorf("tracing pid %d: %w", pid, err)
	}
	if err := leaveExec(pid); err != nil { // as execed: out of execve's return path
		unix.Kill(pid, unix.SIGKILL)
		return err
	}
	ts := now()
	p, maps, err := t.setupProcess(pid)
	if err != nil {
		unix.Kill(pid, unix.SIGKILL)
		return err
	}
	if err := ptrace.Cont(pid, 0); err != nil {
		return err
	}
	t.startSession(p, ts, maps)
	return t.traceRoot(pid)
}

// traceRoot traces the program started as pid until every traced process
// has exited.
func (t *Tracer) traceRoot(pid int) error {
	if t.cfg.Started != nil {
		t.cfg.Started(pid)
	}
	defer t.flushAll()
	if t.drain != nil {
		go t.drain.Run()
		defer func() {
			timeline.Mark("loop done")
			t.emit(t.drain.Close())
			timeline.Mark("drain closed")
			st := t.drain.Stats()
			t.result.Lost = st.Lost + st.ResLost
			t.result.Walks, t.result.WalkStops = st.Walks, uint64(t.walkStops)
			t.result.ValueStops = t.valueStops
		}()
	}
	return t.loop()
}

// reap waits for a killed child so it leaves no zombie.
func (t *Tracer) reap(pid int) {
	var ws unix.WaitStatus
	for {
		if _, err := unix.Wait4(pid, &ws, unix.WALL, nil); err != nil || ws.Exited() || ws.Signaled() {
			return
		}
	}
}

// start sets up the freshly exec'd child (stopped by PTRACE_TRACEME at its
// exec) and hands it over to PTRACE_SEIZE: only seized tracees report
// group-stops in a way that keeps SIGSTOP/SIGCONT working as without a
// tracer (ptrace(2), "Group-stop" and PTRACE_LISTEN). Go's ForkExec can only
// TRACEME, so rtrace detaches with SIGSTOP, seizes the stopped child and
// wakes it with a SIGCONT it then swallows.
func (t *Tracer) start(pid int) error {
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, unix.WALL, nil); err != nil {
		return fmt.Errorf("waiting for pid %d to exec: %w", pid, err)
	}
	if !ws.Stopped() || ws.StopSignal() != unix.SIGTRAP || ptraceEvent(ws) != 0 {
		return fmt.Errorf("pid %d did not stop at exec (%v)", pid, ws)
	}
	timeline.Mark("exec stop")
	ts := now()
	p, maps, err := t.setupProcess(pid)
	if err != nil {
		return err
	}
	if err := ptrace.Detach(pid, int(unix.SIGSTOP)); err != nil {
		return fmt.Errorf("handing pid %d over to PTRACE_SEIZE: %w", pid, err)
	}
	if _, err := unix.Wait4(pid, &ws, unix.WUNTRACED, nil); err != nil || !ws.Stopped() {
		return fmt.Errorf("waiting for pid %d to stop (%v): %v", pid, ws, err)
	}
	if err := ptrace.Seize(pid, t.ptraceOptions()); err != nil {
		return fmt.Errorf("seizing pid %d: %w", pid, err)
	}
	p.swallowCont = true
	timeline.Mark("seized")
	if err := unix.Kill(pid, unix.SIGCONT); err != nil {
		return err
	}
	// The program's loader runs meanwhile: making the trace directory and
	// its first files took 1 ms. Nothing of the program reaches the sinks
	// before the tracer handles its next stop.
	t.startSession(p, ts, maps)
	return nil
}

// newImage records a new session for pid, stopped right after an exec, and
// plants its breakpoints.
func (t *Tracer) newImage(pid int, ts uint64) (*process, error) {
	p, maps, err := t.setupProcess(pid)
	if err != nil {
		return nil, err
	}
	t.startSession(p, ts, maps)
	return p, nil
}

// setupProcess sets up the image of pid, stopped after an exec, and
// records the process; maps is its /proc/PID/maps.
func (t *Tracer) setupProcess(pid int) (p *process, maps []byte, err error) {
	im, maps, err := t.setupImage(pid)
	if err != nil {
		return nil, nil, err
	}
	p = &process{pid: pid, sid: newSID(), image: im}
	t.procs[pid] = p
	th := t.threads[pid]
	if th == nil {
		th = &thread{tid: pid}
		t.threads[pid] = th
	}
	th.proc = p
	return p, maps, nil
}

// startSession hands the sinks p's new session, at ts, and its first task.
func (t *Tracer) startSession(p *process, ts uint64, maps []byte) {
	im, pid := p.image, p.pid
	t.sinks(func(s Sink) error {
		return s.Session(Session{Time: ts, Pid: pid, SID: p.sid, Exe: im.exe, Maps: maps, ELF: im.elf, Bias: im.bias})
	})
	t.sinks(func(s Sink) error { return s.Task(ts+1, pid, pid) })
	t.announce(p)
}

// sinks hands an event of the traced processes to every sink.
func (t *Tracer) sinks(ev func(Sink) error) {
	if t.funcs != nil {
		t.emit(ev(t.funcs))
	}
	if t.res != nil {
		t.emit(ev(t.res))
	}
}

// announce names to the function sink the functions of p's image
// instrumented since the last call.
func (t *Tracer) announce(p *process) {
	im := p.image
	if t.funcs == nil || im.named == len(im.funcs) {
		return
	}
	funcs := make([]trace.Func, 0, len(im.funcs)-im.named)
	for _, f := range im.funcs[im.named:] {
		funcs = append(funcs, trace.Func{Addr: f.addr, Name: f.name})
	}
	im.named = len(im.funcs)
	t.emit(t.funcs.Symbols(p.sid, funcs))
}

// streamClosed turns tracing off when a sink closed its window
// (ErrStreamClosed: its listener is gone, or a write failed): the sink
// says why, or reports it at the end.
func (t *Tracer) streamClosed() {
	t.window = false
	if t.drain != nil {
		// The fast engine rewrites entries only with every thread
		// parked (toggle): its records are dropped until a toggle.
		t.on = false
	} else {
		t.setOn(false)
	}
}

// emit keeps the first sink error; tracing goes on so the target is not
// disturbed, and Run reports the error at the end.
func (t *Tracer) emit(err error) {
	if errors.Is(err, ErrStreamClosed) {
		t.streamClosed() // the sink closed its window and says why
		return
	}
	if err != nil && t.err == nil {
		t.err = fmt.Errorf("writing the trace: %w", err)
	}
}

// batchLen is how many records a thread collects before handing them to
// the sink in one call.
const batchLen = 256

func (t *Tracer) record(th *thread, r uftrace.Record, payload []byte) {
	t.events.Add(1)
	r.More = payload != nil // values of no bytes (an empty struct returned) still set More
	th.batch = append(th.batch, Rec{Record: r, Payload: payload})
	if len(th.batch) >= batchLen {
		t.flush(th)
	}
}

// flush hands th's pending records to the sink.
func (t *Tracer) flush(th *thread) {
	if len(th.batch) > 0 && t.funcs != nil {
		t.emit(t.funcs.Records(th.tid, th.batch))
		th.batch = th.batch[:0]
	}
}

// flushAll hands every thread's pending records to the sink: at the end of
// the trace, however it ends.
func (t *Tracer) flushAll() {
	for _, th := range t.threads {
		t.flush(th)
	}
}

// addrNoRandomize is personality(2)'s ADDR_NO_RANDOMIZE
// (include/uapi/linux/personality.h).
const addrNoRandomize = 0x0040000

// NoRandomize turns address space randomization off for the children the
// calling thread forks, and for the program it execs (a thread's
// personality is its own, and a child inherits it across fork and exec:
// personality(2), ADDR_NO_RANDOMIZE), and returns what turns it back.
func NoRandomize() (restore func(), err error) {
	old, _, errno := unix.RawSyscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0)
	if errno != 0 {
		return nil, fmt.Errorf("personality: %w", errno)
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_PERSONALITY, old|addrNoRandomize, 0, 0); errno != 0 {
		return nil, fmt.Errorf("personality: %w", errno)
	}
	return func() { unix.RawSyscall(unix.SYS_PERSONALITY, old, 0, 0) }, nil
}
