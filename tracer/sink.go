package tracer

import (
	"rtrace/internal/elfx"
	"rtrace/internal/trace"
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

// ResSink receives a resource trace (-e): the process events, and the
// calls and losses the drain's ResSink names (the int3 engine's come
// from stops, the fast engine's from the drain).
type ResSink interface {
	Sink
	drain.ResSink
}

// UsageSink is a ResSink that also takes a process's peak resident set
// size, in bytes (VmHWM at its threads' exit events, usage.go), before
// its Exit. The resource reports' summary shows it.
type UsageSink interface {
	Usage(pid int, peakRSS uint64) error
}

// ScanSink is a ResSink that also takes a process's memory scan at its
// end (heapscan.go): a HeapRegions item, then HeapWords items, before its
// Usage and Exit. The leak report's kinds come from it.
type ScanSink interface {
	HeapScan(items []trace.Item) error
}

// ResBatchSink is a ResSink that also takes a thread's calls a batch at a
// time (drain.BatchSink).
type ResBatchSink interface {
	Sink
	drain.BatchSink
}

// ResLaneSink is a ResBatchSink that lends the drain the wire writer a
// thread's calls go to (drain.LaneSink; docs/FAST-PATH.md, "The drain's
// lane").
type ResLaneSink interface {
	Sink
	drain.LaneSink
}

// FuncSink's Records and Exit are what the drain hands the function
// trace: a change of one signature must not go unnoticed.
var _ drain.Sink = FuncSink(nil)

// Rec is one record with its payload: the arguments of an ENTRY or the
// return value of an EXIT (More set), or nil.
type Rec = trace.Rec

// The tracer's sinks that wrap a resource sink pass its usage on.
var _ UsageSink = (*lockedResSink)(nil)
var _ ScanSink = (*lockedResSink)(nil)
