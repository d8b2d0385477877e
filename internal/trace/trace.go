// Package trace is the event model of resource traces: what the wire stream
// (internal/wire) and the sp-rtrace text (internal/rtext) both encode, and
// what the pre-processor, post-processor and resolver pass along.
package trace

import "time"

// Item is one element of a trace, in stream order: *Header first, then any
// of *Module, *Resource, *Context, *Mapping, *Call, *Comment, *Task,
// *Probe, *Lost, *File, *Library, and the function-trace items of
// functions.go (*Session, *Maps, *Dlopen, *Symbols, *EventName, *Records,
// *Info).
type Item interface{ item() }

// Header is the start of a trace (the handshake and PINF, or the text's
// first line).
type Header struct {
	Version string    // protocol version: "2.0" for sp-rtrace, "3.x" for rtrace
	Arch    string    // "x86_64"
	Time    time.Time // when tracing started (local time)
	Process string    // the process name or path
	Pid     int
	Filter  []string // post-processing done: "leaks", "compress", "resolve"
	Depth   int      // backtrace depth
	Origin  string   // who wrote it ("rtrace dev", "sp-rtrace 1.6")
	// OutDir and PostOpts are the output directory and post-processor
	// options the tracer was given (OCFG), when any. In a function trace
	// they are the uftrace.data directory to write and the uftrace filters
	// to apply ("-F main -D 3", postproc's option syntax).
	OutDir, PostOpts string
	// Functions: the stream is a function trace (sessions, tasks, batches
	// of uftrace records), not a resource trace.
	Functions bool
	// Binary: read from a binary stream (a raw trace, as the tracer wrote
	// it), not from text (which may be a report already).
	Binary bool
}

// Module is a tracing module (MINF): main = 0, others 1, 2, 4, ...
type Module struct {
	ID           uint32
	Name         string
	Major, Minor uint16
}

// Resource is a resource type (RESR). ID is 1-based; its mask is 1<<(ID-1).
type Resource struct {
	ID       int
	Name     string
	Desc     string
	Refcount bool
}

// Context is a named call context (CTXR); ID is a bit mask.
type Context struct {
	ID   uint32
	Name string
}

// Mapping is an executable mapping of the process (MMAP).
type Mapping struct {
	From, To uint64
	Path     string
}

// Call is one resource allocation or release (CALL, ARGS, BTRC).
type Call struct {
	Index   int           // 1-based, in call order
	Context uint32        // context mask, 0 for none
	Time    time.Duration // time of day (since local midnight); -1: none
	Tid     int           // thread, 0 when unknown (sp-rtrace streams)
	Res     int           // resource type ID
	Alloc   bool          // an allocation, else a release
	Name    string        // function name ("malloc", "operator new[]")
	Size    uint64        // allocations only
	ID      uint64        // the resource: a pointer, fd, ...
	Args    []Arg
	Frames  []Frame
}

// Arg is one argument record: "$name = value".
type Arg struct{ Name, Value string }

// Frame is a backtrace frame; Text is what the resolver found ("" when
// unresolved): "main() at leaky.c:12".
type Frame struct {
	Addr uint64
	Text string
}

// Comment is a text line that is no known form, kept as is (without its
// newline).
type Comment struct{ Text string }

// Task: a thread started (Pid its process) or, with Exit, ended; with
// PPid, the process Pid (Tid == Pid) was forked by process PPid.
type Task struct {
	Time     uint64 // ns, CLOCK_MONOTONIC
	Tid, Pid int
	Exit     bool
	PPid     int
}

// Probe is a USDT probe hit with its arguments as text.
type Probe struct {
	Time uint64 // ns, CLOCK_MONOTONIC
	Tid  int
	Name string // provider:name
	Args []string
}

// Lost counts events the tracer dropped (tracing off, buffer full).
type Lost struct{ Count uint64 }

// Usage is a process's peak resident set size at its end, in bytes
// (proc(5)'s VmHWM, read at its threads' exit events).
type Usage struct {
	Pid     int
	PeakRSS uint64
}

