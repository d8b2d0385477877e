package drain

import (
	"slices"

	"rtrace/internal/trace"
	"rtrace/internal/uftrace"
	"rtrace/tracer/fast"
)

// The drain's rounds: every ring a batch at a time, each batch's records
// converted where they lie in the ring and handed on.

// drainAllLocked drains every ring, a batch from each in turn: a thread
// waiting for room in its ring sees it move while the others are drained.
func (d *Drainer) drainAllLocked() bool {
	wm := d.relHoldLocked(fast.ReadTSC())
	defer d.flushResLocked(wm)
	d.retireAllLocked()
	any := false
	for range fast.RingCap / drainBatch {
		more := false
		for st, tid := range d.owner {
			if d.drainBatchLocked(st, tid) {
				more = true
			}
		}
		if !more {
			break
		}
		any = true
	}
	return any
}

// drainRound drains a batch from each ring, taking the lock for each
// batch only: the tracer, which takes it to hand on what a stopped thread
// did, waits for one batch at most, not for every ring to be empty.
func (d *Drainer) drainRound(least uint64) bool {
	wm := fast.ReadTSC() // before the list: a ring added later has nothing older
	d.mu.Lock()
	d.tickCoarse(wm)
	wm = d.relHoldLocked(wm)
	d.states = d.states[:0]
	d.tids = d.tids[:0]
	for st, tid := range d.owner {
		d.states, d.tids = append(d.states, st), append(d.tids, tid)
	}
	d.mu.Unlock()
	any := false
	for i, st := range d.states {
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			return false
		}
		// The state may have gone (unmapped: not to be read) or changed
		// owner since the list was made.
		if tid, ok := d.owner[st]; ok && tid == d.tids[i] && (st.Len() >= least || least <= 1 && st.Pending()) && !d.retiringBefore(tid, st) && d.drainBatchLocked(st, tid) {
			any = true
		}
		d.mu.Unlock()
	}
	d.mu.Lock()
	if !d.closed {
		d.flushResLocked(wm)
	}
	d.mu.Unlock()
	return any
}

// rings is the number of rings drainRound read last (only Run's
// goroutine calls it).
func (d *Drainer) rings() int { return len(d.states) }

// drainTidLocked drains the rings whose records are tid's.
func (d *Drainer) drainTidLocked(tid int) {
	d.retireTidLocked(tid)
	for st, owner := range d.owner {
		if owner == tid {
			d.drainLocked(st, tid)
		}
	}
}

// drainLocked hands st's pending records to the sink as tid's.
func (d *Drainer) drainLocked(st *fast.State, tid int) bool {
	any := false
	// At most one ring's worth: a thread writing as fast as rtrace reads
	// must not hold the lock (and the tracer) forever.
	for i := 0; i <= fast.RingCap/drainBatch && d.drainBatchLocked(st, tid); i++ {
		any = true
	}
	return any
}

// drainLeast is the fewest records the drain takes from a ring right
// after a round that found some: fewer wait for the next round, after a
// sleep. A drain that chased the thread took 70 records at a time on
// fib(30), and each batch moved the ring's head and tail between the two
// CPUs' caches: 77,000 batches, and fib(30) took 12% longer than with
// the slower drain it replaced.
const drainLeast = 1024

// drainBatch is the most records handed on at once: a batch's records
// and their encoding stay in the CPU's cache.
var drainBatch = 1 << 12

// drainBatchLocked hands at most one batch of st's pending records to the
// sink as tid's, and reports whether there were any.
func (d *Drainer) drainBatchLocked(st *fast.State, tid int) bool {
	if !st.Pending() {
		return false
	}
	// The records are converted where they lie in the ring, their times
	// kept monotonic per task (the TSC conversion and the tracer's clock
	// differ by the calibration's error).
	sc := d.clock.Scale()
	last := d.last[tid]
	d.recs = d.recs[:0]
	rr := d.ring(st)
	dec := &rr.dec
	drained := false
	d.resLostLocked(tid, st)
	lost := st.Drain(drainBatch, func(part []fast.Rec) {
		drained = drained || len(part) > 0
		// Decided once the part is read: what its calls depend on was
		// written before them, so before this (resDirectLocked).
		direct := d.resDirectLocked(st)
		if direct {
			d.bsink, _ = d.res.(BatchSink)
			d.laneBegin(tid)
		}
		at := len(d.recs)
		d.recs = slices.Grow(d.recs, len(part)+1)[:at+len(part)]
		out, t, j := d.recs[at:], last, 0
		for i := 0; i < len(part); i++ {
			r := part[i]
			if dec.Pending() || fast.IsRes(r.Word) {
				// A resource call's records, none of them a function's:
				// handed on here, while the part is the thread's.
				if direct && d.lane.w != nil && d.nbatch == 0 {
					if n := d.laneQuick(part, i, tid, rr, sc); n > 0 {
						i += n - 1
						continue
					}
				}
				if n, ok := dec.Group(part, i, &d.rc); ok {
					if d.rc.Values {
						rr.vals.set(&d.rc)
					} else {
						d.resCall(st, rr, tid, &d.rc, direct, sc)
					}
					i += n - 1
				} else if c, whole, _ := dec.Feed(r); whole {
					if c.Values {
						rr.vals.set(&c)
					} else {
						d.resCall(st, rr, tid, &c, direct, sc)
					}
				}
				continue
			}
			t = max(sc.Nanos(r.TSC), t)
			typ, depth, addr := fast.Unword(r.Word)
			out[j] = trace.Rec{Record: uftrace.Record{Time: t, Type: uftrace.RecordType(typ), Depth: depth, Addr: addr}}
			if rr.vals.valid {
				// The values of a function whose stub records them (args.S).
				if p := d.payloadFor(&rr.vals, r.Word, typ, addr); p != nil {
					out[j].More, out[j].Payload = true, p
				}
			}
			if typ == int(uftrace.Event) {
				// The stubs' only event, -W cpu's: the CPU above the id.
				out[j].Addr, out[j].More, out[j].Payload = addr&(1<<20-1), true, uftrace.WatchPayload(uint32(addr>>20))
			}
			j++
		}
		d.recs = d.recs[:at+j]
		last = t
		d.flushBatchLocked()
	})
	n := len(d.recs)
	if lost > 0 {
		// The records that did not fit came after these.
		d.lost += lost
		d.recs = append(d.recs, trace.Rec{Record: uftrace.Record{Time: last, Type: uftrace.Lost, Addr: lost}})
	}
	if len(d.recs) > 0 {
		d.events(uint64(n))
		if err := d.handLocked(tid, d.recs); err != nil && d.err == nil {
			d.err = err
		}
	}
	return drained || len(d.recs) > 0
}

// recordsLocked hands recs to the sink, their times kept monotonic per
// task (the TSC conversion and the tracer's clock differ by the
// calibration's error).
func (d *Drainer) recordsLocked(tid int, recs []trace.Rec) error {
	if len(recs) == 0 {
		return nil
	}
	last := d.last[tid]
	for i := range recs {
		if recs[i].Time < last {
			recs[i].Time = last
		}
		last = recs[i].Time
	}
	return d.handLocked(tid, recs)
}

// handLocked hands recs, monotonic from the task's last time on, to the
// sink.
func (d *Drainer) handLocked(tid int, recs []trace.Rec) error {
	d.last[tid] = recs[len(recs)-1].Time
	d.latest[tid] = recs[len(recs)-1].Record
	return d.sink.Records(tid, recs)
}
