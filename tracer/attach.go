package tracer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"rtrace/tracer/bp"
	"rtrace/tracer/ptrace"
)

// wakeSignal is what Detach sends the target to wake the tracer thread,
// which waits in wait4: SIGURG is ignored by default, and a ptraced thread
// reports even ignored signals (kernel/signal.c, sig_ignored). The tracer
// swallows it while a detach is pending.
const wakeSignal = unix.SIGURG

// attachState is what an attach adds to a Tracer.
type attachState struct {
	attached  bool
	target    atomic.Int64 // the attached pid, for Detach
	detachReq atomic.Bool
	detached  bool
	pending   map[int]unix.Signal // signals held while threads are parked
	// pin is the CPU set the tracer and the target run on (Config.Pin);
	// affinity the masks the threads had, put back at the detach.
	pin      *unix.CPUSet
	affinity map[int]unix.CPUSet
}

// Attach seizes every thread of the running process pid, plants the
// breakpoints and traces until Detach is called or the process exits.
// Detaching removes every breakpoint and restores every original byte,
// return address and USDT semaphore: the process goes on unharmed.
func (t *Tracer) Attach(pid int) (*Result, error) {
	t.target.Store(int64(pid))
	t.attached = true
	reparkRemote.Store(true) // the process must outlive rtrace (docs/RELIABILITY.md)
	defer reparkRemote.Store(false)
	if t.cfg.Fast {
		if err := t.startFast(); err != nil {
			return nil, err
		}
	}
	return t.onThread(func() error { return t.attach(pid) })
}

// Detach asks an attached tracer to detach (safe from any goroutine).
// The wake signal goes to every thread: one that blocks it (a daemon's
// signal-handling thread layout) does not report it, another will.
func (t *Tracer) Detach() {
	if t.detachReq.Swap(true) {
		return
	}
	wakeTree(int(t.target.Load()), 0)
}

// wakeTree sends the wake signal to every thread of pid and of its child
// processes, which rtrace follows: a process whose threads all wait where
// no signal is taken (a vfork parent, waiting for its child) cannot start
// the detach, its child can.
func wakeTree(pid, depth int) {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, e := range tasks {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		unix.Tgkill(pid, tid, wakeSignal)
		if depth >= 16 {
			continue
		}
		kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, tid))
		for _, k := range strings.Fields(string(kids)) {
			if kid, err := strconv.Atoi(k); err == nil {
				wakeTree(kid, depth+1)
			}
		}
	}
}

// attach is the whole attached trace, on the tracer thread.
func (t *Tracer) attach(pid int) error {
	t.root, t.attached = pid, true
	t.pending = map[int]unix.Signal{}
	if t.cfg.Pin {
		defer ptrace.PinToCurrentCPU()()
		var set unix.CPUSet
		if unix.SchedGetaffinity(0, &set) == nil {
			t.pin, t.affinity = &set, map[int]unix.CPUSet{}
		}
	}
	if err := t.seizeAll(pid); err != nil {
		t.detachAll(nil)
		return err
	}
	for tid := range t.threads {
		t.pinThread(tid, 0)
	}
	ts := now()
	p, err := t.newImage(pid, ts)
	if err != nil {
		t.detachAll(nil)
		return err
	}
	p.entered = true
	for tid, th := range t.threads {
		th.proc = p
		if tid != pid {
			t.sinks(func(s Sink) error { return s.Task(ts, tid, pid) })
		}
	}
	t.syncModules(t.threads[pid], ts)
	// The jmps went in with every thread parked: one running the first
	// instructions of a function goes on in their copy.
	for _, th := range t.threads {
		t.moveOutOfPatches(th)
	}
	// Every thread registered while parked, not at its first call into
	// the stubs: that stops it at an int3, and a SIGTRAP stop is the one
	// whose signal the kernel delivers, killing the process, should rtrace
	// die before it resumes the thread (docs/RELIABILITY.md).
	for _, th := range t.threads {
		if !th.groupStop { // a group-stopped thread stays so: registered at its first call
			t.fastStart(th)
		}
	}
	if t.cfg.Started != nil {
		t.cfg.Started(pid)
	}
	if t.drain != nil {
		go t.drain.Run()
		defer func() {
			t.emit(t.drain.Close())
			t.result.Lost = t.drain.Stats().Lost
		}()
	}
	if t.detachReq.Load() { // asked while rtrace was setting up
		t.detachAll(nil)
		t.flushAll()
		return nil
	}
	for tid, th := range t.threads {
		th.parked = false
		if th.groupStop {
			ptrace.Listen(tid) // it was stopped (SIGSTOP) before rtrace came
		} else {
			sig := t.pending[tid]
			if sig != 0 && inEventStop(tid) {
				// Its remote system calls left it in an event stop
				// (repark), from which a restart injects no signal.
				unix.Tgkill(pid, tid, sig)
				sig = 0
			}
			t.deliver(th, sig)
		}
		delete(t.pending, tid)
	}
	// A panic in the loop is a bug in rtrace, and it goes on to crash
	// rtrace with its stack; on its way the process is given back, every
	// byte restored, as at any other end of an attach (a launched program
	// dies with rtrace instead: PTRACE_O_EXITKILL).
	done := false
	defer func() {
		if !done && len(t.threads) > 0 {
			t.detachAll(nil)
		}
	}()
	err = t.loop()
	done = true
	if len(t.threads) > 0 {
		t.detachAll(nil)
	}
	t.flushAll()
	return err
}

