package tracer

import (
	"errors"
	"math"
	"os"
	"time"

	"rtrace/internal/trace"
	"rtrace/internal/wire"
	"rtrace/tracer/fast"
)

// Resource calls recorded in the process (docs/FAST-PATH.md, "Resource
// calls in the process"): a resource function's stub records its call in
// the thread's ring (res.S), with its backtrace found by the in-process
// walker (walk.S, fast_walk.go); the drainer decodes the records into the
// calls the resource sink gets, as resReport makes them at a stop.

// resStub is a resource function whose calls its stub records: its number
// (fast.Desc's ID, which its records carry) is its index in
// drainer.resStubs.
type resStub struct {
	res     *resFn
	nargs   int    // the arguments its records carry
	release bool   // recorded at its entry: no result
	out     bool   // its records carry the word its Out argument points at
	both    bool   // releases and allocates: its records carry the entry's time last
	name    string // its calls' name (ResFunc.Display)
	lane    laneKind
	quick   quickKind // laneQuick makes its calls
}

// entryAt is where a DescBoth call's record has its entry's time: after
// its arguments, its result and its out word (exit_res), before the zero
// that pads an odd count of words to whole records (reallocarray's,
// mremap's: the last word is not it).
func (s *resStub) entryAt() int {
	i := s.nargs + 1
	if s.out {
		i++
	}
	return i
}

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
	s := resStub{res: c.res, nargs: resArgs(rf)}
	d := fast.Desc{Fn: addr, Args: uint8(s.nargs)}
	if rf.Effect == allocOutPtr || rf.Effect == allocOutFds {
		s.out = true
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
		s.release = true
		d.Flags |= fast.DescRelease
	case rf.Effect == freeArg && !t.cfg.BacktraceAll:
		s.release = true
		d.Flags |= fast.DescReleaseFrame
	case !rf.allocates():
		d.Flags |= fast.DescEntryTime
	case rf.releases():
		s.both = true
		d.Flags |= fast.DescBoth
	}
	d.ID = t.drain.addResStub(s)
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

// addResStub numbers s.
func (d *drainer) addResStub(s resStub) uint32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	s.name = s.res.rf.Display()
	s.lane = laneKindOf(s.res.rf)
	s.quick = quickStub(&s)
	d.resStubs = append(d.resStubs, s)
	d.resRings.Store(true)
	return uint32(len(d.resStubs) - 1)
}

// ringRes is what the drain keeps of a ring's resource records: its
// decoder, and each stack cache slot's stack as frames, made once per
// stack the decoder holds (a new slice for each STACK record).
type ringRes struct {
	dec    fast.ResDecoder
	vals   pendValues // an ARGS or RET group, for the function record after it
	frames [256]struct {
		key *uint64
		f   []trace.Frame
		w   *wire.Writer // the lane whose stack sid is f (stackID)
		sid uint32
	}
}

// framesOf returns the frames of rc's stack (nil: none).
func (r *ringRes) framesOf(rc *fast.ResCall) []trace.Frame {
	if len(rc.Stack) == 0 {
		return nil
	}
	e := &r.frames[rc.Slot]
	if e.key == &rc.Stack[0] && len(e.f) == len(rc.Stack) {
		return e.f
	}
	f := make([]trace.Frame, len(rc.Stack))
	for i, pc := range rc.Stack {
		f[i].Addr = pc
	}
	e.key, e.f, e.w = &rc.Stack[0], f, nil
	return f
}

// ring returns st's resource record state.
func (d *drainer) ring(st *fast.State) *ringRes {
	r := d.decoders[st]
	if r == nil {
		if d.decoders == nil {
			d.decoders = map[*fast.State]*ringRes{}
		}
		r = &ringRes{}
		d.decoders[st] = r
	}
	return r
}

