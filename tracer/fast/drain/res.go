package drain

import (
	"errors"
	"math"
	"slices"
	"time"

	"rtrace/internal/trace"
	"rtrace/internal/wire"
	"rtrace/tracer/fast"
)

// Resource calls recorded in the process (docs/FAST-PATH.md, "Resource
// calls in the process"): a resource function's stub records its call in
// the thread's ring (res.S), with its backtrace found by the in-process
// walker (walk.S); the drainer decodes the records into the calls the
// resource sink gets, as the tracer makes them at a stop. What a call
// did to its resources is the tracer's to say (Meaning): the drain knows
// the records, the order and the sink.

// Stub is a resource function whose calls its stub records: its number
// (fast.Desc's ID, which its records carry) is the one AddStub gives it.
type Stub struct {
	Meaning Meaning
	Res     int    // the resource type's id in the stream (1-based)
	Name    string // its calls' name
	Nargs   int    // the arguments its records carry
	Release bool   // recorded at its entry: no result
	Out     bool   // its records carry the word its Out argument points at
	Both    bool   // releases and allocates: its records carry the entry's time last
	Lane    LaneKind
	Quick   QuickKind // laneQuick makes its calls
	Freed   int       // LaneFree: the argument that is the resource released
	// Allocates: its calls may allocate (their backtraces go with them;
	// with --monitor, those of the sizes named only). Args: how many
	// argument records its calls carry (Meaning.Args).
	Allocates bool
	Args      int
}

// Meaning is what a resource function's calls do, from the words their
// records carry: the tracer's rules, as at a stop. args points at the
// drainer's scratch copy of a call's arguments (a pointer passed through
// an interface escapes: a local array was a heap allocation a call), valid
// during the method's call only.
type Meaning interface {
	// Effects appends to evs[:0] what a call with args that returned ret
	// did to its resources, in the order they are reported; out is the
	// word its Out argument pointed at (read at its return).
	Effects(evs []Effect, args *[6]uint64, ret, out uint64) []Effect
	// Args appends the call's argument records to dst (Stub.Args of them).
	Args(dst []trace.Arg, args *[6]uint64) []trace.Arg
	// Size is the size of the resource an allocation made.
	Size(args *[6]uint64) uint64
}

// Effect is one thing a resource call did: allocate (Alloc) or release
// the resource ID; an allocation has a size.
type Effect struct {
	Alloc bool
	ID    uint64
	Size  uint64
	// Res: the resource type when not the function's (0); only calls
	// that stop make such effects (the shm module's shmdt: shmEffects).
	Res int
}

// EntryAt is where a DescBoth call's record has its entry's time: after
// its arguments, its result and its out word (exit_res), before the zero
// that pads an odd count of words to whole records (reallocarray's,
// mremap's: the last word is not it).
func (s *Stub) EntryAt() int {
	i := s.Nargs + 1
	if s.Out {
		i++
	}
	return i
}