// pinThread moves a thread of the attached process onto the tracer's CPU
// (a stop is ~15x cheaper there: docs/ptrace-costs.md), keeping the mask
// it had, or, for a thread it started while traced (parent non-zero), its
// parent's, to put back at the detach.
func (t *Tracer) pinThread(tid, parent int) {
	if t.pin == nil {
		return
	}
	if _, ok := t.affinity[tid]; ok {
		return
	}
	var old unix.CPUSet
	if m, ok := t.affinity[parent]; parent != 0 && ok {
		old = m
	} else if unix.SchedGetaffinity(tid, &old) != nil {
		return
	}
	if unix.SchedSetaffinity(tid, t.pin) == nil {
		t.affinity[tid] = old
	}
}

// unpin gives every thread its mask back.
func (t *Tracer) unpin() {
	for tid, m := range t.affinity {
		unix.SchedSetaffinity(tid, &m)
	}
	clear(t.affinity)
}

// seizeAll seizes and stops every thread of pid, again until no new one
// appears (threads the seized ones start are attached by the kernel).
func (t *Tracer) seizeAll(pid int) error {
	for round := 0; ; round++ {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return fmt.Errorf("pid %d: %w", pid, err)
		}
		fresh := 0
		for _, e := range tasks {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || t.threads[tid] != nil {
				continue
			}
			if err := ptrace.Seize(tid, t.ptraceOptions()&^unix.PTRACE_O_EXITKILL); err != nil {
				if tid == pid {
					return fmt.Errorf("attaching to pid %d: %w (see /proc/sys/kernel/yama/ptrace_scope)", pid, err)
				}
				continue // it exited meanwhile
			}
			ptrace.Interrupt(tid)
			t.threads[tid] = &thread{tid: tid}
			fresh++
			if inVfork(pid, tid) {
				// It stops only once its child execs or exits: say what
				// the attach waits for.
				fmt.Fprintf(t.cfg.Warn, "rtrace: pid %d: thread %d waits inside vfork for its child; attaching once the child execs or exits\n", pid, tid)
			}
		}
		if fresh == 0 || round > 100 {
			return nil
		}
		if err := t.park(); err != nil {
			return err
		}
	}
}

// inVfork reports whether thread tid of pid waits in the kernel for a
// vfork child (or clone's CLONE_VFORK, posix_spawn's): uninterruptible,
// inside vfork, clone or clone3 (proc(5): stat's state, syscall).
func inVfork(pid, tid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) || stat[i+2] != 'D' {
		return false
	}
	sc, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/syscall", pid, tid))
	if err != nil {
		return false
	}
	nr, _, _ := strings.Cut(string(sc), " ")
	switch nr {
	case strconv.Itoa(unix.SYS_VFORK), strconv.Itoa(unix.SYS_CLONE), strconv.Itoa(unix.SYS_CLONE3):
		return true
	}
	return false
}