// resDirectLocked reports whether the calls just read from st's ring may
// go to the resource sink at once, in ring order, without waiting in the
// queues: nothing waits there, and no other ring holds records, so every
// call they may depend on (written before them) was handed on already. A
// single-threaded process's calls always may (the queue's copy and merge
// cost churn 15% of its time).
func (d *drainer) resDirectLocked(st *fast.State) bool {
	if d.res == nil || d.order.n > 0 {
		return false
	}
	var now, hold uint64
	for o := range d.owner {
		if o == st {
			continue
		}
		if o.Pending() {
			return false
		}
		if since := o.ReleasingSince(); since != 0 {
			if now == 0 {
				now, hold = fast.ReadTSC(), d.clock.Scale().Ticks(uint64(relHoldMax))
			}
			if since > now || now-since < hold {
				return false // relHoldLocked
			}
		}
	}
	for _, r := range d.retiring {
		if !r.done && r.st != st && r.st.Pending() {
			return false
		}
	}
	return true
}

// relHoldLocked lowers the watermark wm, read now, to the time since
// which a thread is making a release whose record is not written yet
// (State.ReleasingSince): a call another thread makes after what it
// released is another's again has a later time, and waits for it. Not for
// longer than relHoldMax: a release that blocks (pthread_join, close of
// a socket that lingers) would hold every thread's calls back meanwhile, and
// what it releases is seldom taken before it returns.
func (d *drainer) relHoldLocked(wm uint64) uint64 {
	if !d.resRings.Load() {
		return wm
	}
	hold := d.clock.Scale().Ticks(uint64(relHoldMax))
	for st := range d.owner {
		if since := st.ReleasingSince(); since != 0 && since < wm && wm-since < hold {
			wm = since
		}
	}
	return wm
}

// relHoldMax bounds relHoldLocked's hold.
const relHoldMax = 20 * time.Millisecond

// resLostLocked queues, for the resource sink, the calls tid's thread
// dropped on a full ring since the last time.
func (d *drainer) resLostLocked(tid int, st *fast.State) {
	if lost := st.TakeResLost(); lost > 0 && d.res != nil {
		d.resLost += lost
		if d.resDirectLocked(st) {
			d.resErr(d.res.Lost(tid, lost))
			return
		}
		d.order.pushLost(st, tid, lost)
	}
}

// resCall hands the resource sink, at once (direct: resDirectLocked) or
// once its turn comes, a call tid's ring st (its state r) held.
func (d *drainer) resCall(st *fast.State, r *ringRes, tid int, rc *fast.ResCall, direct bool, sc fast.Scale) {
	if d.res == nil {
		return
	}
	if rc.Stack != nil {
		d.walks++
	}
	frames := r.framesOf(rc)
	if direct {
		if d.lane.w == nil {
			d.resCalls(tid, rc, frames, sc, resAll)
		} else if !d.laneCall(tid, r, rc, frames, sc) {
			// Handed on at once: the lane's next calls come after it.
			d.resCalls(tid, rc, frames, sc, resAll)
			d.handBatchLocked()
		}
		return
	}
	if int(rc.ID) < len(d.resStubs) {
		if s := &d.resStubs[rc.ID]; s.both && len(rc.Words) > s.entryAt() {
			d.order.push(st, tid, rc, frames, rc.Words[s.entryAt()], resReleases)
			d.order.push(st, tid, rc, frames, rc.TSC, resAllocs)
			return
		}
	}
	d.order.push(st, tid, rc, frames, rc.TSC, resAll)
}

// words reads rc, a call of s: its arguments into args, its result and
// the word its Out argument pointed at (none for a release at its entry),
// and the time of its releases (its entry's for a DescBoth call); false:
// too few words.
func (s *resStub) words(rc *fast.ResCall, args *[6]uint64) (ret, out, relTSC uint64, ok bool) {
	w := rc.Words
	for i := 0; i < s.nargs && i < len(w); i++ {
		args[i] = w[i]
	}
	relTSC = rc.TSC
	if !s.release {
		if len(w) <= s.nargs {
			return 0, 0, 0, false
		}
		ret = w[s.nargs]
		if s.out && len(w) > s.nargs+1 {
			out = w[s.nargs+1]
		}
		if s.both && len(w) > s.entryAt() {
			relTSC = w[s.entryAt()]
		}
	}
	return ret, out, relTSC, true
}

// resMargin lowers the watermark by the TSC readings of different CPUs'
// disagreement, at most (a few ticks on one host; some more in virtual
// machines): about 50 µs at 2.5 GHz, and the calls wait one more round.
const resMargin = 1 << 17

