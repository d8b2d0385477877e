package drain

import (
	"slices"
	"time"

	"rtrace/internal/trace"
	"rtrace/internal/wire"
	"rtrace/tracer/fast"
)

// The drain's lane (docs/FAST-PATH.md, "The drain's lane"): the calls of
// a ring read that may go to the sink at once (resDirectLocked) are
// written by the drain straight into the wire writer of their thread's
// stream (LaneSink.Lane), with the function and backtrace numbers it
// keeps from one call to the next: no trace.Call is made, and the writer
// does not look them up. A call with arguments (the file functions') goes
// through Calls as before. The stream is the same, byte for byte.

// drainLane is the drain's state of the lane of a ring read.
type drainLane struct {
	sink LaneSink
	w    *wire.Writer // the writer of the read's thread: nil, no lane
	n    int          // calls written since the last Laned
	// fns are the function numbers of w's stream by stub (+1; 0: not
	// asked yet), for writer fnsOf.
	fns   []uint32
	fnsOf *wire.Writer
}

// laneBegin starts the lane of a ring read of tid's calls, when the sink
// lends one.
func (d *Drainer) laneBegin(tid int) {
	l := &d.lane
	l.sink, _ = d.res.(LaneSink)
	l.w, l.n = nil, 0
	if l.sink != nil {
		d.laneSet(l.sink.Lane(tid))
	}
}

// laneSet makes w the lane's writer (nil: none).
func (d *Drainer) laneSet(w *wire.Writer) {
	l := &d.lane
	l.w = w
	if w != nil && w != l.fnsOf {
		clear(l.fns)
		l.fnsOf = w
	}
}

// laneEnd reports the calls written to the lane, and the error that
// ended it (err).
func (d *Drainer) laneEnd(err error) {
	l := &d.lane
	if l.n > 0 || err != nil {
		d.resErr(l.sink.Laned(l.n, err))
	}
	l.n = 0
	if err != nil {
		l.w = nil
	}
}

// LaneKind is how the lane makes a stub's calls from its records.
type LaneKind uint8

const (
	LaneNo      LaneKind = iota // calls with arguments: through Calls
	LaneEffects                 // as Meaning.Effects says
	LaneAlloc                   // one allocation of Meaning.Size, unless it returned 0 or -1 (malloc)
	LaneFree                    // one release of argument Stub.Freed, unless it is 0 (free)
)

// laneCall writes the calls of rc, tid's, into the lane as resCalls hands
// them to the sink, and reports whether it did: not for a stub whose
// calls carry arguments, nor while calls made for Calls wait in the batch
// (they go first). stack is rc's stack (ringRes.framesOf).
func (d *Drainer) laneCall(tid int, r *ringRes, rc *fast.ResCall, stack []trace.Frame, sc fast.Scale) bool {
	if int(rc.ID) >= len(d.resStubs) || d.nbatch > 0 {
		return false
	}
	s := &d.resStubs[rc.ID]
	if s.Lane == LaneNo {
		return false
	}
	args := d.callArgs()
	ret, out, relTSC, ok := s.words(rc, args)
	if !ok {
		return true // as resCalls: no call
	}
	// The common kinds made here as Effects and Backtrace would.
	switch s.Lane {
	case LaneAlloc:
		if ret == 0 || ret == ^uint64(0) {
			return true
		}
		size := s.Meaning.Size(args)
		if len(d.monitor) > 0 && !slices.Contains(d.monitor, size) {
			stack = nil
		}
		d.lanePut(tid, s, r, rc, stack, d.timeOfDay(sc.Nanos(rc.TSC)), true, size, ret)
		return true
	case LaneFree:
		if args[s.Freed] == 0 {
			return true
		}
		tsc, frames := d.effectAt(false, rc, relTSC, stack)
		d.lanePut(tid, s, r, rc, frames, d.timeOfDay(sc.Nanos(tsc)), false, 0, args[s.Freed])
		return true
	}
	if !d.wantBacktrace(s, args) {
		stack = nil
	}
	d.resEvs = s.Meaning.Effects(d.resEvs[:0], args, ret, out)
	for _, e := range d.resEvs {
		tsc, frames := d.effectAt(e.Alloc, rc, relTSC, stack)
		if !d.lanePut(tid, s, r, rc, frames, d.timeOfDay(sc.Nanos(tsc)), e.Alloc, e.Size, e.ID) {
			break
		}
	}
	return true
}

// QuickKind is how laneQuick makes a stub's calls.
type QuickKind uint8

const (
	QuickNo      QuickKind = iota
	QuickAlloc             // malloc: one argument, its size, and the result
	QuickFree              // free: its pointer, the first argument
	QuickRealloc           // realloc: pointer, size, result, entry time
)