// park waits until every known thread is stopped, keeping the signals
// they stop with for later. Breakpoint traps are handled as usual (the
// interrupt stops the thread after them).
func (t *Tracer) park() error {
	var regs unix.PtraceRegs
	for !t.allParked() {
		var ws unix.WaitStatus
		tid, ok := 0, false
		var err error
		if tid, ws, _, ok = takeReaped(); !ok {
			tid, err = unix.Wait4(-1, &ws, unix.WALL, nil)
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("waiting for the threads to stop: %w", err)
		}
		th := t.threads[tid]
		if th == nil { // a thread started meanwhile: stop it too
			th = &thread{tid: tid}
			t.threads[tid] = th
			ptrace.Interrupt(tid)
		}
		th.vforkWait = false // it stopped: out of vfork's wait, if it was in it
		switch {
		case ws.Exited() || ws.Signaled():
			t.gone(th, ws, &unix.Rusage{}, now())
		case ws.Stopped():
			sig, event := ws.StopSignal(), ptraceEvent(ws)
			switch {
			case event == unix.PTRACE_EVENT_STOP:
				if sig == unix.SIGTRAP && t.afterOwnInt3(th) && trapPending(tid) {
					// It ran one of rtrace's int3 as it was interrupted:
					// get_signal reports the interrupt's stop before it
					// takes the SIGTRAP (kernel/signal.c), which stays
					// pending, its pc past the int3 (an int3's SIGTRAP is
					// never blocked: force_sig). Parked so, it would stay
					// in rtrace's code and get the SIGTRAP after the
					// detach. Let it report the SIGTRAP, handled as in
					// the loop, then stop it again.
					th.trapFirst = true
					resume(tid, 0)
					break
				}
				th.parked, th.trapFirst = true, false
				switch sig {
				case unix.SIGSTOP, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU:
					th.groupStop = true
				}
			// Every ptrace stop but the interrupt's own clears a pending
			// interrupt (kernel/signal.c, ptrace_stop: "any trap clears
			// pending STOP trap"): a thread resumed from one is
			// interrupted again, or it would run on, unparked (a vfork
			// parent interrupted while it waited, reporting
			// PTRACE_EVENT_VFORK_DONE).
			case sig == unix.SIGTRAP && event == 0 && th.proc != nil:
				t.trap(th, &regs, now())
				th.trapFirst = false
				ptrace.Interrupt(tid)
			case event != 0:
				if th.proc != nil && (event == unix.PTRACE_EVENT_CLONE || event == unix.PTRACE_EVENT_FORK || event == unix.PTRACE_EVENT_VFORK) {
					// spawned resumes th, adds the child, and may park and
					// resume every thread itself (fastDisable's
					// whileParked): every thread not parked, th and the
					// child among them, is stopped again.
					t.spawned(th, event, now())
					for tid, th := range t.threads {
						if !th.parked {
							ptrace.Interrupt(tid)
						}
					}
				} else {
					// A thread's exit and a vfork parent's wake-up are
					// handled as in the loop; they then go on.
					t.fastEvent(th, event, now())
					resume(tid, 0)
					if event != unix.PTRACE_EVENT_EXIT {
						ptrace.Interrupt(tid)
					}
				}
			default:
				if sig == wakeSignal && (t.detachReq.Load() || ownWake(tid)) || sig == t.cfg.ToggleSignal && t.cfg.Toggle {
					sig = 0 // rtrace's own (a toggle while parked is dropped)
				}
				t.pending[tid] = sig
				th.parked = true
			}
		}
	}
	return nil
}

// afterOwnInt3 reports whether th, stopped, has its pc right after one of
// rtrace's int3: a breakpoint, a return breakpoint or an int3 of the fast
// engine's code.
func (t *Tracer) afterOwnInt3(th *thread) bool {
	if th.proc == nil {
		return false
	}
	var regs unix.PtraceRegs
	if ptrace.GetRegs(th.tid, &regs) != nil || regs.Rip == 0 {
		return false
	}
	im, pc := th.proc.image, regs.Rip-1
	if b := im.bps.At(pc); b != nil || im.isRet(pc) {
		return true
	}
	if im.fast != nil {
		if _, ok := im.fast.site(pc); ok {
			return true
		}
	}
	return false
}

// trapPending reports whether thread tid has a SIGTRAP pending and not
// blocked (/proc/<tid>/status: SigPnd, the signals sent to the thread
// itself, and SigBlk): resumed, it will report it at once.
func trapPending(tid int) bool {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tid))
	return err == nil && statusMask(status, "SigPnd:", unix.SIGTRAP) && !statusMask(status, "SigBlk:", unix.SIGTRAP)
}

// statusMask reports whether the signal mask on the line key of a /proc
// status text holds sig.
func statusMask(status []byte, key string, sig unix.Signal) bool {
	v, ok := statusValue(status, key)
	if !ok {
		return false
	}
	mask, err := strconv.ParseUint(v, 16, 64)
	return err == nil && sig >= 1 && sig <= 64 && mask&(1<<(sig-1)) != 0
}

