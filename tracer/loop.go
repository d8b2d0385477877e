package tracer

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"golang.org/x/sys/unix"

	"rtrace/internal/timeline"
	"rtrace/tracer/bp"
	"rtrace/tracer/ptrace"
)

// debug prints every non-breakpoint stop (RTRACE_DEBUG=1).
var debug = os.Getenv("RTRACE_DEBUG") != ""

// loop waits for tracee stops and handles them until no tracee is left.
// Called on the tracer thread.
func (t *Tracer) loop() error {
	var regs unix.PtraceRegs
	for len(t.threads) > 0 || len(t.procs) > 0 {
		var ws unix.WaitStatus
		var ru unix.Rusage
		tid, ok := 0, false
		var err error
		if tid, ws, ru, ok = takeReaped(); !ok { // an end a helper's wait took
			tid, err = unix.Wait4(-1, &ws, unix.WALL, &ru)
		}
		if err == unix.EINTR {
			continue
		}
		if err == unix.ECHILD {
			break
		}
		if err != nil {
			return fmt.Errorf("waiting for the target: %w", err)
		}
		ts := now()
		th := t.threads[tid]
		if th == nil {
			// A new thread or child can report before its parent's
			// clone/fork event: keep it stopped until the event names it.
			th = &thread{tid: tid}
			t.threads[tid] = th
		}
		switch {
		case ws.Exited() || ws.Signaled():
			t.gone(th, ws, &ru, ts)
		case ws.Stopped():
			if err := t.stopped(th, ws, &regs, ts); err != nil {
				return err
			}
		}
	}
	return nil
}

// gone handles the end of a thread; the end of a process's leader ends the process.
func (t *Tracer) gone(th *thread, ws unix.WaitStatus, ru *unix.Rusage, ts uint64) {
	t.endThread(th, ts)
	t.flush(th)
	delete(t.threads, th.tid)
	if th.proc != nil {
		if u, ok := t.res.(UsageSink); ok && t.procs[th.tid] != nil && th.proc.peakRSS > 0 {
			t.emit(u.Usage(th.tid, th.proc.peakRSS))
		}
		t.sinks(func(s Sink) error { return s.Exit(ts, th.tid) })
	}
	if p := t.procs[th.tid]; p != nil {
		if fi := p.image.fast; fi != nil && !th.vforked {
			t.releaseFast(fi)
		}
		delete(t.procs, th.tid)
		if th.tid == t.root {
			t.result.Status, t.result.Rusage = ws, *ru
		}
	}
}

// unwoundBelow is where the frames an exception unwound end, for a call
// made from a landing pad with its return address at slot: frames at or
// below the slot are gone, but for a tail call (the return address there
// is rtrace's, tail) which keeps the frame whose slot it reuses.
func unwoundBelow(slot uint64, tail bool) uint64 {
	if tail {
		return slot
	}
	return slot + 1
}

// fastEvent handles the events the fast engine asks for (ptraceOptions).
func (t *Tracer) fastEvent(th *thread, event int, ts uint64) {
	switch event {
	case unix.PTRACE_EVENT_VFORK_DONE:
		// The vfork child exec'd or exited: its parent's state is its
		// parent's again, before the parent runs. A child that exited
		// was closed at its exit event: this one is exec'ing.
		for _, c := range t.threads {
			if c.fast.vforkParent == th {
				c.openEnds = true
				t.fastClose(c, ts)
				c.openEnds = false
				t.flush(c)
			}
		}
	case unix.PTRACE_EVENT_EXIT:
		timeline.Mark("exit event %d", th.tid)
		t.noteHWM(th)
		t.noteEnd(th)
		if t.drain == nil {
			return // the int3 engine, for the peak RSS only (ptraceOptions)
		}
		// Close its frames before its TLS, the key of its state, can be
		// reused by a new thread: its table entries now, the rest in the
		// drainer (fastRetire) when it can.
		if !t.fastRetire(th, ts) {
			t.endThread(th, ts)
		}
		t.flush(th)
	}
}