// HeapRegions opens the memory scan of a process at its end (HSCR), read
// for the leak kinds (docs/REPORTS.md, "Leak kinds"): the writable
// mappings rtrace read, each scanned from Start to End. HeapWords items
// follow with the words found there that may point at a heap block.
type HeapRegions struct {
	Pid     int
	Regions []HeapRegion
}

// HeapRegion is one mapping of a memory scan.
type HeapRegion struct {
	Start, End uint64
	Kind       RegionKind
}

// RegionKind says what a scanned mapping holds.
type RegionKind uint8

const (
	// RegionRoot: data, bss and other mappings no block is in; their
	// words are roots.
	RegionRoot RegionKind = iota
	// RegionStack: a thread's stack, from its stack pointer up; roots.
	RegionStack
	// RegionHeap: the brk heap; only its blocks' words count.
	RegionHeap
	// RegionAnon: an anonymous mapping: a heap's (an arena, a block
	// of its own) when a block of the trace is in it, else roots.
	RegionAnon
)

// HeapWords are words of a process's memory scan (HSCW): the value Val
// read at address At (0: a register of one of its threads), where Val
// lies in a heap or anonymous region. In address order across the items
// of one scan.
type HeapWords struct {
	Pid   int
	Words []HeapWord
}

// HeapWord is one word of a scan.
type HeapWord struct{ At, Val uint64 }

// PageMap opens the page map of a process (PMAP), taken when it ended
// by the pagemap module (docs/REPORTS.md, "Page maps"), as sp-rtrace's
// pagemap module took it: its /proc/PID/maps as read then. PageFlags
// items follow with the pages of its writable mappings.
type PageMap struct {
	Pid  int
	Maps string
}

// PageFlags are pages of a writable mapping of a PageMap (PMPG), from
// the address At on, a page each, in address order.
type PageFlags struct {
	Pid   int
	At    uint64
	Pages []Page
}

// Page is what sp-rtrace's pagemap module recorded of a page: Info's
// bits PageSwap, PageMemory, PageZero; the kernel's flags and mapping
// count (/proc/kpageflags, /proc/kpagecount) when Kernel.
type Page struct {
	Info   uint8
	Kernel bool
	KFlags uint64
	KCount uint32
}

// Page.Info bits: sp-rtrace's (src/rtrace-pagemap/sp_rtrace_pagemap.h),
// then rtrace's from /proc/PID/pagemap (proc(5)), which need no
// privilege: whether the page is the page cache's (or shared
// anonymous), and whether this process alone maps it.
const (
	PageSwap      = 1  // swapped out
	PageMemory    = 2  // present in RAM
	PageZero      = 4  // every byte 0
	PageFile      = 8  // pagemap bit 61: a file page or shared anonymous
	PageExclusive = 16 // pagemap bit 56: mapped by this process only
)

// File names an extra file a module wrote (FILE).
type File struct{ Name, Path string }

// Library says the target mapped a library (NLIB; "*" = rescan all): the
// pre-processor answers it with Mapping items from /proc/<pid>/maps.
type Library struct{ Name string }

func (*Header) item()      {}
func (*Module) item()      {}
func (*Resource) item()    {}
func (*Context) item()     {}
func (*Mapping) item()     {}
func (*Call) item()        {}
func (*Comment) item()     {}
func (*Task) item()        {}
func (*Probe) item()       {}
func (*Lost) item()        {}
func (*Usage) item()       {}
func (*File) item()        {}
func (*HeapRegions) item() {}
func (*HeapWords) item()   {}
func (*PageMap) item()     {}
func (*PageFlags) item()   {}
func (*Library) item()     {}

// Reader yields the items of a trace in order; io.EOF ends it.
type Reader interface {
	Next() (Item, error)
}

// Writer encodes items.
type Writer interface {
	Write(it Item) error
	Close() error // flush; does not close the underlying writer
}
