package tracer

import (
	"os"

	"rtrace/internal/trace"
	"rtrace/tracer/fast"
	"rtrace/tracer/fast/drain"
)

// Resource calls recorded in the process (docs/FAST-PATH.md, "Resource
// calls in the process"): a resource function's stub records its call in
// the thread's ring (res.S), with its backtrace found by the in-process
// walker (walk.S, fast_walk.go); the drainer (package drain) decodes the
// records into the calls the resource sink gets, as resReport makes them
// at a stop: what a call did is this package's to say (resFn is the
// drain's Meaning).

// resUnwindRemote (RTRACE_RES_UNWIND=remote) keeps every resource
// function on stops, its backtrace walked by rtrace: the reference the
// in-process walker's backtraces equal, byte for byte (the e2e tests
// compare them).
var resUnwindRemote = os.Getenv("RTRACE_RES_UNWIND") == "remote"

// resDesc decides, for the planner, whether the resource function c at
// addr gets a stub that records its calls in the process, and returns its
// descriptor. Calls stop instead with a function trace (its records of
// the call go with the resource's), for string arguments (read at the
// entry, where rtrace can), and for backtraces deeper than the walker
// goes.
func (t *Tracer) resDesc(c cand, addr uint64) (fast.Desc, bool) {
	rf := c.res.rf
	if t.funcs != nil || t.res == nil || t.drain == nil || resUnwindRemote || t.cfg.Backtrace > fast.WalkMax {
		return fast.Desc{}, false
	}
	for _, a := range rf.Args {
		if a.Kind == 's' {
			return fast.Desc{}, false
		}
	}
	if rf.Len > 0 {
		return fast.Desc{}, false // a string's length: read at a stop
	}
	if c.res.shmRole != 0 {
		return fast.Desc{}, false // the kernel's state read at its entry: shmend.go
	}
	s := newStub(c.res)
	d := fast.Desc{Fn: addr, Args: uint8(s.Nargs)}
	if rf.Effect == allocOutPtr || rf.Effect == allocOutFds {
		s.Out = true
		d.Flags |= fast.DescOut
		d.Out = uint8(rf.Out)
	}
	if t.cfg.Backtrace > 0 && (rf.allocates() || t.cfg.BacktraceAll) {
		d.Flags |= fast.DescBacktrace
	}
	// A release is recorded before what it releases can be another
	// thread's, as the calls reach the sink in time order (resOrder):
	// free at its entry, its return left alone, unless a module whose
	// functions it calls is traced (its munmap would be reported as a call
	// of its own); a release that always releases (operator delete) at its
	// entry too, its frame kept for the calls nested in it; unless its
	// backtrace is wanted (the walk is at the return). Any other release,
	// recorded at its return, takes its entry's time, and holds the calls
	// other threads make meanwhile back until its record is written.
	switch {
	case rf.AtEntry && !t.cfg.BacktraceAll && !t.moduleSelected("mmap"):
		s.Release = true
		d.Flags |= fast.DescRelease
	case rf.Effect == freeArg && !t.cfg.BacktraceAll:
		s.Release = true
		d.Flags |= fast.DescReleaseFrame
	case !rf.allocates():
		d.Flags |= fast.DescEntryTime
	case rf.releases():
		s.Both = true
		d.Flags |= fast.DescBoth
	}
	d.ID = t.drain.AddStub(resStub(s, rf))
	return d, true
}

// moduleSelected reports whether -e names the module.
func (t *Tracer) moduleSelected(name string) bool {
	for _, m := range t.cfg.Modules {
		if m.Name == name {
			return true
		}
	}
	return false
}

// resArgs is how many arguments a call of rf needs for resEffects and its
// argument records.
func resArgs(rf *ResFunc) int {
	n := max(rf.Size, rf.SizeMul, rf.ID+1, rf.Out+1)
	for _, a := range rf.Args {
		n = max(n, a.Arg+1)
	}
	switch rf.Effect {
	case reallocPtr, reallocMap, dupFd, fcntlDup, shmctlRmid:
		n = max(n, 2)
	case freopenFp:
		n = max(n, 3)
	}
	return min(n, 6)
}

// newStub is the drain's stub of f's function, recorded at its return
// (resDesc sets how it is recorded).
func newStub(f *resFn) drain.Stub {
	rf := f.rf
	return drain.Stub{Meaning: f, Res: f.res, Name: rf.Display(), Nargs: resArgs(rf), Freed: rf.ID, Allocates: rf.allocates(), Args: len(rf.Args)}
}

// resStub is s, a stub of rf, with the ways the drain's lane makes its
// calls.
func resStub(s drain.Stub, rf *ResFunc) drain.Stub {
	s.Lane = laneKindOf(rf)
	s.Quick = quickStub(&s, rf)
	return s
}