// ptraceEvent returns the PTRACE_EVENT_* of a stop (status >> 16), 0 for
// none. unix.WaitStatus.TrapCause reports events only with SIGTRAP, but a
// group-stop is PTRACE_EVENT_STOP with the stop signal (ptrace(2), "Group-stop").
func ptraceEvent(ws unix.WaitStatus) int { return int(ws>>16) & 0xff }

// resume continues a stopped thread, delivering sig.
func resume(tid int, sig unix.Signal) {
	ptrace.Cont(tid, int(sig)) // ESRCH: it died meanwhile; wait4 reports it
}

// deliver continues th, stopped for sig (0: none), giving the program its
// signal: at once, or once th leaves a stub's critical section (fastHold).
// Every signal rtrace passes on, also those kept while threads were
// parked, goes through here.
func (t *Tracer) deliver(th *thread, sig unix.Signal) {
	if sig != 0 && t.fastHold(th, sig) {
		return
	}
	if sig != 0 {
		t.signalInRes(th)
	}
	resume(th.tid, sig)
}

// signalInRes notes, as th gets a signal, the resource call it
// interrupts: its handler's calls are nested in it, wherever the
// handler's stack lies (State.SignalInRes; the int3 engine's resEntry).
func (t *Tracer) signalInRes(th *thread) {
	if t.res == nil {
		return
	}
	if st := th.fastView(); st != nil {
		st.SignalInRes()
	}
	th.sigRes = 0
	for i := len(th.stack) - 1; i >= 0; i-- {
		if th.stack[i].call != nil {
			th.sigRes = th.stack[i].slot
			break
		}
	}
}

func (t *Tracer) stopped(th *thread, ws unix.WaitStatus, regs *unix.PtraceRegs, ts uint64) error {
	sig := ws.StopSignal()
	event := ptraceEvent(ws)
	th.vforkWait = false // it stopped: out of vfork's wait, if it was in it
	if debug && !(sig == unix.SIGTRAP && event == 0) {
		var r unix.PtraceRegs
		ptrace.GetRegs(th.tid, &r)
		fmt.Fprintf(os.Stderr, "rtrace: debug: tid %d stop sig %v event %d rip %#x rsp %#x\n", th.tid, sig, event, r.Rip, r.Rsp)
	}
	if sig == unix.SIGTRAP && event == 0 {
		return t.trap(th, regs, ts)
	}
	if th.fast.forkNeeded && event == unix.PTRACE_EVENT_STOP {
		// A forked child's first stop, after its parent's fork event.
		th.fast.forkNeeded = false
		t.fastFork(th, th.fast.forkFrames, th.fast.forkRes)
		th.fast.forkFrames = nil
	}
	switch event {
	case unix.PTRACE_EVENT_CLONE, unix.PTRACE_EVENT_FORK, unix.PTRACE_EVENT_VFORK:
		return t.spawned(th, event, ts)
	case unix.PTRACE_EVENT_EXEC:
		return t.execed(th, ts)
	case unix.PTRACE_EVENT_STOP:
		// Group-stop (a stop signal) or the first stop of an auto-attached
		// task. In a group-stop, PTRACE_LISTEN keeps the task stopped until
		// SIGCONT, as it would be without rtrace.
		switch sig {
		case unix.SIGSTOP, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU:
			ptrace.Listen(th.tid)
			if debug {
				fmt.Fprintf(os.Stderr, "rtrace: debug: tid %d group-stop by %v: kept stopped (PTRACE_LISTEN)\n", th.tid, sig)
			}
		default:
			if th.proc != nil {
				if sig == unix.SIGTRAP {
					t.fastStart(th)
				}
				resume(th.tid, 0)
			}
		}
		return nil
	}
	t.fastEvent(th, event, ts)
	if event > 0 {
		resume(th.tid, 0)
		return nil
	}
	// A signal for the program.
	if sig == wakeSignal && t.detachReq.Load() && t.attached {
		t.detachAll(th)
		return nil
	}
	if sig == wakeSignal && ownWake(th.tid) {
		t.closeRequested(th)
		resume(th.tid, 0) // rtrace's, not the program's
		return nil
	}
	if act := t.cfg.Signals[sig]; act != 0 && th.proc != nil {
		t.signalAction(th, act)
		resume(th.tid, 0) // rtrace's, not the program's
		return nil
	}
	if sig == t.cfg.ToggleSignal && t.cfg.Toggle && th.proc != nil {
		if !t.finished {
			t.toggle(th)
		}
		resume(th.tid, 0) // rtrace's, not the program's
		return nil
	}
	if sig == unix.SIGCONT && th.proc != nil && th.proc.swallowCont {
		th.proc.swallowCont = false
		resume(th.tid, 0)
		return nil
	}
	t.deliver(th, sig)
	return nil
}

