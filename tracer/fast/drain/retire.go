package drain

import (
	"rtrace/internal/trace"
	"rtrace/internal/uftrace"
	"rtrace/tracer/fast"
)

// A thread that exited leaves its state to the drainer (Retire): its
// ring is drained off the tracer's path, then its open frames closed and
// its task ended, in that order, before a thread that reuses its tid.

// retiree is the state of a thread that exited: its ring to drain, then
// its open frames to close at the exit's time, then its task's end.
type retiree struct {
	st     *fast.State
	tid    int
	ts     uint64 // the exit event's time: the open frames' EXIT records
	open   bool   // the open frames get no EXIT record (uftrace leaves them open)
	group  any    // the state's process: only compared (Reclaim)
	reuse  bool   // its table entries are gone from the process: reusable
	exit   bool   // the tracer's Exit call for tid came meanwhile:
	exitTS uint64 // made once the state is finished
	done   bool
}

// OwnerOf returns the tid st's records go to (0: none).
func (d *Drainer) OwnerOf(st *fast.State) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.owner[st]
}

// Retire hands the drainer st, the state of tid, which exited at ts, of
// the process group stands for (Reclaim takes it back), its frames left
// open (no EXIT records) when open is set: a
// thread's last records (up to a ring of them) were drained at its exit
// event, on the tracer thread, while the program's other threads waited
// for the tracer (a 4-thread fib(25): 0.3-1.7 ms per exit).
func (d *Drainer) Retire(st *fast.State, tid int, ts uint64, group any, reuse, open bool) {
	d.mu.Lock()
	d.retiring = append(d.retiring, &retiree{st: st, tid: tid, ts: ts, group: group, reuse: reuse, open: open})
	d.mu.Unlock()
}

// retireLocked finishes r: drains its ring, records the exits of the
// frames still open, makes the Exit call that waited for them, and
// forgets the state (reset for reuse when it can be).
func (d *Drainer) retireLocked(r *retiree) {
	if r.done {
		return
	}
	r.done = true
	st := r.st
	// All of it: a batch ends early at each loss, and what is left would
	// be reset away. The thread is gone and its entries with it: nothing
	// refills the ring. With entries left in the process (not reused),
	// a bound.
	for i := 0; (r.reuse || i < 4*fast.RingCap/drainBatch) && d.drainBatchLocked(st, r.tid); i++ {
	}
	if n := d.openFramesLocked(r.tid, st); n < st.Depth() {
		st.Pop() // a half-done step's frame: no EXIT to write
	}
	if r.open {
		st.Truncate(0)
	}
	if st.Depth() > 0 {
		recs := make([]trace.Rec, 0, st.Depth())
		for st.Depth() > 0 {
			fr := st.Pop()
			recs = append(recs, trace.Rec{Record: uftrace.Record{Time: r.ts, Type: uftrace.Exit, Depth: fr.Depth, Addr: fr.Addr}})
		}
		d.events(uint64(len(recs)))
		d.noteErr(d.recordsLocked(r.tid, recs))
	}
	if r.exit {
		d.noteErr(d.sink.Exit(r.exitTS, r.tid))
		delete(d.latest, r.tid) // a reused tid starts afresh
	}
	delete(d.owner, st)
	delete(d.decoders, st)
	d.forgetCoarse(st)
	if r.reuse {
		st.Reset()
	}
}

// retireTidLocked finishes the states tid's threads left (a tid can be
// reused): what is handed on for tid next follows their records.
func (d *Drainer) retireTidLocked(tid int) {
	for _, r := range d.retiring {
		if r.tid == tid {
			d.retireLocked(r)
		}
	}
}

func (d *Drainer) retireAllLocked() {
	for _, r := range d.retiring {
		d.retireLocked(r)
	}
}

// retireRound moves each retired state on by one batch of its ring, or
// finishes it once its ring is empty, taking the lock for each step only
// (as drainRound does), and reports whether it did anything.
func (d *Drainer) retireRound() bool {
	d.mu.Lock()
	d.pending = d.pending[:0]
	for _, r := range d.retiring {
		if !r.done {
			d.pending = append(d.pending, r)
		}
	}
	d.mu.Unlock()
	for _, r := range d.pending {
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			return false
		}
		if !r.done && !d.retiringBefore(r.tid, r.st) && !d.drainBatchLocked(r.st, r.tid) {
			d.retireLocked(r)
		}
		d.mu.Unlock()
	}
	return len(d.pending) > 0
}

// retiringBefore reports whether tid has a state retired before st (a
// live one, or one retired later) not finished yet: st's records, a
// later thread's under a reused tid, wait for it.
func (d *Drainer) retiringBefore(tid int, st *fast.State) bool {
	for _, r := range d.retiring {
		if r.st == st {
			return false
		}
		if r.tid == tid && !r.done {
			return true
		}
	}
	return false
}

// deferExit keeps the Exit call for tid until its retired state is
// finished, and reports whether it did.
func (d *Drainer) deferExit(time uint64, tid int) bool {
	for _, r := range d.retiring {
		if r.tid == tid && !r.done && !r.exit {
			r.exit, r.exitTS = true, time
			return true
		}
	}
	return false
}

// Reclaim returns the finished states of group's threads that exited (all of
// them with force), reset for reuse or not (unmap them), and forgets them.
func (d *Drainer) Reclaim(group any, force bool) (reuse, drop []*fast.State) {
	d.mu.Lock()
	defer d.mu.Unlock()
	kept := d.retiring[:0]
	for _, r := range d.retiring {
		if r.group == group && force {
			d.retireLocked(r)
		}
		switch {
		case r.group != group || !r.done:
			kept = append(kept, r)
		case r.reuse:
			reuse = append(reuse, r.st)
		default:
			drop = append(drop, r.st)
		}
	}
	clear(d.retiring[len(kept):])
	d.retiring = kept
	return reuse, drop
}

// openFramesLocked is how many of st's frames have their ENTRY and not
// their EXIT in tid's trace, for a thread that stopped for good, its ring
// drained: one killed inside a stub may have pushed its top frame without
// writing the ENTRY yet, or written the EXIT without popping it yet. Its
// last record tells: the top frame is open when that record is its ENTRY
// or one of a call inside it. (With records lost, nothing can be told.)
func (d *Drainer) openFramesLocked(tid int, st *fast.State) int {
	n := st.Depth()
	if n == 0 || st.Lost() {
		return n
	}
	last, ok := d.latest[tid]
	top := st.Frame(n - 1)
	if ok && (last.Depth >= n || last.Type == uftrace.Entry && last.Depth == n-1 && last.Addr == top.Addr) {
		return n
	}
	return n - 1
}

// OpenFrames is openFramesLocked under the lock.
func (d *Drainer) OpenFrames(tid int, st *fast.State) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.openFramesLocked(tid, st)
}