// laneKindOf is the lane's way with rf's calls.
func laneKindOf(rf *ResFunc) drain.LaneKind {
	switch {
	case len(rf.Args) > 0:
		return drain.LaneNo
	case rf.Effect == allocRet:
		return drain.LaneAlloc
	case rf.Effect == freeArg:
		return drain.LaneFree
	}
	return drain.LaneEffects
}

// quickStub is how the drain's laneQuick makes the calls of s, a stub of
// rf, from the ring's words alone, as resEffects would (QuickNo: it does
// not); TestDrainLaneSameStream compares.
func quickStub(s *drain.Stub, rf *ResFunc) drain.QuickKind {
	if s.Out || rf.Len != 0 || rf.SizeMul != 0 || rf.Scale != 0 {
		return drain.QuickNo
	}
	switch {
	case s.Lane == drain.LaneAlloc && s.Nargs == 1 && !s.Both && !s.Release && rf.Size == 1:
		return drain.QuickAlloc
	case s.Lane == drain.LaneFree && s.Nargs == 1 && !s.Both && rf.ID == 0:
		return drain.QuickFree
	case s.Lane == drain.LaneEffects && rf.Effect == reallocPtr && s.Nargs == 2 && s.Both && !s.Release && rf.Size == 2 && s.EntryAt() == 3:
		return drain.QuickRealloc
	}
	return drain.QuickNo
}

// resFn is the drain's Meaning of its function's calls: what resReport
// makes of them at a stop.
func (f *resFn) Effects(evs []drain.Effect, args *[6]uint64, ret, out uint64) []drain.Effect {
	return resEffects(evs, f.rf, args, ret, func(uint64) (uint64, error) { return out, nil })
}

func (f *resFn) Args(dst []trace.Arg, args *[6]uint64) []trace.Arg {
	for _, a := range f.rf.Args {
		dst = append(dst, trace.Arg{Name: a.Name, Value: argValue(a, args[a.Arg])})
	}
	return dst
}

func (f *resFn) Size(args *[6]uint64) uint64 { return callSize(f.rf, args) }

// lockedResSink is the resource sink the tracer uses with the fast
// engine: what the tracer says (a stop's resource call, a thread's start
// or end, a fork, a toggle...) is queued with the time it is said, among
// the calls the rings hold, and reaches the sink in time order: after
// every call the thread made before it stopped, and every other thread's
// made before (drain.Drainer.Event).
type lockedResSink struct {
	d *drain.Drainer
	r ResSink
}

func (l *lockedResSink) event(f func(ResSink) error) error {
	l.d.Event(func() error { return f(l.r) })
	return nil
}

func (l *lockedResSink) sync(f func(ResSink) error) error {
	return l.d.SyncRes(func() error { return f(l.r) })
}

func (l *lockedResSink) Session(s Session) error {
	return l.sync(func(r ResSink) error { return r.Session(s) })
}
func (l *lockedResSink) Maps(sid string, maps []byte) error {
	return l.event(func(r ResSink) error { return r.Maps(sid, maps) })
}
func (l *lockedResSink) Dlopen(time uint64, tid int, sid string, base uint64, path string) error {
	return l.event(func(r ResSink) error { return r.Dlopen(time, tid, sid, base, path) })
}
func (l *lockedResSink) Task(time uint64, tid, pid int) error {
	return l.event(func(r ResSink) error { return r.Task(time, tid, pid) })
}
func (l *lockedResSink) Fork(time uint64, pid, ppid int) error {
	return l.event(func(r ResSink) error { return r.Fork(time, pid, ppid) })
}
func (l *lockedResSink) Exit(time uint64, tid int) error {
	return l.event(func(r ResSink) error { return r.Exit(time, tid) })
}
func (l *lockedResSink) Usage(pid int, peakRSS uint64) error {
	return l.event(func(r ResSink) error {
		if u, ok := r.(UsageSink); ok {
			return u.Usage(pid, peakRSS)
		}
		return nil
	})
}
func (l *lockedResSink) HeapScan(items []trace.Item) error {
	return l.event(func(r ResSink) error {
		if u, ok := r.(ScanSink); ok {
			return u.HeapScan(items)
		}
		return nil
	})
}
func (l *lockedResSink) Toggle(on bool, pid int) error {
	return l.sync(func(r ResSink) error { return r.Toggle(on, pid) })
}

// Call queues c (the tracer's, not reused) and says ErrStreamClosed once
// when a call handed on found the stream closed.
func (l *lockedResSink) Call(c *trace.Call) error {
	return l.d.QueueCall(func() error { return l.r.Call(c) })
}
func (l *lockedResSink) Lost(tid int, n uint64) error {
	return l.event(func(r ResSink) error { return r.Lost(tid, n) })
}
