package tracer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"rtrace/tracer/fast"
	"rtrace/tracer/ptrace"
)

// remoteSyscall makes the stopped tracee tid run one system call and
// returns its result, leaving registers and code as they were. The tracee
// executes `syscall; int3` written over its current instruction
// (docs/ptrace-costs.md, "Remote system call"). Called on the tracer thread.
func remoteSyscall(tid int, nr uint64, args ...uint64) (uint64, error) {
	return remoteSyscallAt(tid, remoteGadget{}, nr, args...)
}

// remoteGadget is where a remote system call runs: pc, a `syscall` whose
// int3 is at trap, and saved, where the thread's registers are written
// first (the fast engine's gadget, fast.Sites: should rtrace die in
// between, the thread resumes from them itself). The zero remoteGadget:
// `syscall; int3` written over the current instruction, and restored.
type remoteGadget struct{ pc, trap, saved uint64 }

// remoteSyscallAt is remoteSyscall run at gadget g. Other threads of the
// process may run meanwhile: code they may execute must not change under
// them.
func remoteSyscallAt(tid int, g remoteGadget, nr uint64, args ...uint64) (uint64, error) {
	regs, err := remoteRun(tid, g, nr, args...)
	if err != nil {
		return 0, err
	}
	if int64(regs.Rax) < 0 && int64(regs.Rax) > -4096 {
		return 0, fmt.Errorf("remote syscall %d in tid %d: %w", nr, tid, unix.Errno(-int64(regs.Rax)))
	}
	return regs.Rax, nil
}

// remoteRun runs the stopped tracee tid from g.pc to its trap, with rax
// nr and args in the system call argument registers, as remoteSyscallAt
// does, and returns its registers at the trap: gadget code that makes
// more than one system call (stub.S, newstates) leaves more than rax.
func remoteRun(tid int, g remoteGadget, nr uint64, args ...uint64) (unix.PtraceRegs, error) {
	var saved, regs unix.PtraceRegs
	if err := ptrace.GetRegs(tid, &saved); err != nil {
		return saved, fmt.Errorf("reading registers of tid %d: %w", tid, err)
	}
	pc, trap := saved.Rip, saved.Rip+2
	restoreCode := func() {}
	if g.pc != 0 {
		pc, trap = g.pc, g.trap
		if g.saved != 0 {
			r := resumeRegs(saved)
			b := fast.SavedRegs(r.Rip, r.Rsp, r.Eflags, r.Rax, r.Rbx, r.Rcx, r.Rdx, r.Rsi, r.Rdi, r.Rbp, r.R8, r.R9, r.R10, r.R11, r.R12, r.R13, r.R14, r.R15)
			if err := writeMem(tid, g.saved, b); err != nil {
				return saved, fmt.Errorf("saving the registers of tid %d: %w", tid, err)
			}
		}
	} else {
		orig, err := ptrace.PeekWord(tid, pc)
		if err != nil {
			return saved, fmt.Errorf("reading code of tid %d at %#x: %w", tid, pc, err)
		}
		code := orig&^0xffffff | 0xcc050f // syscall (0f 05); int3 (cc)
		if err := ptrace.PokeWord(tid, pc, code); err != nil {
			return saved, fmt.Errorf("writing code of tid %d at %#x: %w", tid, pc, err)
		}
		restoreCode = func() { ptrace.PokeWord(tid, pc, orig) }
	}
	regs = saved
	regs.Rip = pc
	regs.Rax = nr
	// orig_rax = -1: the kernel must not treat this stop as inside a syscall
	// and "restart" it with the old number (arch/x86/kernel/signal.c).
	regs.Orig_rax = ^uint64(0)
	dst := []*uint64{&regs.Rdi, &regs.Rsi, &regs.Rdx, &regs.R10, &regs.R8, &regs.R9}
	for i, a := range args {
		*dst[i] = a
	}
	if err := ptrace.SetRegs(tid, &regs); err != nil {
		restoreCode()
		return saved, fmt.Errorf("setting registers of tid %d: %w", tid, err)
	}
	ended := false
	defer func() {
		if ended {
			return // nothing left to put back: its end is kept for the loop
		}
		restoreCode() // first: the program's bytes back before anything else
		ptrace.SetRegs(tid, &saved)
		if reparkRemote.Load() {
			repark(tid)
		}
	}()
	if err := runToTrap(tid, trap+1); err != nil {
		ended = errors.Is(err, errEnded)
		return saved, fmt.Errorf("remote syscall in tid %d: %w", tid, err)
	}
	if err := ptrace.GetRegs(tid, &regs); err != nil {
		return saved, fmt.Errorf("reading the remote syscall's result in tid %d: %w", tid, err)
	}
	return regs, nil
}