// trap handles a SIGTRAP: one of rtrace's breakpoints, or the program's own.
func (t *Tracer) trap(th *thread, regs *unix.PtraceRegs, ts uint64) error {
	if th.proc == nil {
		resume(th.tid, unix.SIGTRAP)
		return nil
	}
	if err := ptrace.GetRegs(th.tid, regs); err != nil {
		return nil // the thread died: wait4 reports it
	}
	im := th.proc.image
	pc := regs.Rip - 1
	if im.fast != nil {
		if handled, err := t.fastTrap(th, regs, pc, ts); handled {
			return err
		}
	}
	if im.isRet(pc) {
		return t.ret(th, regs, ts)
	}
	b := im.bps.At(pc)
	if b == nil {
		resume(th.tid, unix.SIGTRAP) // not ours
		return nil
	}
	if b.Kind&bp.Internal != 0 && !th.proc.entered {
		th.proc.entered = true
		t.syncModules(th, ts)
		if b.Kind == bp.Internal {
			if err := removeInternal(th.tid, b); err != nil {
				return fmt.Errorf("removing the entry breakpoint: %w", err)
			}
			im.bps.Remove(pc)
			ptrace.SetPC(th.tid, pc)
			resume(th.tid, 0)
			return nil
		}
	}
	var stub uint64
	if b.Kind&bp.FuncEntry != 0 {
		if im.fast != nil {
			if !im.fast.disabled {
				stub = t.fastEntry(th, &im.funcs[b.Func], regs, ts, b.Kind&bp.Probe != 0)
			}
		} else {
			t.entry(th, b, regs, ts)
		}
	}
	if b.Kind&bp.Hook != 0 {
		t.hook(th, b, regs, ts)
	}
	if b.Kind&bp.Probe != 0 {
		t.probe(th, b, regs, ts)
	}
	if stub != 0 {
		if err := ptrace.SetPC(th.tid, stub); err != nil {
			return nil
		}
	} else if b.Plan.Action != bp.Detoured {
		if err := ptrace.SetPC(th.tid, b.Plan.Resume); err != nil {
			return nil
		}
	}
	resume(th.tid, 0)
	return nil
}

