package trace

import "rtrace/internal/uftrace"

// The items of a function trace (a Header with Functions set): what the
// tracer (either engine) sees of process images, tasks and calls, in the
// form the uftrace.data writer takes. Their wire encoding is in
// docs/PROTOCOL.md; the text codec carries none but Task.

// Session is a process image: the target's start, or an exec.
type Session struct {
	Time uint64 // ns, CLOCK_MONOTONIC
	Pid  int
	SID  string // 16 characters, unique per image
	Exe  string // absolute path
	Maps []byte // /proc/<pid>/maps at the time
}

// Maps replaces the maps of session SID: the loader has mapped the
// libraries (the program's entry point), or dlopen/dlclose changed them.
type Maps struct {
	SID  string
	Maps []byte
}

// Dlopen: a library mapped at load bias Base after the entry point.
type Dlopen struct {
	Time uint64
	Tid  int
	SID  string
	Base uint64
	Path string
}

// Func is a traced function: its runtime address and its symbol.
type Func struct {
	Addr uint64
	Name string
}

// Symbols names functions of session SID that records may carry: what the
// function filters match (uftrace's -F/-N work on names).
type Symbols struct {
	SID   string
	Funcs []Func
}

// EventName names a user event id (a USDT probe's provider:name).
type EventName struct {
	ID   uint64
	Name string
}

// Rec is one uftrace record with its payload: the arguments of an ENTRY
// or the return value of an EXIT (More set), else nil.
type Rec = uftrace.Rec

// Records is a batch of one thread's records, in time order. A stage may
// keep neither the batch nor its payloads past Write: the producer reuses
// them.
type Records struct {
	Tid  int
	Recs []Rec
}

// Info is what the recorder knows for the uftrace.data info file: the
// program, its command line, argument specs (at the start) and its exit
// status, resource usage and times (at the end). The writer adds the
// machine's facts, the tasks and the features it writes.
type Info struct{ uftrace.Info }

func (*Session) item()   {}
func (*Maps) item()      {}
func (*Dlopen) item()    {}
func (*Symbols) item()   {}
func (*EventName) item() {}
func (*Records) item()   {}
func (*Info) item()      {}
