package tracer

import (
	"golang.org/x/sys/unix"

	"rtrace/tracer/ptrace"
)

// heldSignal is a signal rtrace delivers later (fastHold).
type heldSignal struct {
	sig  unix.Signal
	info ptrace.SigInfo
}

// fastHold holds back sig, which th is stopped for, when th is inside a
// stub's critical section: delivered there, the handler's calls would find
// the guard set and go untraced, and a siglongjmp out of the handler would
// leave the guard set for good. The stub stops at the section's end
// (Sites.Held), where fastDeliver delivers it, siginfo included. Faults
// are not held: the faulting instruction would run again first.
func (t *Tracer) fastHold(th *thread, sig unix.Signal) bool {
	st := th.fastView()
	if st == nil || !st.Guarded() || th.proc == nil || th.proc.image.fast == nil {
		return false
	}
	switch sig {
	case unix.SIGSEGV, unix.SIGBUS, unix.SIGILL, unix.SIGFPE, unix.SIGSYS, unix.SIGTRAP, unix.SIGSTOP:
		return false
	}
	var regs unix.PtraceRegs
	if ptrace.GetRegs(th.tid, &regs) != nil {
		return false
	}
	if _, ok := th.proc.image.fast.site(regs.Rip); !ok {
		// The guard is set but the thread is elsewhere: in the handler of
		// a signal that was not held. Held now, this one would wait for
		// the end of that handler at least.
		return false
	}
	h := heldSignal{sig: sig}
	if ptrace.GetSigInfo(th.tid, &h.info) != nil {
		return false
	}
	th.fast.held = append(th.fast.held, h)
	st.Hold()
	resume(th.tid, 0)
	return true
}

// fastDeliver delivers the first signal held for th, which stopped at the
// end of a critical section (Sites.Held): in place of the int3's SIGTRAP,
// with the signal's own siginfo. The handler returns to the stub, which
// stops again while signals are held.
func (t *Tracer) fastDeliver(th *thread) {
	if st := th.fastView(); st != nil && len(th.fast.held) <= 1 {
		st.Release() // the last one goes now
	}
	if len(th.fast.held) == 0 {
		resume(th.tid, 0)
		return
	}
	h := th.fast.held[0]
	th.fast.held = th.fast.held[1:]
	if ptrace.SetSigInfo(th.tid, &h.info) != nil {
		return // it died meanwhile: wait4 reports it
	}
	t.signalInRes(th)
	resume(th.tid, h.sig)
}