// flushResLocked hands the resource sink the calls and events queued
// below the watermark wm (math.MaxUint64: all of them), lowered to the
// last call read from each ring that has more to read.
func (d *drainer) flushResLocked(wm uint64) {
	if d.res == nil || len(d.order.queues) == 0 {
		return
	}
	if wm != math.MaxUint64 && d.resRings.Load() {
		wm = max(wm, resMargin) - resMargin
		for st := range d.owner {
			if st.Pending() {
				wm = min(wm, d.order.last(st))
			}
		}
		for _, r := range d.retiring {
			if !r.done && r.st.Pending() {
				wm = min(wm, d.order.last(r.st))
			}
		}
	}
	sc := d.clock.Scale()
	d.order.flush(wm, func(p *resPend) {
		switch {
		case p.ev != nil:
			d.resErr(p.ev(d.res))
		case p.lost > 0:
			d.resErr(d.res.Lost(p.tid, p.lost))
		default:
			d.resCalls(p.tid, &fast.ResCall{TSC: p.callTSC, ID: p.id, Words: p.words[:p.n]}, p.frames, sc, p.part)
		}
	})
	for st, q := range d.order.queues {
		if q.empty() && st != nil && d.owner[st] == 0 && !d.isRetiring(st) {
			delete(d.order.queues, st) // its ring is gone
		}
	}
}

// isRetiring reports whether st is a retired state not finished yet.
func (d *drainer) isRetiring(st *fast.State) bool {
	for _, r := range d.retiring {
		if r.st == st && !r.done {
			return true
		}
	}
	return false
}

// resErr keeps a sink error; a closed stream (its reader gone) is said
// once by the sink, and the calls go nowhere until a toggle: the tracer
// learns it at its next call (lockedResSink.Call).
func (d *drainer) resErr(err error) {
	if err == nil {
		return
	}
	if errors.Is(err, ErrStreamClosed) {
		d.resClosed = true
		return
	}
	d.noteErr(err)
}

// resCalls hands the resource sink the calls a resource call's records
// say, as resReport makes them at a stop: what it did to its resources,
// at its time of day, with its backtrace where one goes. The sink gets
// one Call value, reused (ResSink.Call keeps nothing), or a batch's
// (bsink), and the frames of a backtrace the stack table already holds.
func (d *drainer) resCalls(tid int, rc *fast.ResCall, stack []trace.Frame, sc fast.Scale, part resPart) {
	if int(rc.ID) >= len(d.resStubs) {
		return // not a record the stubs wrote
	}
	s := &d.resStubs[rc.ID]
	rf := s.res.rf
	var args [6]uint64
	ret, out, relTSC, ok := s.words(rc, &args)
	if !ok {
		return
	}
	var frames []trace.Frame
	if wantBacktrace(rf, &args, d.btAll, d.monitor) {
		frames = stack
	}
	d.resEvs = resEffects(d.resEvs[:0], rf, &args, ret, func(uint64) (uint64, error) { return out, nil })
	for _, e := range d.resEvs {
		if part == resAllocs && !e.alloc || part == resReleases && e.alloc {
			continue
		}
		c := &d.call
		if d.bsink != nil {
			if d.nbatch == resBatch {
				d.handBatchLocked()
			}
			if d.nbatch == len(d.batch) {
				d.batch = append(d.batch, trace.Call{})
			}
			c = &d.batch[d.nbatch]
			d.nbatch++
		}
		c.Index, c.Context, c.Tid, c.Res, c.Name, c.Args = 0, 0, tid, s.res.res, s.name, c.Args[:0]
		for _, a := range rf.Args {
			c.Args = append(c.Args, trace.Arg{Name: a.Name, Value: argValue(a, args[a.Arg])})
		}
		tsc, fr := d.effectAt(e.alloc, rc, relTSC, frames)
		c.Time = d.timeOfDay(sc.Nanos(tsc))
		c.Alloc, c.ID, c.Size, c.Frames = e.alloc, e.id, e.size, fr
		if d.bsink == nil {
			d.resErr(d.res.Call(c))
		}
	}
}

