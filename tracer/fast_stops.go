package tracer

import (
	"fmt"

	"golang.org/x/sys/unix"

	"rtrace/internal/uftrace"
	"rtrace/tracer/fast"
	"rtrace/tracer/ptrace"
)

// fastTrap handles an int3 in the shared code at pc; handled is false for
// an int3 elsewhere.
func (t *Tracer) fastTrap(th *thread, regs *unix.PtraceRegs, pc uint64, ts uint64) (handled bool, err error) {
	fi := th.proc.image.fast
	s, ok := fi.site(pc)
	if !ok {
		return false, nil
	}
	switch pc {
	case s.EntryMiss, s.ResMiss:
		// A vfork child whose parent had no state: its calls are not
		// traced (a state made now would be its parent's too). A resource
		// function's stub has entry's frame: it leaves the same way.
		if th.vforked || !t.fastRegister(th, regs.Rcx) {
			ptrace.SetPC(th.tid, s.EntryOut)
		}
	case s.WalkStop:
		t.fastWalkStop(th)
	case s.Held:
		t.fastDeliver(th)
		return true, nil
	case s.ExitStop:
		t.fastExitValue(th, regs, ts)
	case s.ExitMiss:
		if th.fast.fs == nil || !t.fastRegister(th, regs.Rcx) {
			unix.Kill(th.tid, unix.SIGKILL)
			return true, fmt.Errorf("tid %d: a return through rtrace's exit stub, but rtrace holds no state for the thread (pc %#x)", th.tid, pc)
		}
	case s.EntryUnhooked, s.ResUnhooked:
		// A call from a landing pad while an exception unwinds (entry):
		// frames at or below its return address slot are gone, as the int3
		// engine's entry pops them.
		slot := regs.Rsp + 0x40
		ret, err := ptrace.PeekWord(th.tid, slot)
		if err != nil {
			return true, nil
		}
		t.fastPopBelow(th, unwoundBelow(slot, fi.isExit(ret)), ts)
	default:
		unix.Kill(th.tid, unix.SIGKILL)
		return true, fmt.Errorf("tid %d: %w (pc %#x)", th.tid, errNoStack, pc)
	}
	resume(th.tid, 0)
	return true, nil
}

// fastEntry handles a stop at the int3 entry of f (a function the fast
// engine could not detour, setjmp, a personality routine): record it as the
// int3 engine would, or send the thread to f's stub. probe: a USDT probe
// shares the int3, and its EVENT goes inside the call: the tracer records
// the entry itself first.
func (t *Tracer) fastEntry(th *thread, f *fn, regs *unix.PtraceRegs, ts uint64, probe bool) uint64 {
	im := th.proc.image
	if !f.jump && (f.res != nil || (len(f.args) > 0 || len(f.rets) > 0) && !f.argStub || f.reads != 0 || probe && !f.personality) {
		t.fastValues(th, f, regs, ts)
		return 0
	}
	if f.personality || f.jump {
		ret, err := ptrace.PeekWord(th.tid, regs.Rsp)
		if err != nil || f.personality && (ret < im.textLo || ret >= im.textHi) {
			return 0 // the unwinder's calls are not recorded
		}
		if f.jump {
			st := t.fastState(th, regs)
			if st == nil {
				return 0
			}
			d := st.Depth()
			var args []byte
			if len(f.args) > 0 {
				args = t.values(th, f.args, regs)
			}
			t.fastRecord(th, uftrace.Record{Time: ts, Type: uftrace.Entry, Depth: d, Addr: f.addr}, args)
			t.fastRecord(th, uftrace.Record{Time: ts, Type: uftrace.Exit, Depth: d, Addr: f.addr}, t.setjmpReturn(th, f.addr, regs, 0))
			th.setjmp = setjmpCall{rsp: regs.Rsp, addr: f.addr, depth: d}
			return 0
		}
	}
	return f.stub
}