// entry handles a function entry: hijack the return address so the return
// hits the shared return breakpoint, and record the call. A detour's
// trampoline has loaded the return address into r11 and swaps it itself.
func (t *Tracer) entry(th *thread, b *bp.Breakpoint, regs *unix.PtraceRegs, ts uint64) {
	im := th.proc.image
	f := &im.funcs[b.Func]
	ret := regs.R11
	if b.Plan.Action != bp.Detoured {
		var err error
		if ret, err = ptrace.PeekWord(th.tid, regs.Rsp); err != nil {
			return
		}
		if !f.jump {
			if err := ptrace.PokeWord(th.tid, regs.Rsp, im.retAddr); err != nil {
				return
			}
		}
	}
	if th.unhooked {
		// A call from a landing pad while an exception unwinds: the frames
		// at or below its return address slot have been unwound (uftrace's
		// mcount_rstack_reset_exception does the same). A tail call keeps
		// the frame whose slot it reuses: its return address there is
		// already the return breakpoint.
		t.popBelow(th, unwoundBelow(regs.Rsp, im.isRet(ret)), ts)
	}
	// Libraries call a non-PIE executable's PLT stubs too: a stub is the
	// canonical address of a function whose address the executable takes
	// (a destructor that __cxa_end_catch calls, recorded as uftrace
	// does). But the unwinder's calls of the personality routine are not
	// recorded, as uftrace does not.
	hidden := f.personality && (ret < im.textLo || ret >= im.textHi) || t.funcs == nil || !t.on
	if f.res != nil && t.res != nil && !th.unhooked {
		t.popDead(th, regs.Rsp, im.isRet(ret), ts)
	}
	fr, rec := th.enter(f, ret, regs.Rsp, hidden)
	if !f.jump {
		th.recoverCaller()
	}
	if f.res != nil {
		t.resEntry(th, &th.stack[len(th.stack)-1], f, regs, ret)
	}
	if rec {
		var payload []byte
		if len(f.args) > 0 {
			payload = t.values(th, f.args, regs)
		}
		th.stack[len(th.stack)-1].reads = t.recordEntry(th, f, ts, fr.depth, payload, &th.lastCPU, t.record)
	}
	if f.jump {
		r := *regs
		r.Rax = 0 // its first return (setjmpReturn)
		t.exit(th, ts, &r)
		if rec {
			th.setjmp = setjmpCall{rsp: regs.Rsp, addr: f.addr, depth: fr.depth}
		}
	}
}

// popDead ends, at the entry of a resource function whose return address
// is at slot, the frames a jump rtrace could not follow left
// (__builtin_longjmp, a context switch): those whose slot is below it on
// the thread's stack whose slot holds neither rtrace's return address nor
// their own, and the one at it unless the call is a tail call (tail: the
// slot holds rtrace's return address), as the fast engine's res_entry
// does (res.S, res_dead). Their calls went untraced otherwise
// (nested in a call that had ended), and a return would write into their
// slots, live memory of other frames now. Not on another stack (a
// signal's alternate one).
func (t *Tracer) popDead(th *thread, slot uint64, tail bool, ts uint64) {
	if len(th.stack) == 0 || th.stack[len(th.stack)-1].slot > slot || th.stack[len(th.stack)-1].slot == slot && tail {
		return
	}
	if th.stackHi == 0 {
		lo, hi, ok := stackRange(th.proc.pid, th.tid, slot)
		if !ok {
			return
		}
		th.stackLo, th.stackHi = lo, hi
	}
	if slot < th.stackLo || slot > th.stackHi {
		return
	}
	for len(th.stack) > 0 {
		top := th.stack[len(th.stack)-1]
		if top.slot > slot || top.slot == slot && tail || top.slot < th.stackLo {
			return
		}
		// Below this call's slot, a frame whose slot still holds the
		// breakpoint or its return address is a live one a signal
		// interrupted, whose handler runs on an alternate stack above it.
		if top.slot < slot {
			if v, err := ptrace.PeekWord(th.tid, top.slot); err != nil || v == top.ret || th.proc.image.isRet(v) {
				return
			}
		}
		t.exit(th, ts, nil)
	}
}

// ret handles the shared return breakpoint: pop the frame whose return
// address slot the ret instruction just consumed, record the exit and go to
// the real return address.
func (t *Tracer) ret(th *thread, regs *unix.PtraceRegs, ts uint64) error {
	slot := regs.Rsp - 8
	// Frames below this one on the stack were skipped (longjmp, exception
	// unwinding): close them first.
	for len(th.stack) > 1 && th.stack[len(th.stack)-1].slot < slot {
		t.exit(th, ts, nil)
	}
	if len(th.stack) == 0 {
		unix.Kill(th.tid, unix.SIGKILL)
		return fmt.Errorf("tid %d: %w (pc %#x)", th.tid, errNoStack, regs.Rip)
	}
	fr := t.exit(th, ts, regs)
	th.rehook(regs.Rsp) // above the slot the ret consumed
	if err := ptrace.SetPC(th.tid, fr.ret); err != nil {
		return nil
	}
	resume(th.tid, 0)
	return nil
}

