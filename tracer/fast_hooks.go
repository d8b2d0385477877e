package tracer

import (
	"golang.org/x/sys/unix"

	"rtrace/internal/uftrace"
	"rtrace/tracer/fast"
	"rtrace/tracer/ptrace"
)

// fastHook is hook for the fast engine: the same bookkeeping on the
// in-process shadow stack.
func (t *Tracer) fastHook(th *thread, kind hookKind, regs *unix.PtraceRegs, ts uint64) {
	im := th.proc.image
	st := th.fastView()
	switch kind {
	case hookUnwind:
		if st == nil {
			return
		}
		t.fastPopBelow(th, regs.Rsp, ts)
		fastRealRets(th, st)
		th.backtrace = false // a throw from inside the walk: the catch hijacks
		st.SetReal(false)
		if !th.fromUnwinder(regs.Rsp) { // one unwind (hook)
			th.unwinds = append(th.unwinds, st.Depth())
		}
		th.unhooked = true
		st.SetUnhooked(true)
	case hookCatch:
		if st == nil {
			return
		}
		t.fastPopBelow(th, regs.Rsp+8, ts)
		if !th.unhooked {
			break
		}
		from := 0
		if n := len(th.unwinds); n > 0 {
			th.unwinds = th.unwinds[:n-1]
			if n > 1 {
				from = min(th.unwinds[n-2], st.Depth())
			}
		}
		fastHijackRets(th, st, from)
		th.unhooked = len(th.unwinds) > 0
		st.SetUnhooked(th.unhooked)
	case hookSetjmp:
		d := 0
		if st != nil {
			d = st.Depth()
		}
		th.saveJmpbuf(regs, d)
	case hookLongjmp:
		if th.backtrace && st != nil {
			// Out of a backtrace walk (a handler's siglongjmp): its end
			// hook will not run.
			th.backtrace = false
			st.SetReal(false)
		}
		jb, ok := th.jmpbufs[regs.Rdi]
		if !ok || st == nil {
			break
		}
		var top uint64 // the longjmp call recorded, if it is one
		if n := st.Depth(); n > 0 && st.Frame(n-1).Slot == regs.Rsp {
			top = st.Frame(n - 1).Addr
		}
		shown := longjmpShown(im, jb, top)
		th.openEnds = shown // the skipped frames stay open (hook)
		for st.Depth() > jb.n {
			t.fastPop(th, st, ts)
		}
		th.openEnds = false
		if shown {
			t.fastRecord(th, uftrace.Record{Time: ts, Type: uftrace.Exit, Depth: jb.call.depth, Addr: jb.call.addr}, t.setjmpReturn(th, jb.call.addr, regs, longjmpValue(regs)))
		}
		fastRehook(th, st, regs.Rsp+1)
	case hookBacktrace:
		if st != nil && !th.unhooked && !th.backtrace {
			st.SetReal(true) // a signal handler's calls meanwhile leave them
			fastRealRets(th, st)
			th.backtrace = true
		}
	case hookBacktraceEnd:
		if st != nil && th.backtrace {
			th.backtrace = false
			st.SetReal(false)
			fastRehook(th, st, regs.Rsp) // backtrace's own call, about to return
		}
	case hookLoader:
		t.syncModules(th, ts)
	}
}

// fastRealRets puts the real return addresses of the frames of st, th's
// view, back on th's stack (realRets), over an exit only: a frame a jump
// rtrace could not follow left (kept while its slot looks untouched) may
// have its slot in a live frame's memory now.
func fastRealRets(th *thread, st *fast.State) {
	fi := th.proc.image.fast
	for i := st.Depth() - 1; i >= 0; i-- {
		if fr := st.Frame(i); !fi.isExit(fr.Ret) {
			if v, err := ptrace.PeekWord(th.tid, fr.Slot); err == nil && fi.isExit(v) {
				ptrace.PokeWord(th.tid, fr.Slot, fr.Ret)
			}
		}
	}
}

// fastRecoverCaller puts the real return address of the caller of the
// top frame of st, th's, back (recoverCaller; the entry stub does the
// same).
func fastRecoverCaller(th *thread, st *fast.State) {
	n := st.Depth()
	if n < 2 || st.Shared() || th.unhooked || th.backtrace {
		return
	}
	slot := st.Frame(n - 1).Slot
	if st.Frame(n-2).Slot <= slot {
		return // a tail call, or a dead frame below (as the stub)
	}
	fi := th.proc.image.fast
	for i := n - 2; i >= 0; i-- {
		if fr := st.Frame(i); !fi.isExit(fr.Ret) {
			// Only over an exit (as entry_recover): a frame a jump rtrace
			// could not follow left may have its slot in a live frame.
			if v, err := ptrace.PeekWord(th.tid, fr.Slot); err == nil && fr.Slot > slot && fi.isExit(v) {
				ptrace.PokeWord(th.tid, fr.Slot, fr.Ret)
			}
			return
		}
	}
}

// fastRehook aims the return of st's top frame at the exit stub again
// when its slot is at least min, over its own return address only
// (rehook).
func fastRehook(th *thread, st *fast.State, min uint64) {
	n := st.Depth()
	if n == 0 || th.unhooked || th.backtrace {
		return
	}
	fr := st.Frame(n - 1)
	if fr.Slot < min {
		return
	}
	fi := th.proc.image.fast
	v, err := ptrace.PeekWord(th.tid, fr.Slot)
	if err != nil {
		return
	}
	// What rtrace left there (as REHOOK): the frame's return address, or
	// for a tail-called frame (its return address an exit) that of the
	// frame below it at the same slot.
	for i := n - 1; i >= 0; i-- {
		f := st.Frame(i)
		if f.Slot != fr.Slot {
			return
		}
		if v == f.Ret {
			ptrace.PokeWord(th.tid, fr.Slot, fi.sites[0].Exit)
			return
		}
		if !fi.isExit(f.Ret) {
			return
		}
	}
}

// fastHijackRets aims the return addresses of st's frames from the
// from-th on at the exit trampoline again (hijackRets), over what rtrace
// left only: the frame's return address, or an exit.
func fastHijackRets(th *thread, st *fast.State, from int) {
	fi := th.proc.image.fast
	exit := fi.sites[0].Exit
	for i := from; i < st.Depth(); i++ {
		fr := st.Frame(i)
		if v, err := ptrace.PeekWord(th.tid, fr.Slot); err == nil && (v == fr.Ret || fi.isExit(v)) && v != exit {
			ptrace.PokeWord(th.tid, fr.Slot, exit)
		}
	}
}