// fastValues does at a stop what a stub does, for a function whose
// arguments are recorded with its entry (the tracer reads them) or whose
// return value is (its frame gets FlagStop: its return stops at ExitStop).
// The thread then goes on at the int3's resume address, past the stub.
func (t *Tracer) fastValues(th *thread, f *fn, regs *unix.PtraceRegs, ts uint64) {
	t.valueStops++
	fi := th.proc.image.fast
	st := t.fastState(th, regs)
	if st == nil || st.Guarded() || len(fi.sites) == 0 {
		return
	}
	ret, err := ptrace.PeekWord(th.tid, regs.Rsp)
	if err != nil {
		return
	}
	if th.unhooked {
		// As the stub's entry_unhooked.
		t.fastPopBelow(th, unwoundBelow(regs.Rsp, fi.isExit(ret)), ts)
	} else if f.res != nil {
		// As res_entry's res_dead: the frames a jump left go, those below
		// this call's slot and the one at it but for a tail call's caller.
		if lo, hi := st.Stack(); regs.Rsp >= lo && regs.Rsp <= hi {
			for st.Depth() > 0 {
				fr := st.Frame(st.Depth() - 1)
				if fr.Slot > regs.Rsp || fr.Slot == regs.Rsp && fi.isExit(ret) || fr.Slot < lo {
					break
				}
				if fr.Slot < regs.Rsp {
					// A live frame a signal interrupted keeps what rtrace
					// left in its slot (its handler on an alternate stack
					// above it).
					if v, err := ptrace.PeekWord(th.tid, fr.Slot); err != nil || v == fr.Ret || fi.isExit(v) {
						break
					}
				}
				t.fastPop(th, st, ts)
			}
		}
	}
	if st.Depth() >= fast.MaxStack {
		return
	}
	var rc *resCall
	if f.res != nil {
		rc = t.fastResEntry(th, st, f, regs, ret)
		if rc == nil && t.funcs == nil {
			return // nested, or nothing to record: it runs untraced
		}
	}
	var flags uint64
	if len(f.rets) > 0 || f.reads != 0 || rc != nil {
		flags = fast.FlagStop
	}
	d := st.Depth()
	if !st.Push(fast.Frame{Ret: ret, Slot: regs.Rsp, Addr: f.addr, Flags: flags}) {
		return
	}
	if err := ptrace.PokeWord(th.tid, regs.Rsp, fi.sites[0].Exit); err != nil {
		st.Pop()
		return
	}
	if rc != nil {
		th.fast.res = &pendingRes{key: frameKey{regs.Rsp, d}, call: rc}
		// The stubs leave the calls nested in it untraced (res_entry).
		st.SetMakingRes(regs.Rsp, uint64(d+1), fi.sites[0].Exit)
		t.resAtEntry(th, rc, regs)
	}
	fastRecoverCaller(th, st)
	var payload []byte
	if len(f.args) > 0 {
		payload = t.values(th, f.args, regs)
	}
	last := st.LastCPU()
	ev := t.recordEntry(th, f, ts, d, payload, &last, t.fastRecord)
	st.SetLastCPU(last)
	if ev != nil {
		if th.fast.reads == nil {
			th.fast.reads = map[frameKey][]uftrace.ReadEvent{}
		}
		th.fast.reads[frameKey{regs.Rsp, d}] = ev
	}
}

// fastExitValue records, at ExitStop, the return of the frame the exit
// stub just popped, with its return value.
func (t *Tracer) fastExitValue(th *thread, regs *unix.PtraceRegs, ts uint64) {
	t.valueStops++
	st := th.fastView()
	if st == nil {
		return
	}
	// fr is popped, still in memory above the top. (-W cpu: the exit stub
	// watched already.)
	fr := st.Frame(st.Depth())
	f := th.proc.image.fnAt(fr.Addr)
	if old, ok := th.fast.reads[frameKey{fr.Slot, fr.Depth}]; ok && f != nil {
		delete(th.fast.reads, frameKey{fr.Slot, fr.Depth})
		recordReads(th, ts, fr.Depth+1, f.reads, old, t.fastRecord)
	}
	st.DoneRes(fr.Slot, uint64(fr.Depth+1))
	if p := th.fast.res; p != nil && p.key == (frameKey{fr.Slot, fr.Depth}) {
		th.fast.res = nil
		if !p.call.reported {
			t.resReport(th, p.call, regs)
		}
	}
	var payload []byte
	if f != nil && len(f.rets) > 0 {
		payload = t.values(th, f.rets, regs)
	}
	t.fastRecord(th, uftrace.Record{Time: ts, Type: uftrace.Exit, Depth: fr.Depth, Addr: fr.Addr}, payload)
}