// statusValue returns the value on the line key (with its colon) of a
// /proc status text.
func statusValue(status []byte, key string) (string, bool) {
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// allParked reports whether every thread is stopped for good.
func (t *Tracer) allParked() bool {
	for _, th := range t.threads {
		// A vfork parent counts as parked: it runs nothing before its
		// child (which is parked) execs or exits, and no interrupt can
		// stop it before then; waiting for it could wait forever, its
		// child waiting for something that comes only after the detach.
		if !th.parked && !th.vforkWait {
			return false
		}
	}
	return true
}

// detachAll removes rtrace from every traced process and detaches every
// thread: breakpoints out, threads moved out of rtrace's code, hijacked
// return addresses and semaphores restored. first is the thread already
// stopped (nil: none). Called on the tracer thread.
func (t *Tracer) detachAll(first *thread) {
	if t.detached {
		return
	}
	t.detached = true
	for tid := range t.threads {
		if first == nil || tid != first.tid {
			ptrace.Interrupt(tid)
		}
	}
	if first != nil {
		first.parked = true // already stopped: park waits for the others
	}
	if err := t.park(); err != nil {
		fmt.Fprintf(t.cfg.Warn, "rtrace: warning: %v\n", err)
	}
	// Every thread is stopped: no one runs code while it is rewritten.
	for _, p := range t.procs {
		t.disarmAll(p)
		t.fastStall(p)
	}
	for _, th := range t.threads {
		if th.proc != nil {
			if st := th.fastView(); st != nil && len(th.fast.held) > 0 {
				st.Release() // they are sent after the detach
			}
			t.leaveScratch(th)
			t.restoreReturns(th)
		}
	}
	// The frames still open end now, before the states that hold them
	// go (unmapAll): a vfork child's are its parent's state.
	for _, th := range t.threads {
		t.closeAll(th, now())
		t.flush(th)
	}
	for _, p := range t.procs {
		t.unmapAll(p)
	}
	t.unpin()
	for tid := range t.threads {
		sig := t.pending[tid]
		if th := t.threads[tid]; sig != 0 && th.proc != nil && inEventStop(tid) {
			// Left in an event stop (repark), from which no signal is
			// injected: sent again.
			unix.Tgkill(th.proc.pid, tid, sig)
			sig = 0
		}
		if err := ptrace.Detach(tid, int(sig)); err != nil && !errors.Is(err, unix.ESRCH) {
			fmt.Fprintf(t.cfg.Warn, "rtrace: warning: detaching tid %d: %v\n", tid, err)
		}
		if th := t.threads[tid]; th.proc != nil {
			for _, h := range th.fast.held {
				unix.Tgkill(th.proc.pid, tid, h.sig) // the siginfo is lost: the sender is rtrace
			}
		}
	}
	clear(t.threads)
	clear(t.procs)
}

// disarmAll writes back the original bytes of every breakpoint, detour and
// GOT slot of p, and decrements the semaphores rtrace bumped.
func (t *Tracer) disarmAll(p *process) {
	mem, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", p.pid), os.O_RDWR, 0)
	if err != nil {
		fmt.Fprintf(t.cfg.Warn, "rtrace: warning: cannot restore pid %d: %v\n", p.pid, err)
		return
	}
	defer mem.Close()
	im := p.image
	im.bps.All(func(b *bp.Breakpoint) {
		addr, orig := entryPatch(b, false)
		if im.inScratch(addr) {
			return // rtrace's own code (return breakpoints): stays mapped
		}
		if _, err := mem.WriteAt(orig, int64(addr)); err != nil {
			fmt.Fprintf(t.cfg.Warn, "rtrace: warning: restoring %#x in pid %d: %v\n", addr, p.pid, err)
		}
		if b.Func >= 0 && b.Func < len(im.funcs) {
			for _, r := range im.funcs[b.Func].redirects {
				mem.WriteAt(r.orig[:], int64(r.at))
			}
		}
	})
	for _, sem := range im.semaphores {
		addSemaphore(mem, sem, ^uint16(0)) // -1
	}
}

// inScratch reports whether addr lies in memory rtrace mapped.
func (im *image) inScratch(addr uint64) bool {
	for _, s := range im.scratch {
		if addr >= s[0] && addr < s[1] {
			return true
		}
	}
	return false
}

// leaveScratch moves a parked thread out of rtrace's scratch code: one
// about to run a return breakpoint goes to the real return address; one
// at the head of a detour trampoline goes back to the function's entry
// (whose original code is back), with r11 as it was; one elsewhere in a
// trampoline or out-of-line slot runs, one instruction at a time, until it
// is back in the program's code.
func (t *Tracer) leaveScratch(th *thread) {
	im := th.proc.image
	var regs unix.PtraceRegs
	for step := 0; step < 256; step++ {
		if ptrace.GetRegs(th.tid, &regs) != nil || !im.inScratch(regs.Rip) {
			return
		}
		pc := regs.Rip
		if im.isRet(pc) {
			for len(th.stack) > 1 && th.stack[len(th.stack)-1].slot < regs.Rsp-8 {
				t.exit(th, now(), nil)
			}
			if len(th.stack) == 0 {
				return
			}
			fr := t.exit(th, now(), &regs)
			ptrace.SetPC(th.tid, fr.ret)
			continue
		}
		if fi := im.fast; fi != nil {
			if s, ok := fi.site(pc - 1); ok && pc-1 == s.EntryMiss {
				// An unregistered thread at its first call: on untraced.
				ptrace.SetPC(th.tid, s.EntryOut)
				continue
			}
		}
		if b := im.detourAt(pc); b != nil {
			if pc == b.Plan.Trap {
				if r11, err := ptrace.PeekWord(th.tid, regs.Rsp-0x10); err == nil {
					regs.R11 = r11
				}
			}
			regs.Rip = b.Plan.Patch
			if len(b.Plan.Jmp) == 8 {
				// A GOT slot's trampoline (-fno-plt): Patch is the slot, and
				// the call it made goes on to the function the slot held.
				regs.Rip = binary.LittleEndian.Uint64(b.Plan.Orig)
			}
			ptrace.SetRegs(th.tid, &regs)
			continue
		}
		if ptrace.SingleStep(th.tid) != nil {
			return
		}
		var ws unix.WaitStatus
		var ru unix.Rusage
		if _, err := unix.Wait4(th.tid, &ws, unix.WALL, &ru); err != nil || !ws.Stopped() {
			noteReaped(th.tid, ws, &ru, err)
			return
		}
	}
	fmt.Fprintf(t.cfg.Warn, "rtrace: warning: tid %d did not leave rtrace's code at %#x\n", th.tid, regs.Rip)
	th.proc.image.keepScratch = true
}

// detourAt returns the detoured breakpoint whose trampoline head (before
// and at its int3) holds pc.
func (im *image) detourAt(pc uint64) *bp.Breakpoint {
	var found *bp.Breakpoint
	im.bps.All(func(b *bp.Breakpoint) {
		if b.Plan.Action == bp.Detoured && b.Plan.Trap != 0 && pc <= b.Plan.Trap && pc+bp.DetourHeadLen-1 >= b.Plan.Trap {
			found = b
		}
	})
	return found
}

// restoreReturns puts the real return addresses back where rtrace swapped
// in its return breakpoint.
func (t *Tracer) restoreReturns(th *thread) {
	im := th.proc.image
	peek, poke := ptrace.PeekWord, ptrace.PokeWord
	if !th.parked {
		// Not stopped (a vfork parent in the kernel): its memory is
		// written through /proc, which needs no stop.
		mem, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", th.tid), os.O_RDWR, 0)
		if err != nil {
			return
		}
		defer mem.Close()
		peek = func(_ int, addr uint64) (uint64, error) {
			var b [8]byte
			_, err := mem.ReadAt(b[:], int64(addr))
			return binary.LittleEndian.Uint64(b[:]), err
		}
		poke = func(_ int, addr, v uint64) error {
			_, err := mem.WriteAt(binary.LittleEndian.AppendUint64(nil, v), int64(addr))
			return err
		}
	}
	if fi := im.fast; fi != nil && th.fast.fs != nil {
		// Top down: of two frames sharing a slot (a tail call), the lower
		// one's real return address is the one that stays.
		st := th.fast.fs
		for i := st.Depth() - 1; i >= 0; i-- {
			fr := st.Frame(i)
			if fi.isExit(fr.Ret) {
				continue
			}
			if v, err := peek(th.tid, fr.Slot); err == nil && fi.isExit(v) {
				poke(th.tid, fr.Slot, fr.Ret)
			}
		}
	}
	for _, fr := range th.stack {
		if v, err := peek(th.tid, fr.slot); err == nil && im.isRet(v) {
			poke(th.tid, fr.slot, fr.ret)
		}
	}
}
