package tracer

import (
	"rtrace/internal/uftrace"
	"rtrace/tracer/fast"
)

// fastView is the state th's calls write to: its own, or in a vfork
// child its parent's (nil: none yet).
func (th *thread) fastView() *fast.State {
	if th.fast.vfork != nil {
		return th.fast.vfork
	}
	return th.fast.fs
}

// fastRecord hands one record of th, written by the tracer, with its
// payload (nil: none), to the sink at once: after the records th's ring
// holds (the sink drains first).
func (t *Tracer) fastRecord(th *thread, r uftrace.Record, payload []byte) {
	t.record(th, r, payload)
	t.flush(th)
}

// fastExits records at ts the exits of the frames of st from depth lo to
// below depth n, top down, as th's, leaving them on the stack: th's view
// of frames that are not its own to pop (a vfork child's), or that a stub
// may still pop (a process that runs rtrace's code without it).
func (t *Tracer) fastExits(th *thread, st *fast.State, lo, n int, ts uint64) {
	if th.openEnds {
		return
	}
	for d := n - 1; d >= lo; d-- {
		fr := st.Frame(d)
		t.fastRecord(th, uftrace.Record{Time: ts, Type: uftrace.Exit, Depth: fr.Depth, Addr: fr.Addr}, nil)
	}
}

// openFrames is how many of st's frames are open in th's trace
// (drain.Drainer.OpenFrames), its ring drained.
func (t *Tracer) openFrames(th *thread, st *fast.State) int {
	return t.drain.OpenFrames(th.tid, st)
}

// fastPop pops th's top frame, recording its exit at ts (none while
// th.openEnds).
func (t *Tracer) fastPop(th *thread, st *fast.State, ts uint64) fast.Frame {
	fr := st.Pop()
	if th.fast.reads != nil {
		delete(th.fast.reads, frameKey{fr.Slot, fr.Depth}) // gone without its diff
	}
	if !th.openEnds {
		t.fastRecord(th, uftrace.Record{Time: ts, Type: uftrace.Exit, Depth: fr.Depth, Addr: fr.Addr}, nil)
	}
	return fr
}

// fastPopBelow records the exits of th's frames whose slot is below sp.
func (t *Tracer) fastPopBelow(th *thread, sp, ts uint64) {
	st := th.fast.fs
	if st == nil {
		return
	}
	for st.Depth() > 0 && st.Frame(st.Depth()-1).Slot < sp {
		t.fastPop(th, st, ts)
	}
}

// fastClose records the exits of every frame th has open (at its exit, an
// exec, or the end of the trace) and releases its state.
func (t *Tracer) fastClose(th *thread, ts uint64) {
	if th.fast.vfork != nil {
		// A vfork child: its calls went to its parent's state. Close its
		// view of the frames there (its own and those it inherited), drop
		// its own, and give the state back to its parent.
		st := th.fast.vfork
		t.drain.SyncState(st)
		t.fastExits(th, st, min(th.fast.vforkShared, st.Depth()), st.Depth(), ts)
		// The child popped and pushed frames of the state: the parent's
		// are those it had at the vfork.
		st.Truncate(0)
		for _, fr := range th.fast.vforkFrames {
			st.Push(fr)
		}
		if th.fast.vforkParent != nil {
			t.drain.SetOwner(st, th.fast.vforkParent.tid)
		}
		st.SetShared(false)
		th.fast.vfork, th.fast.vforkParent = nil, nil
		return
	}
	st := th.fast.fs
	if st == nil {
		return
	}
	var fi *fastImage
	if th.proc != nil {
		fi = th.proc.image.fast
	}
	if fi != nil && fi.dead {
		// The process no longer uses rtrace (an exec replaced it), or runs
		// rtrace's code without it (a detach that kept it): record the
		// exits, but leave its frames, which a stub may still pop.
		t.drain.SyncState(st)
		t.fastExits(th, st, 0, t.openFrames(th, st), ts)
	} else {
		t.drain.SyncState(st)
		if n := t.openFrames(th, st); n < st.Depth() {
			st.Pop() // a half-done step's frame: no EXIT to write
		}
		for st.Depth() > 0 {
			t.fastPop(th, st, ts)
		}
	}
	t.drain.SyncState(st)
	t.drain.Remove(st)
	th.fast.fs = nil
	if fi != nil && !fi.dead && !fi.ended {
		if t.dropEntries(th, fi) {
			st.Reset() // the drainer no longer reads it
			fi.free = append(fi.free, st)
		} else {
			unmapState(st)
		}
	} else {
		unmapState(st)
	}
}

// fastRetire ends th's state at th's exit event without waiting for its
// ring: its table entries go now, before its TLS can be reused, and the
// drainer finishes the rest (drain.Drainer.Retire). It reports false when th
// needs fastClose instead (no state, a vfork child, a process without
// rtrace's code or ended).
func (t *Tracer) fastRetire(th *thread, ts uint64) bool {
	st := th.fast.fs
	if st == nil || th.fast.vfork != nil || th.proc == nil || len(th.stack) > 0 || len(th.batch) > 0 {
		return false
	}
	fi := th.proc.image.fast
	if fi == nil || fi.dead || fi.ended || t.drain.OwnerOf(st) != th.tid {
		return false // not its own now: lent to a vfork child
	}
	reuse := t.dropEntries(th, fi)
	th.fast.fs = nil
	t.drain.Retire(st, th.tid, ts, fi, reuse, !t.cfg.CloseAtEnd)
	return true
}

// dropEntries takes th's table entries out of its process and reports
// whether they are gone from the process too, so that its state can be
// reused (a thread already gone cannot write them: a new thread on its
// TLS would then share the state).
func (t *Tracer) dropEntries(th *thread, fi *fastImage) bool {
	written := true
	tid := th.tid
	if !t.threadAlive(th) {
		tid = t.liveTid(th.proc, th.tid)
	}
	for _, k := range append(th.fast.fsKeys, th.fast.fsKey) {
		if e, ok := fi.table.Remove(k); ok && (tid == 0 || fi.writeEntry(tid, e) != nil) {
			written = false
		}
	}
	th.fast.fsKeys = nil
	return written
}

// reclaim takes back fi's states that the drainer finished (all of them
// with force): to reuse, or unmapped.
func (t *Tracer) reclaim(fi *fastImage, force bool) {
	reuse, drop := t.drain.Reclaim(fi, force)
	fi.free = append(fi.free, reuse...)
	for _, st := range drop {
		unmapState(st)
	}
}
