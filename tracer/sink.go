package tracer

import (
	"rtrace/internal/elfx"
	"rtrace/internal/trace"
	"rtrace/internal/uftrace"
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

// Sink receives what the tracer sees. Calls come from the tracer thread, in
// time order per task.
type Sink interface {
	Session(s Session) error
	// Maps replaces the maps of a session once the loader has mapped the
	// libraries (the program's entry point is reached).
	Maps(sid string, maps []byte) error
	// Module describes a library mapped in a session, once per session and
	// path: at the entry point, or when dlopen maps it.
	Module(sid, path string, f *elfx.File) error
	// Dlopen: a library mapped after the entry point, at load bias base.
	Dlopen(time uint64, tid int, sid string, base uint64, path string) error
	// Event names a user event id (a USDT probe's provider:name), once.
	Event(id uint64, name string) error
	// Probe: a USDT probe hit, with its arguments decoded as text ("?"
	// for one that could not be read).
	Probe(time uint64, tid int, name string, args []string) error
	Task(time uint64, tid, pid int) error
	Fork(time uint64, pid, ppid int) error
	// Records takes a batch of one thread's records, in time order. The
	// tracer reuses recs after the call returns.
	Records(tid int, recs []Rec) error
	// Call reports a resource call (-e), at its return.
	Call(c *trace.Call) error
	// Toggle: resource reporting was turned on or off by the toggle
	// signal, sent to process pid. An error turning it on leaves it off.
	Toggle(on bool, pid int) error
}

// Rec is one record with its payload: the arguments of an ENTRY or the
// return value of an EXIT (More set), or nil.
type Rec struct {
	uftrace.Record
	Payload []byte
}
