package tracer

import (
	"rtrace/internal/elfx"
	"rtrace/internal/trace"
	"rtrace/internal/wire"
	"rtrace/tracer/fast/drain"
)

// Session describes a process image: the start of the target or an exec.
type Session struct {
	Time uint64
	Pid  int
	SID  string
	Exe  string // absolute path
	Maps []byte // /proc/<pid>/maps at the time
	ELF  *elfx.File
	Bias uint64
}

// Sink receives what every trace needs to know of the traced processes:
// their images and tasks, and the toggle. Calls come from the tracer
// thread, in time order per task.
type Sink interface {
	Session(s Session) error
	// Maps replaces the maps of a session once the loader has mapped the
	// libraries (the program's entry point is reached), and after each
	// dlopen or dlclose that changed them.
	Maps(sid string, maps []byte) error
	// Dlopen: a library mapped after the entry point, at load bias base.
	Dlopen(time uint64, tid int, sid string, base uint64, path string) error
	Task(time uint64, tid, pid int) error
	Fork(time uint64, pid, ppid int) error
	// Exit: the task ended (the process too when tid is its pid).
	Exit(time uint64, tid int) error
	// Toggle: tracing was turned on or off by the toggle signal, sent to
	// process pid. An error turning it on leaves tracing off.
	Toggle(on bool, pid int) error
}

// FuncSink receives a function trace.
type FuncSink interface {
	Sink
	// Symbols names the functions of session sid that were instrumented:
	// what the records' addresses mean to the function filters.
	Symbols(sid string, funcs []trace.Func) error
	// Event names a user event id (a USDT probe's provider:name), once.
	Event(id uint64, name string) error
	// Probe: a USDT probe hit, with its arguments decoded as text ("?"
	// for one that could not be read).
	Probe(time uint64, tid int, name string, args []string) error
	// Records takes a batch of one thread's records, in time order. The
	// tracer reuses recs and their payloads after the call returns.
	Records(tid int, recs []Rec) error
}

// ResSink receives a resource trace (-e).
type ResSink interface {
	Sink
	// Call reports a resource call, at its return. c is the caller's
	// after the call returns (the fast engine reuses it): Call keeps
	// nothing of it but its frames, which nothing changes.
	Call(c *trace.Call) error
	// Lost reports n resource calls of thread tid dropped on a full ring.
	Lost(tid int, n uint64) error
}

// ResBatchSink is a ResSink that also takes a thread's calls a batch at a
// time: the fast engine's drain hands it the calls of one ring read in one
// call, through the sink's layers once for them all.
type ResBatchSink interface {
	ResSink
	// Calls reports calls of one thread, in order, as Call reports each;
	// the drain reuses cs after it returns.
	Calls(cs []trace.Call) error
}

// ResLaneSink is a ResBatchSink that lends the drain the wire writer a
// thread's calls go to: the drain writes the calls it can (no arguments)
// into it itself, with the function and backtrace numbers it keeps
// (docs/FAST-PATH.md, "The drain's lane"), and hands the others to Calls.
type ResLaneSink interface {
	ResBatchSink
	// Lane is the writer of tid's calls now; nil: none (Calls then).
	// Valid until the drain's next call of the sink's methods.
	Lane(tid int) *wire.Writer
	// Laned reports n calls written to a lane, and the error that ended
	// its use, if any (the sink handles it as Calls would, and returns
	// what Calls would have).
	Laned(n int, err error) error
}

// The drain (package drain) asks its sinks for these methods by its own
// interfaces: a change of one signature here must not turn its batches or
// its lane off silently.
var (
	_ drain.Sink      = FuncSink(nil)
	_ drain.ResSink   = ResSink(nil)
	_ drain.BatchSink = ResBatchSink(nil)
	_ drain.LaneSink  = ResLaneSink(nil)
)

// Rec is one record with its payload: the arguments of an ENTRY or the
// return value of an EXIT (More set), or nil.
type Rec = trace.Rec