// AddStub numbers s.
func (d *Drainer) AddStub(s Stub) uint32 {
	d.mu.Lock()
	defer d.mu.Unlock()
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
func (d *Drainer) ring(st *fast.State) *ringRes {
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
func (d *Drainer) resDirectLocked(st *fast.State) bool {
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
func (d *Drainer) relHoldLocked(wm uint64) uint64 {
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
func (d *Drainer) resLostLocked(tid int, st *fast.State) {
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
func (d *Drainer) resCall(st *fast.State, r *ringRes, tid int, rc *fast.ResCall, direct bool, sc fast.Scale) {
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
		if s := &d.resStubs[rc.ID]; s.Both && len(rc.Words) > s.EntryAt() {
			d.order.push(st, tid, rc, frames, rc.Words[s.EntryAt()], resReleases)
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
func (s *Stub) words(rc *fast.ResCall, args *[6]uint64) (ret, out, relTSC uint64, ok bool) {
	w := rc.Words
	for i := 0; i < s.Nargs && i < len(w); i++ {
		args[i] = w[i]
	}
	relTSC = rc.TSC
	if !s.Release {
		if len(w) <= s.Nargs {
			return 0, 0, 0, false
		}
		ret = w[s.Nargs]
		if s.Out && len(w) > s.Nargs+1 {
			out = w[s.Nargs+1]
		}
		if s.Both && len(w) > s.EntryAt() {
			relTSC = w[s.EntryAt()]
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
func (d *Drainer) flushResLocked(wm uint64) {
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
			d.resErr(p.ev())
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
func (d *Drainer) isRetiring(st *fast.State) bool {
	for _, r := range d.retiring {
		if r.st == st && !r.done {
			return true
		}
	}
	return false
}

// resErr keeps a sink error; a closed stream (its reader gone) is said
// once by the sink, and the calls go nowhere until a toggle: the tracer
// learns it at its next call (QueueCall).
func (d *Drainer) resErr(err error) {
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
// say, as the tracer makes them at a stop (Meaning): what it did to its resources,
// at its time of day, with its backtrace where one goes. The sink gets
// one Call value, reused (ResSink.Call keeps nothing), or a batch's
// (bsink), and the frames of a backtrace the stack table already holds.
func (d *Drainer) resCalls(tid int, rc *fast.ResCall, stack []trace.Frame, sc fast.Scale, part resPart) {
	if int(rc.ID) >= len(d.resStubs) {
		return // not a record the stubs wrote
	}
	s := &d.resStubs[rc.ID]
	args := d.callArgs()
	ret, out, relTSC, ok := s.words(rc, args)
	if !ok {
		return
	}
	var frames []trace.Frame
	if d.wantBacktrace(s, args) {
		frames = stack
	}
	d.resEvs = s.Meaning.Effects(d.resEvs[:0], args, ret, out)
	for _, e := range d.resEvs {
		if part == resAllocs && !e.Alloc || part == resReleases && e.Alloc {
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
		c.Index, c.Context, c.Tid, c.Res, c.Name = 0, 0, tid, s.Res, s.Name
		c.Args = c.Args[:0]
		if s.Args > 0 {
			c.Args = s.Meaning.Args(c.Args, args)
		}
		tsc, fr := d.effectAt(e.Alloc, rc, relTSC, frames)
		c.Time = d.timeOfDay(sc.Nanos(tsc))
		c.Alloc, c.ID, c.Size, c.Frames = e.Alloc, e.ID, e.Size, fr
		if d.bsink == nil {
			d.resErr(d.res.Call(c))
		}
	}
}

// callArgs is the drainer's scratch copy of a call's arguments, zeroed.
func (d *Drainer) callArgs() *[6]uint64 {
	d.args = [6]uint64{}
	return &d.args
}

// wantBacktrace is WantBacktrace with the drainer's options.
func (d *Drainer) wantBacktrace(s *Stub, args *[6]uint64) bool {
	return s.WantBacktrace(args, d.btAll, d.monitor)
}

// WantBacktrace reports whether the effects of a call of s with args
// carry its backtrace: an allocation's do (with --monitor, of the sizes
// named only), every call's with --backtrace-all (all), as at a stop.
func (s *Stub) WantBacktrace(args *[6]uint64, all bool, monitor []uint64) bool {
	if !s.Allocates {
		return all
	}
	return len(monitor) == 0 || slices.Contains(monitor, s.Meaning.Size(args))
}

// effectAt is the time and the backtrace of an effect of call rc (its
// backtrace frames, nil when none is wanted): an allocation's at the
// call's return, with the backtrace; a release's at relTSC (Stub.words),
// with it for --backtrace-all only.
func (d *Drainer) effectAt(alloc bool, rc *fast.ResCall, relTSC uint64, frames []trace.Frame) (uint64, []trace.Frame) {
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
func (d *Drainer) handBatchLocked() {
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
func (d *Drainer) flushBatchLocked() {
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
func (d *Drainer) timeOfDay(mono uint64) time.Duration {
	wall := int64(mono) + d.wallOff
	if wall < d.dayStart || wall >= d.dayStart+int64(24*time.Hour) {
		n := time.Unix(0, wall)
		y, m, day := n.Date()
		d.dayStart = time.Date(y, m, day, 0, 0, 0, 0, n.Location()).UnixNano()
	}
	return time.Duration(wall - d.dayStart)
}

// The tracer's own resource calls and events (a stop's resource call, a
// thread's start or end, a fork, a toggle...) go to the resource sink
// through the drainer, queued with the time they are said, among the
// calls the rings hold (resOrder): they reach the sink in time order,
// after every call the thread made before it stopped, and every other
// thread's made before.

// Event queues ev, which hands the resource sink an event of the
// tracer's, for its turn.
func (d *Drainer) Event(ev func() error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := fast.ReadTSC()
	d.order.pushEvent(now, ev)
	d.tickCoarse(now + 1) // the calls made after it come after it, not beside
}

// SyncRes hands the resource sink everything queued and then runs f, at
// once: a window opened or closed (a toggle, the first session) says at
// once whether it could be, and the calls that come after it go to it.
func (d *Drainer) SyncRes(f func() error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.drainAllLocked()
	d.flushResLocked(math.MaxUint64)
	d.resClosed = false
	return f()
}

// QueueCall is Event for a resource call of the tracer's, and says
// ErrStreamClosed once when a call handed on found the stream closed
// (the tracer then turns tracing off).
func (d *Drainer) QueueCall(call func() error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := fast.ReadTSC()
	d.order.pushEvent(now, call)
	d.tickCoarse(now + 1)
	if d.resClosed {
		d.resClosed = false
		return ErrStreamClosed
	}
	return nil
}

// TimeOfDay is timeOfDay under the lock: the time of day a call at
// CLOCK_MONOTONIC mono is given.
func (d *Drainer) TimeOfDay(mono uint64) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.timeOfDay(mono)
}