// resumeRegs are the registers the gadget's resume puts back should
// rtrace die during the call: saved's, but for a thread stopped inside a
// system call the kernel would restart (rax -ERESTARTSYS and its kin,
// linux/errno.h; arch/x86/kernel/signal.c does the same: back to the
// syscall instruction, its number in rax). A thread stopped at an int3
// entry rtrace planted resumes past the int3, in the middle of the
// instruction it covers (docs/RELIABILITY.md: not guaranteed).
func resumeRegs(saved unix.PtraceRegs) unix.PtraceRegs {
	r := saved
	switch rax := int64(r.Rax); {
	case int64(r.Orig_rax) >= 0 && (rax == -512 || rax == -513 || rax == -514): // ERESTARTSYS, ERESTARTNOINTR, ERESTARTNOHAND
		r.Rip -= 2
		r.Rax = r.Orig_rax
	case int64(r.Orig_rax) >= 0 && rax == -516: // ERESTART_RESTARTBLOCK
		r.Rip -= 2
		r.Rax = unix.SYS_RESTART_SYSCALL
	}
	return r
}

// reparkRemote: a remote system call leaves its thread in a
// PTRACE_EVENT_STOP (repark), not in the SIGTRAP stop its int3 makes: set
// while rtrace traces a process it attached to, which must go on should
// rtrace die.
var reparkRemote atomic.Bool

// repark turns the SIGTRAP stop tid is in into a PTRACE_EVENT_STOP: a
// tracee let go from a signal-delivery-stop gets its signal ("If the
// tracee is restarted from signal-delivery-stop, the pending signal is
// injected", ptrace(2)), and SIGTRAP kills a process whose tracer died;
// from an event stop it goes on without one. PTRACE_INTERRUPT, then a
// restart without a signal: the thread stops again before it runs an
// instruction. A signal that comes meanwhile is held and sent again.
func repark(tid int) {
	if ptrace.Interrupt(tid) != nil {
		return
	}
	var held []unix.Signal
	defer func() { resend(tid, held) }()
	for {
		if ptrace.Cont(tid, 0) != nil {
			return
		}
		var ws unix.WaitStatus
		var ru unix.Rusage
		if _, err := unix.Wait4(tid, &ws, unix.WALL, &ru); err != nil || !ws.Stopped() {
			noteReaped(tid, ws, &ru, err)
			return
		}
		switch ptraceEvent(ws) {
		case 0:
			held = append(held, ws.StopSignal())
		default:
			return // the interrupt's stop, or another event's (an exec): no signal stop either way
		}
	}
}

// inEventStop reports whether tid is in a PTRACE_EVENT_STOP (its siginfo's
// si_code says PTRACE_EVENT_STOP << 8, ptrace(2)), not in a
// signal-delivery-stop.
func inEventStop(tid int) bool {
	code, _, ok := stopInfo(tid)
	return ok && code>>8 == unix.PTRACE_EVENT_STOP // si_signo is the stop signal in a group-stop
}

// stopInfo reads the siginfo of the stop tid is in: its si_code and, for
// a signal sent by kill or tgkill, the sender's pid.
func stopInfo(tid int) (code, pid int32, ok bool) {
	var info ptrace.SigInfo
	if ptrace.GetSigInfo(tid, &info) != nil {
		return 0, 0, false
	}
	return int32(binary.LittleEndian.Uint32(info[8:])), int32(binary.LittleEndian.Uint32(info[16:])), true
}

// ownWake reports whether tid stopped for a wake signal rtrace sent
// (Tracer.wake, Detach): tgkill's siginfo names rtrace's pid.
func ownWake(tid int) bool {
	code, pid, ok := stopInfo(tid)
	return ok && code == -6 && int(pid) == os.Getpid() // SI_TKILL, asm-generic/siginfo.h
}

// resend sends tid again the signals held while rtrace ran it to a stop.
func resend(tid int, held []unix.Signal) {
	for _, sig := range held {
		unix.Syscall(unix.SYS_TKILL, uintptr(tid), uintptr(sig), 0)
	}
}