// spawned handles clone, fork and vfork events of th.
func (t *Tracer) spawned(th *thread, event int, ts uint64) error {
	msg, err := ptrace.EventMsg(th.tid)
	if err != nil {
		resume(th.tid, 0)
		return nil
	}
	child := int(msg)
	// The stages see the parent's records up to here before the new task:
	// a forked child's stack starts as its parent's is now.
	t.flush(th)
	c := t.threads[child]
	earlyStop := c != nil // it already reported its first stop
	if t.attached {
		t.pinThread(child, th.tid) // it inherited the pinned mask
	}
	switch event {
	case unix.PTRACE_EVENT_CLONE:
		nc := &thread{tid: child, proc: th.proc}
		t.threads[child] = nc
		t.multiThreaded(th.proc) // before either thread runs on
		pid := th.proc.pid
		t.sinks(func(s Sink) error { return s.Task(ts, child, pid) })
		if fi := th.proc.image.fast; fi != nil && otherGroup(child, pid) {
			// clone(CLONE_VM) without CLONE_THREAD and without SIGCHLD:
			// reported as a clone, a process of its own in the same memory.
			nc.vforked = true
			nc.parked = earlyStop // stopped, its stop reported: park must not wait for it
			t.fastDisable(th, fi)
			nc.parked = false
		}
	default: // fork, vfork: the child is a copy, hijacked return addresses included
		p := &process{pid: child, sid: th.proc.sid, image: th.proc.image.fork(), entered: th.proc.entered}
		t.procs[child] = p
		nc := th.clone(child, p)
		nc.vforked = event == unix.PTRACE_EVENT_VFORK
		th.vforkWait = nc.vforked // once resumed below
		if nc.vforked {
			nc.dropCalls()
		}
		// posix_spawn's child runs on a stack of its own: it never returns
		// through its parent's frames, and starts with none.
		fresh := ownStack(th)
		if fresh {
			nc.stack = nil
		}
		t.threads[child] = nc
		ppid := th.proc.pid
		t.sinks(func(s Sink) error { return s.Fork(ts, child, ppid) })
		if fi := th.proc.image.fast; fi != nil {
			// No registration here: a system call run at this stop would be
			// fork's own (the kernel sets rax after it). A parent with no
			// state has no frames.
			st := th.fast.fs
			if event == unix.PTRACE_EVENT_VFORK {
				// The child runs in its parent's memory, with its TLS: its
				// calls write to its parent's state, as its own, until its
				// parent's PTRACE_EVENT_VFORK_DONE.
				nc.vforked = true
				if st != nil {
					st.SetShared(true) // until fastClose gives it back
					nc.fast.vfork, nc.fast.vforkParent = st, th
					for i := range st.Depth() {
						nc.fast.vforkFrames = append(nc.fast.vforkFrames, st.Frame(i))
					}
					if fresh {
						nc.fast.vforkShared = len(nc.fast.vforkFrames) // none in its view
					}
					t.drain.SetOwner(st, child)
				}
			} else if sameVM(th.tid, child) {
				// clone(CLONE_VM) without CLONE_THREAD: a "fork" that shares
				// its parent's memory, and maybe its TLS, so its calls could
				// write to its parent's state while the parent runs.
				p.image = th.proc.image
				nc.vforked = true
				nc.parked = earlyStop // stopped, its stop reported: park must not wait for it
				t.fastDisable(th, fi)
				nc.parked = false
			} else {
				if st != nil && !fresh {
					for i := range st.Depth() {
						nc.fast.forkFrames = append(nc.fast.forkFrames, st.Frame(i))
					}
					nc.fast.forkRes = st.PendingRes() // a resource call's frame among them
				}
				p.image.fast = &fastImage{tableAddr: fi.tableAddr, rdfsbase: fi.rdfsbase, sites: slices.Clip(fi.sites), inherited: append(fi.table.Offsets(), fi.inherited...),
					arena: fi.arena, walkIndex: fi.walkIndex, life: fi.life} // the arena's and lifeline's mappings are inherited
				if fi.arena != nil {
					fi.arena.users++
				}
				if fi.life != nil {
					fi.life.users++
				}
				if earlyStop {
					t.fastFork(nc, nc.fast.forkFrames, nc.fast.forkRes)
					nc.fast.forkFrames = nil
				} else {
					nc.fast.forkNeeded = true
				}
			}
		}
	}
	if earlyStop {
		if event == unix.PTRACE_EVENT_CLONE {
			t.fastStart(t.threads[child])
		}
		resume(child, 0)
	}
	resume(th.tid, 0)
	return nil
}

