package tracer

import "rtrace/internal/trace"

// lockedSink is the function sink the tracer uses with the fast engine:
// each call runs under the drainer's lock, and first drains the rings of
// the thread it is about (all of them for an exec's session or a toggle),
// so what the tracer hands on follows the records written before it.
// Other threads' records need no order with it: a trace keeps each
// thread's records apart.
type lockedSink struct {
	d *drainer
}

// Which rings a call drains first.
const (
	drainNone = 0
	drainAll  = -1
)

func (l *lockedSink) do(tid int, f func(FuncSink) error) error {
	l.d.mu.Lock()
	defer l.d.mu.Unlock()
	switch tid {
	case drainNone:
	case drainAll:
		l.d.drainAllLocked()
	default:
		l.d.drainTidLocked(tid)
	}
	return f(l.d.sink)
}

func (l *lockedSink) Session(s Session) error {
	return l.do(drainAll, func(f FuncSink) error { return f.Session(s) })
}
func (l *lockedSink) Maps(sid string, maps []byte) error {
	return l.do(drainNone, func(f FuncSink) error { return f.Maps(sid, maps) })
}
func (l *lockedSink) Dlopen(time uint64, tid int, sid string, base uint64, path string) error {
	return l.do(tid, func(f FuncSink) error { return f.Dlopen(time, tid, sid, base, path) })
}
func (l *lockedSink) Task(time uint64, tid, pid int) error {
	return l.do(tid, func(f FuncSink) error { return f.Task(time, tid, pid) })
}
func (l *lockedSink) Fork(time uint64, pid, ppid int) error {
	return l.do(ppid, func(f FuncSink) error {
		l.d.retireTidLocked(pid) // a reused tid: its old task ends first
		return f.Fork(time, pid, ppid)
	})
}
func (l *lockedSink) Exit(time uint64, tid int) error {
	l.d.mu.Lock()
	deferred := l.d.deferExit(time, tid)
	l.d.mu.Unlock()
	if deferred {
		return nil
	}
	return l.do(tid, func(f FuncSink) error {
		delete(l.d.latest, tid) // a reused tid starts afresh
		return f.Exit(time, tid)
	})
}
func (l *lockedSink) Toggle(on bool, pid int) error {
	return l.do(drainAll, func(f FuncSink) error { return f.Toggle(on, pid) })
}
func (l *lockedSink) Symbols(sid string, funcs []trace.Func) error {
	return l.do(drainNone, func(f FuncSink) error { return f.Symbols(sid, funcs) })
}
func (l *lockedSink) Event(id uint64, name string) error {
	return l.do(drainNone, func(f FuncSink) error { return f.Event(id, name) })
}
func (l *lockedSink) Probe(time uint64, tid int, name string, args []string) error {
	return l.do(tid, func(f FuncSink) error { return f.Probe(time, tid, name, args) })
}
func (l *lockedSink) Records(tid int, recs []Rec) error {
	return l.do(tid, func(FuncSink) error { return l.d.recordsLocked(tid, recs) })
}

// discardSink is the drainer's sink without a function trace: the rings
// then hold only what resource tracing needs in the process (its frames).
type discardSink struct{}

func (discardSink) Session(Session) error                            { return nil }
func (discardSink) Maps(string, []byte) error                        { return nil }
func (discardSink) Dlopen(uint64, int, string, uint64, string) error { return nil }
func (discardSink) Task(uint64, int, int) error                      { return nil }
func (discardSink) Fork(uint64, int, int) error                      { return nil }
func (discardSink) Exit(uint64, int) error                           { return nil }
func (discardSink) Toggle(bool, int) error                           { return nil }
func (discardSink) Symbols(string, []trace.Func) error               { return nil }
func (discardSink) Event(uint64, string) error                       { return nil }
func (discardSink) Probe(uint64, int, string, []string) error        { return nil }
func (discardSink) Records(int, []Rec) error                         { return nil }