// leaveExec runs a tracee stopped at PTRACE_EVENT_EXEC to its first user
// instruction. At the event stop it is still in execve's return path: the
// kernel writes execve's result into rax after the stop, so a remote
// syscall set up there would run with the wrong number. An int3 at the new
// entry (restored at once) gives a clean user-mode stop.
func leaveExec(tid int) error {
	var regs unix.PtraceRegs
	if err := ptrace.GetRegs(tid, &regs); err != nil {
		return fmt.Errorf("reading registers of tid %d: %w", tid, err)
	}
	pc := regs.Rip
	orig, err := ptrace.PeekWord(tid, pc)
	if err != nil {
		return fmt.Errorf("reading code of tid %d at %#x: %w", tid, pc, err)
	}
	if err := ptrace.PokeWord(tid, pc, orig&^0xff|0xcc); err != nil {
		return fmt.Errorf("writing code of tid %d at %#x: %w", tid, pc, err)
	}
	defer ptrace.PokeWord(tid, pc, orig)
	if err := runToTrap(tid, pc+1); err != nil {
		return fmt.Errorf("leaving exec in tid %d: %w", tid, err)
	}
	return ptrace.SetPC(tid, pc)
}

// runToTrap resumes tid until it stops at the int3 rtrace wrote, which
// leaves rip at want. A signal that arrives first is held back and sent
// again once the thread is there: delivered now, its handler would run in
// the middle of rtrace's code, and could stop at a traced function whose
// stop would be mistaken for this one (these helpers also run at dlopen,
// when the program has handlers). Other ptrace event stops are continued.
func runToTrap(tid int, want uint64) error {
	var held []unix.Signal
	defer func() { resend(tid, held) }()
	for {
		if err := ptrace.Cont(tid, 0); err != nil {
			return err
		}
		var ws unix.WaitStatus
		var ru unix.Rusage
		if _, err := unix.Wait4(tid, &ws, unix.WALL, &ru); err != nil {
			return err
		}
		if !ws.Stopped() {
			noteReaped(tid, ws, &ru, nil)
			return fmt.Errorf("tid %d ended (%v): %w", tid, ws, errEnded)
		}
		if ptraceEvent(ws) != 0 {
			continue
		}
		if sig := ws.StopSignal(); sig != unix.SIGTRAP {
			held = append(held, sig)
			continue
		}
		var regs unix.PtraceRegs
		if err := ptrace.GetRegs(tid, &regs); err != nil {
			return err
		}
		if regs.Rip == want {
			return nil
		}
		held = append(held, unix.SIGTRAP) // not ours: someone sent a SIGTRAP
	}
}

// A helper that waits for one thread (runToTrap, repark, leaveScratch)
// can take that thread's end: the thread was killed, or its process
// exited, while rtrace ran it. The end is kept here for the loop, which
// handles it as if its own wait had taken it (takeReaped): else the
// thread's exit, and its process's when it was the last, would never be
// seen, and rtrace would wait for them.
//
// The stash is the process's: one tracer runs at a time (its waits for
// any child would take another's), and a new session forgets what an
// earlier one left (forgetReaped).
var reaped struct {
	sync.Mutex
	exits []reapedExit
}

type reapedExit struct {
	tid int
	ws  unix.WaitStatus
	ru  unix.Rusage
}

// errEnded: the thread rtrace ran ended meanwhile (noteReaped kept it).
var errEnded = errors.New("the thread ended")

// noteReaped keeps tid's end, with its resource usage, when ws, a wait's
// result (err: none), is one.
func noteReaped(tid int, ws unix.WaitStatus, ru *unix.Rusage, err error) {
	if err != nil || !ws.Exited() && !ws.Signaled() {
		return
	}
	reaped.Lock()
	reaped.exits = append(reaped.exits, reapedExit{tid, ws, *ru})
	reaped.Unlock()
}

// takeReaped returns an end noteReaped kept, oldest first, and forgets it.
func takeReaped() (tid int, ws unix.WaitStatus, ru unix.Rusage, ok bool) {
	reaped.Lock()
	defer reaped.Unlock()
	if len(reaped.exits) == 0 {
		return 0, 0, unix.Rusage{}, false
	}
	e := reaped.exits[0]
	reaped.exits = reaped.exits[1:]
	return e.tid, e.ws, e.ru, true
}

// forgetReaped drops the ends an earlier session kept and did not hand
// its loop (it stopped first: a detach, a failed start).
func forgetReaped() {
	reaped.Lock()
	reaped.exits = nil
	reaped.Unlock()
}