// ownStack says whether the child of the clone system call th is stopped
// in runs on a stack of its own (posix_spawn's: clone or clone3 given a
// stack), so never returns through th's frames. fork and vfork, and
// glibc's fork (clone without a stack), share the parent's stack: a copy,
// or the same memory.
func ownStack(th *thread) bool {
	var regs unix.PtraceRegs
	if ptrace.GetRegs(th.tid, &regs) != nil {
		return false
	}
	switch regs.Orig_rax {
	case unix.SYS_CLONE:
		return regs.Rsi != 0 // clone(flags, stack, ...): clone(2)
	case unix.SYS_CLONE3:
		// struct clone_args (include/uapi/linux/sched.h): stack at byte 40.
		sp, err := ptrace.PeekWord(th.tid, regs.Rdi+40)
		return err == nil && sp != 0
	}
	return false
}

// execed handles an exec: end the frames of the old image (the exec'ing
// thread's stay open, as uftrace leaves them: leaveOpen), drop the other
// threads (the kernel ended them), and set up the new image.
func (t *Tracer) execed(th *thread, ts uint64) error {
	old := th.proc
	execing := th
	if former, err := ptrace.EventMsg(th.tid); err == nil && int(former) != th.tid {
		// A non-leader thread exec'd: it now has the leader's tid.
		if ft := t.threads[int(former)]; ft != nil {
			t.leaveOpen(ft, ts)
			t.flush(ft)
			delete(t.threads, int(former))
		}
		execing = nil
	}
	if old != nil && old.image.fast != nil && !th.vforked {
		old.image.fast.dead = true // its memory is gone: nothing to write there
		defer t.releaseFast(old.image.fast)
	}
	if execing != nil {
		t.leaveOpen(th, ts)
	} else {
		t.endThread(th, ts) // the leader, ended by another thread's exec
	}
	t.flush(th)
	for tid, o := range t.threads {
		if o.proc == old && tid != th.tid {
			t.endThread(o, ts)
			t.flush(o)
			delete(t.threads, tid)
		}
	}
	th.stack, th.depth = nil, 0
	th.unhooked, th.unwinds, th.jmpbufs, th.setjmp = false, nil, nil, setjmpCall{}
	th.fast.held = nil // the stub that was to deliver them is gone
	th.vforked = false // its own memory now
	th.ending = false  // the old leader's exit event was the old image's
	err := leaveExec(th.tid)
	if errors.Is(err, errEnded) {
		return nil // killed on its way out of execve: the loop gets its end
	}
	if err == nil {
		_, err = t.newImage(th.tid, ts+1)
	}
	if err != nil {
		fmt.Fprintf(t.cfg.Warn, "rtrace: pid %d exec'd a program rtrace cannot trace, left untraced: %v\n", th.tid, err)
		delete(t.procs, th.tid)
		th.proc = nil
		ptrace.Detach(th.tid, 0)
		delete(t.threads, th.tid)
		return nil
	}
	resume(th.tid, 0)
	return nil
}