// laneQuick writes the call whose CALL group starts at part[i] into the
// lane as laneCall would, without making a fast.ResCall first: a call of
// a stub with Quick set whose function and backtrace numbers the lane already knows
// (the common case from the second call on). It returns the records it
// took; 0: none, the call goes the common way (the same bytes:
// TestDrainLaneSameStream).
func (d *Drainer) laneQuick(part []fast.Rec, i, tid int, r *ringRes, sc fast.Scale) int {
	id, slot, hasStack, w0, w1, ok := r.dec.Call1(part, i)
	if !ok {
		return d.laneRealloc(part, i, tid, r, sc)
	}
	s, fn, ok := d.quickOf(id)
	if !ok || s.Quick != QuickAlloc && s.Quick != QuickFree {
		return 0
	}
	l := &d.lane
	var stk []uint64
	if hasStack {
		stk = r.dec.Stack(slot)
	}
	alloc, size, addr, sid := s.Quick == QuickAlloc, uint64(0), w0, wire.NoStack
	none := alloc && (w1 == 0 || w1 == ^uint64(0)) || !alloc && w0 == 0
	switch {
	case none:
		// No allocation, or free(NULL): no call.
	case alloc:
		if len(d.monitor) > 0 {
			return 0
		}
		size, addr = w0, w1
		if sid, ok = r.knownStack(slot, stk, l.w); !ok {
			return 0
		}
	case d.btAll:
		return 0 // a release's backtrace: effectAt
	}
	if stk != nil {
		d.walks++
	}
	if none {
		return 2
	}
	if d.laneWrite(tid, fn, d.timeOfDay(sc.Nanos(part[i].TSC)), alloc, size, addr, sid) {
		d.quick++
	}
	return 2
}

// laneRealloc is laneQuick for a realloc (QuickRealloc, as Meaning.Effects
// says of one): a
// release of the old block at the call's entry, unless the call failed,
// and an allocation of the new one at its return.
func (d *Drainer) laneRealloc(part []fast.Rec, i, tid int, r *ringRes, sc fast.Scale) int {
	id, slot, hasStack, w, ok := r.dec.Call2(part, i)
	if !ok {
		return 0
	}
	s, fn, ok := d.quickOf(id)
	if !ok || s.Quick != QuickRealloc || len(d.monitor) > 0 || d.btAll {
		return 0
	}
	l := &d.lane
	old, size, ret, relTSC := w[0], w[1], w[2], w[3]
	var stk []uint64
	if hasStack {
		stk = r.dec.Stack(slot)
	}
	sid := wire.NoStack
	if ret != 0 {
		if sid, ok = r.knownStack(slot, stk, l.w); !ok {
			return 0
		}
	}
	if stk != nil {
		d.walks++
	}
	if old != 0 && (ret != 0 || size == 0) {
		if !d.laneWrite(tid, fn, d.timeOfDay(sc.Nanos(relTSC)), false, 0, old, wire.NoStack) {
			return 3
		}
		d.quick++
	}
	if ret != 0 && d.laneWrite(tid, fn, d.timeOfDay(sc.Nanos(part[i].TSC)), true, size, ret, sid) {
		d.quick++
	}
	return 3
}

// quickOf is stub id, when laneQuick may make its calls, and its
// function's number in the lane's stream, once the lane has it.
func (d *Drainer) quickOf(id uint32) (s *Stub, fn uint32, ok bool) {
	if int(id) >= len(d.resStubs) || int(id) >= len(d.lane.fns) || d.lane.fns[id] == 0 {
		return nil, 0, false
	}
	s = &d.resStubs[id]
	return s, d.lane.fns[id] - 1, s.Quick != QuickNo
}

// knownStack is the number in w's stream of the stack slot holds (stk;
// wire.NoStack for none), if the lane has named it already.
func (r *ringRes) knownStack(slot uint8, stk []uint64, w *wire.Writer) (uint32, bool) {
	if len(stk) == 0 {
		return wire.NoStack, true
	}
	e := &r.frames[slot]
	if e.w != w || e.key != &stk[0] || len(e.f) != len(stk) {
		return 0, false
	}
	return e.sid, true
}

// laneWrite writes a call of function fn (the stream's number) with
// backtrace sid into the lane, and reports whether the lane goes on.
func (d *Drainer) laneWrite(tid int, fn uint32, t time.Duration, alloc bool, size, id uint64, sid uint32) bool {
	l := &d.lane
	if err := l.w.PutCall(tid, fn, t, alloc, size, id, sid); err != nil {
		d.laneEnd(err)
		return false
	}
	l.n++
	return true
}

// lanePut writes a call of stub s into the lane, with backtrace frames
// (rc's stack, or nil), and reports whether the lane goes on.
func (d *Drainer) lanePut(tid int, s *Stub, r *ringRes, rc *fast.ResCall, frames []trace.Frame, t time.Duration, alloc bool, size, id uint64) bool {
	l := &d.lane
	if int(rc.ID) >= len(l.fns) {
		l.fns = append(l.fns, make([]uint32, len(d.resStubs)-len(l.fns))...)
	}
	fn := l.fns[rc.ID]
	if fn == 0 {
		n, err := l.w.FuncID(s.Res, s.Name)
		if err != nil {
			d.laneEnd(err)
			return false
		}
		fn = n + 1
		l.fns[rc.ID] = fn
	}
	sid := wire.NoStack
	if len(frames) > 0 {
		var err error
		if sid, err = r.stackID(rc.Slot, frames, l.w); err != nil {
			d.laneEnd(err)
			return false
		}
	}
	return d.laneWrite(tid, fn-1, t, alloc, size, id, sid)
}

// stackID is the number of the stack of cache slot slot (frames) in w's
// stream, kept with the slot's frames.
func (r *ringRes) stackID(slot uint8, frames []trace.Frame, w *wire.Writer) (uint32, error) {
	e := &r.frames[slot]
	if e.w == w && len(e.f) > 0 && &e.f[0] == &frames[0] {
		return e.sid, nil
	}
	sid, err := w.StackID(frames)
	if err != nil {
		return 0, err
	}
	if len(e.f) > 0 && &e.f[0] == &frames[0] {
		e.w, e.sid = w, sid
	}
	return sid, nil
}
