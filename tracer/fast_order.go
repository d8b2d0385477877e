package tracer

import (
	"rtrace/internal/trace"
	"rtrace/tracer/fast/drain"
)

// lockedSink is the function sink the tracer uses with the fast engine:
// each call runs under the drainer's lock, and first drains the rings of
// the thread it is about (all of them for an exec's session or a toggle),
// so what the tracer hands on follows the records written before it
// (drain.Drainer.Do). f is the sink the drainer was made with (startFast):
// Exit, and the records of the frames a retired thread left open, go to
// it through the drainer.
type lockedSink struct {
	d *drain.Drainer
	f FuncSink
}

func (l *lockedSink) do(tid int, f func(FuncSink) error) error {
	return l.d.Do(tid, func(drain.Locked) error { return f(l.f) })
}

func (l *lockedSink) Session(s Session) error {
	return l.do(drain.DrainAll, func(f FuncSink) error { return f.Session(s) })
}
func (l *lockedSink) Maps(sid string, maps []byte) error {
	return l.do(drain.DrainNone, func(f FuncSink) error { return f.Maps(sid, maps) })
}
func (l *lockedSink) Dlopen(time uint64, tid int, sid string, base uint64, path string) error {
	return l.do(tid, func(f FuncSink) error { return f.Dlopen(time, tid, sid, base, path) })
}
func (l *lockedSink) Task(time uint64, tid, pid int) error {
	return l.do(tid, func(f FuncSink) error { return f.Task(time, tid, pid) })
}
func (l *lockedSink) Fork(time uint64, pid, ppid int) error {
	return l.d.Do(ppid, func(lk drain.Locked) error {
		lk.RetireTid(pid) // a reused tid: its old task ends first
		return l.f.Fork(time, pid, ppid)
	})
}
func (l *lockedSink) Exit(time uint64, tid int) error {
	return l.d.Exit(time, tid) // after a retired state's records: the drainer's
}
func (l *lockedSink) Toggle(on bool, pid int) error {
	return l.do(drain.DrainAll, func(f FuncSink) error { return f.Toggle(on, pid) })
}
func (l *lockedSink) Symbols(sid string, funcs []trace.Func) error {
	return l.do(drain.DrainNone, func(f FuncSink) error { return f.Symbols(sid, funcs) })
}
func (l *lockedSink) Event(id uint64, name string) error {
	return l.do(drain.DrainNone, func(f FuncSink) error { return f.Event(id, name) })
}
func (l *lockedSink) Probe(time uint64, tid int, name string, args []string) error {
	return l.do(tid, func(f FuncSink) error { return f.Probe(time, tid, name, args) })
}
func (l *lockedSink) Records(tid int, recs []Rec) error {
	return l.d.Do(tid, func(lk drain.Locked) error { return lk.Records(tid, recs) })
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