// effectAt is the time and the backtrace of an effect of call rc (its
// backtrace frames, nil when none is wanted): an allocation's at the
// call's return, with the backtrace; a release's at relTSC (resStub.words),
// with it for --backtrace-all only.
func (d *drainer) effectAt(alloc bool, rc *fast.ResCall, relTSC uint64, frames []trace.Frame) (uint64, []trace.Frame) {
	if alloc {
		return rc.TSC, frames
	}
	if !d.btAll {
		frames = nil
	}
	return relTSC, frames
}

// resBatch is the most calls a batch holds: few enough to stay in the
// CPU's first cache while they are made and encoded (a ring read's
// thousands made the drain slower than one call at a time).
const resBatch = 32

// handBatchLocked hands the batch sink the calls made so far.
func (d *drainer) handBatchLocked() {
	if d.nbatch > 0 {
		d.resErr(d.bsink.Calls(d.batch[:d.nbatch]))
		if d.lane.w != nil {
			// Calls may have ended the window: the lane's calls so far
			// were its.
			d.laneEnd(nil)
			d.laneSet(d.lane.sink.Lane(d.batch[0].Tid))
		}
	}
	d.nbatch = 0
}

// flushBatchLocked hands the batch sink the calls of a ring read, at its
// end, and reports those of the lane.
func (d *drainer) flushBatchLocked() {
	if d.bsink != nil {
		d.handBatchLocked()
	}
	d.bsink = nil
	if d.lane.w != nil {
		d.laneEnd(nil)
		d.lane.w = nil
	}
}

// resPart is what of a call's effects resCalls hands on: a call that
// releases and allocates (realloc) waits in the queues as its releases,
// at its entry's time, and its allocations, at its return's.
type resPart uint8

const (
	resAll resPart = iota
	resReleases
	resAllocs
)

// timeOfDay is the local time of day at CLOCK_MONOTONIC mono, as
// sp-rtrace's call timestamps are.
func (d *drainer) timeOfDay(mono uint64) time.Duration {
	wall := int64(mono) + d.wallOff
	if wall < d.dayStart || wall >= d.dayStart+int64(24*time.Hour) {
		n := time.Unix(0, wall)
		y, m, day := n.Date()
		d.dayStart = time.Date(y, m, day, 0, 0, 0, 0, n.Location()).UnixNano()
	}
	return time.Duration(wall - d.dayStart)
}

// lockedResSink is the resource sink the tracer uses with the fast
// engine: what the tracer says (a stop's resource call, a thread's start
// or end, a fork, a toggle...) is queued with the time it is said, among
// the calls the rings hold (resOrder), and reaches the sink in time order:
// after every call the thread made before it stopped, and every other
// thread's made before.
type lockedResSink struct {
	d *drainer
}

func (l *lockedResSink) event(f func(ResSink) error) error {
	l.d.mu.Lock()
	defer l.d.mu.Unlock()
	now := fast.ReadTSC()
	l.d.order.pushEvent(now, f)
	l.d.tickCoarse(now + 1) // the calls made after it come after it, not beside
	return nil
}

// sync hands the sink everything queued and then f's call, at once: a
// window opened or closed (a toggle, the first session) says at once
// whether it could be, and calls that come after it go to it.
func (l *lockedResSink) sync(f func(ResSink) error) error {
	l.d.mu.Lock()
	defer l.d.mu.Unlock()
	l.d.drainAllLocked()
	l.d.flushResLocked(math.MaxUint64)
	l.d.resClosed = false
	return f(l.d.res)
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
func (l *lockedResSink) Toggle(on bool, pid int) error {
	return l.sync(func(r ResSink) error { return r.Toggle(on, pid) })
}

// Call queues c (the tracer's, not reused) and says ErrStreamClosed once
// when a call handed on found the stream closed.
func (l *lockedResSink) Call(c *trace.Call) error {
	l.d.mu.Lock()
	defer l.d.mu.Unlock()
	now := fast.ReadTSC()
	l.d.order.pushEvent(now, func(r ResSink) error { return r.Call(c) })
	l.d.tickCoarse(now + 1) // the calls made after it come after it, not beside
	if l.d.resClosed {
		l.d.resClosed = false
		return ErrStreamClosed
	}
	return nil
}
func (l *lockedResSink) Lost(tid int, n uint64) error {
	return l.event(func(r ResSink) error { return r.Lost(tid, n) })
}
