package tracer

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"rtrace/internal/trace"
	"rtrace/internal/uftrace"
	"rtrace/tracer/bp"
	"rtrace/tracer/fast"
	"rtrace/tracer/ptrace"
)

// The fast engine (docs/FAST-PATH.md): every traced function's entry leads
// to a stub in the process that records the call in the thread's ring and
// hijacks its return to an exit stub that records the return; no ptrace
// stop per call. rtrace drains the rings, which it maps too, while the
// program runs. Rare events (a thread's first call, setjmp, longjmp,
// exceptions, fork, exec, thread exit) still stop: the tracer then reads
// and changes the stopped thread's state through the same mapping.

// fastImage is the fast engine's state of one address space.
type fastImage struct {
	tableAddr uint64 // the thread table in the process
	rdfsbase  bool   // the code reads the %fs base itself
	table     fast.Table
	sites     []fast.Sites // one shared code copy per scratch mapping
	free      []*fast.State
	chunk     int  // states made by the last newStates
	cloned    bool // a function runs from a copy: return addresses into it
	disabled  bool // no entry is armed any more (a clone(CLONE_VM) child)
	dead      bool // the address space was replaced by an exec
	ended     bool // the process ended: states are unmapped as they close
	warned    bool // a thread could not be registered (the table is full)
	// inherited are the table entries a forked child's copy of the
	// table holds: its parent's at the fork, until fastFork zeroes them.
	inherited []uint64
}

// releaseFast unmaps rtrace's view of the states no thread of fi uses:
// at the end of the process or of its image. The unmapping is left to a
// goroutine: freeing a few rings of touched pages took 1 ms, on the way
// to the end of the trace.
func (t *Tracer) releaseFast(fi *fastImage) {
	t.reclaim(fi, true)
	free := fi.free
	fi.free = nil
	fi.ended = true
	go func() {
		for _, st := range free {
			unmapState(st)
		}
	}()
}

// name of the thread state memfds, written after the table.
const memfdName = "rtrace-thread\x00"

// newFastImage maps the thread table in tid's process, stopped.
func newFastImage(tid int) (*fastImage, error) {
	addr, err := remoteSyscall(tid, unix.SYS_MMAP, 0, fast.TableSize+4096,
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS, ^uint64(0), 0)
	if err != nil {
		return nil, fmt.Errorf("mapping the thread table: %w", err)
	}
	if err := ptrace.WriteText(tid, addr+fast.TableSize, []byte(memfdName)); err != nil {
		return nil, fmt.Errorf("writing the thread table: %w", err)
	}
	return &fastImage{tableAddr: addr, rdfsbase: hasFSGSBase()}, nil
}

// preTLS is where, in the thread table's mapping, a static program's
// first thread finds its %fs base until its C library sets up TLS: a word
// of zeros past the memfd name (newFastImage).
const preTLS = fast.TableSize + 4096 - 8

// setPreTLS gives tid, stopped at the exec of a static program, a %fs base
// when it has none, for stubs that read their key at %fs:0 (no rdfsbase):
// a static C library runs instrumented functions before its TLS exists
// (__libc_setup_tls sets the base with arch_prctl), and their stubs read
// address 0. Pointing the base at a zero word gives them key 0, as
// rdfsbase's 0 does: each such call stops at entry_miss and goes on
// untraced. rtrace's own key for the thread follows (keyOf); nothing of
// the program reads %fs before its C library sets it: it would fault.
func (fi *fastImage) setPreTLS(tid int) error {
	var regs unix.PtraceRegs
	if err := ptrace.GetRegs(tid, &regs); err != nil {
		return err
	}
	if fi.rdfsbase || regs.Fs_base != 0 {
		return nil
	}
	regs.Fs_base = fi.tableAddr + preTLS
	return ptrace.SetRegs(tid, &regs)
}

// keyOf is the key the stubs compute for thread tid, stopped, whose %fs
// base is fs: the base with rdfsbase, else the word at %fs:0 (glibc's TCB
// points to itself; setPreTLS's zero word gives 0). 0 when that word
// cannot be read: the stubs would fault reading it.
func (fi *fastImage) keyOf(tid int, fs uint64) uint64 {
	if fi.rdfsbase || fs == 0 {
		return fs
	}
	w, err := ptrace.PeekWord(tid, fs)
	if err != nil {
		return 0
	}
	return w
}

// hasFSGSBase reports whether the kernel lets user code run rdfsbase
// (AT_HWCAP2 bit HWCAP2_FSGSBASE, arch/x86/include/uapi/asm/hwcap2.h).
// RTRACE_NO_RDFSBASE=1 says no, so that the stubs that read their key at
// %fs:0 run on a machine that has it too (the tests).
func hasFSGSBase() bool {
	if os.Getenv("RTRACE_NO_RDFSBASE") != "" {
		return false
	}
	auxv, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return false
	}
	for i := 0; i+16 <= len(auxv); i += 16 {
		if binary.LittleEndian.Uint64(auxv[i:]) == 26 { // AT_HWCAP2
			return binary.LittleEndian.Uint64(auxv[i+8:])&2 != 0
		}
	}
	return false
}

// isExit reports whether addr is one of the image's exit stubs.
func (fi *fastImage) isExit(addr uint64) bool {
	for _, s := range fi.sites {
		if s.Exit == addr {
			return true
		}
	}
	return false
}

// site returns the shared code copy holding the int3 at pc, if any.
func (fi *fastImage) site(pc uint64) (fast.Sites, bool) {
	for _, s := range fi.sites {
		if pc >= s.Base && pc < s.Base+fast.CodeSize {
			return s, true
		}
	}
	return fast.Sites{}, false
}

// writeEntry writes a table entry into the process of tid (any live
// thread of it, stopped or not): the state first, so that a thread finding
// the key finds its state.
func (fi *fastImage) writeEntry(tid int, e fast.Entry) error {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], e.State)
	if err := writeMem(tid, fi.tableAddr+e.Off+8, b[:]); err != nil {
		return err
	}
	binary.LittleEndian.PutUint64(b[:], e.Key)
	return writeMem(tid, fi.tableAddr+e.Off, b[:])
}

// clearAllOver is the number of entries past which clearTable writes the
// whole table at once instead of each entry.
const clearAllOver = 64

// clearTable zeroes the entries at offsets offs of the thread table at
// table in tid's process: a forked child's copy, whose other entries are
// zeros. Only those: zeroing the whole 1 MiB broke copy-on-write page by
// page, 1 MiB of the child's memory and a fault per 4 KiB
// (docs/FAST-PATH.md); but the whole table in one write once the entries
// are many.
func clearTable(tid int, table uint64, offs []uint64) error {
	if len(offs) > clearAllOver {
		return writeMem(tid, table, make([]byte, fast.TableSize))
	}
	if len(offs) == 0 {
		return nil
	}
	mem, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", tid), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer mem.Close()
	var zero [16]byte
	for _, off := range offs {
		if _, err := mem.WriteAt(zero[:], int64(table+off)); err != nil {
			return err
		}
	}
	return nil
}

// writeMem writes b at addr in the memory of thread tid's process
// (/proc/<tid>/mem: one system call, whatever the size).
func writeMem(tid int, addr uint64, b []byte) error {
	mem, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", tid), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer mem.Close()
	_, err = mem.WriteAt(b, int64(addr))
	return err
}

// threadAlive reports whether th's memory is still reachable through it.
func (t *Tracer) threadAlive(th *thread) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d/mem", th.tid))
	return err == nil && t.threads[th.tid] == th
}

// liveTid returns a thread of p other than except that rtrace still
// traces (0: none).
func (t *Tracer) liveTid(p *process, except int) int {
	for tid, th := range t.threads {
		if th.proc == p && tid != except {
			return tid
		}
	}
	return 0
}

// gadget is where a thread runs rtrace's system calls: in the
// executable's scratch mapping, which holds the first shared code copy.
func (fi *fastImage) gadget() uint64 { return fi.sites[0].Base - 16 + gadgetOff }

// newStates makes n thread states in tid's process, stopped: one memfd
// the process maps shared (not inherited by a fork) and rtrace maps too.
// Five system calls in the process make a state ready: made by the chunk,
// the states of a program that starts threads cost them once per chunk.
// With populate, the process's mapping is populated (MAP_POPULATE): a
// thread's first pass through its ring otherwise takes a page fault per
// 4 KiB, 290 per state, which on the bench's VM cost 13 ms of the
// target's CPU in a record of fib(25) over 4 threads (perf, minor-faults
// and cpu-clock); populated in the mmap, the record took 5-10% less. It
// commits the memory of every state of the chunk, used or not, so only
// the chunks of 2 and 4 are (fastRegister): the first state of a process
// is not (most processes have no other thread, many a fork's child execs
// soon: populating every child's ring made 200 forks 33% slower), nor
// the chunks of 8 of a program with many threads, whose idle ones would
// hold 1.1 MiB each (docs/FAST-PATH.md). rtrace's own mapping is not
// populated: that took the tracer thread 5 ms in the 4-thread record,
// and its drain's read faults map 16 pages each (fault-around).
func (fi *fastImage) newStates(tid, pid, n int, populate bool) ([]*fast.State, error) {
	remoteSyscall := func(tid int, nr uint64, args ...uint64) (uint64, error) {
		return remoteSyscallAt(tid, fi.gadget(), nr, args...)
	}
	size := uint64(n) * fast.StateSize
	fd, err := remoteSyscall(tid, unix.SYS_MEMFD_CREATE, fi.tableAddr+fast.TableSize, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	defer remoteSyscall(tid, unix.SYS_CLOSE, fd)
	if _, err := remoteSyscall(tid, unix.SYS_FTRUNCATE, fd, size); err != nil {
		return nil, fmt.Errorf("ftruncate: %w", err)
	}
	f, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/%d", pid, fd), os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Not unix.Mmap: each state is unmapped on its own (unmapState).
	p, err := unix.MmapPtr(int(f.Fd()), 0, nil, uintptr(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping the thread states: %w", err)
	}
	mem := unsafe.Slice((*byte)(p), size)
	flags := uint64(unix.MAP_SHARED)
	if populate {
		flags |= unix.MAP_POPULATE
	}
	addr, err := remoteSyscall(tid, unix.SYS_MMAP, 0, size, unix.PROT_READ|unix.PROT_WRITE, flags, fd, 0)
	if err != nil {
		unix.MunmapPtr(p, uintptr(size))
		return nil, fmt.Errorf("mapping the thread states: %w", err)
	}
	remoteSyscall(tid, unix.SYS_MADVISE, addr, size, unix.MADV_DONTFORK)
	states := make([]*fast.State, n)
	for i := range states {
		off := uint64(i) * fast.StateSize
		states[i] = fast.NewState(mem[off:off+fast.StateSize:off+fast.StateSize], addr+off)
	}
	return states, nil
}

// unmapState takes rtrace's view of st away.
func unmapState(st *fast.State) {
	mem := st.Mem()
	unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(mem)), uintptr(len(mem)))
}

// fastRegister gives th, stopped, a state under key: a freed one or a new
// one. It returns false when th cannot be registered (its calls then run
// untraced).
func (t *Tracer) fastRegister(th *thread, key uint64) bool {
	fi := th.proc.image.fast
	if fi.disabled {
		return false
	}
	if th.fs != nil {
		// Its %fs base changed (arch_prctl): the same state, frames
		// included, under the new key too. The old one stays: the thread
		// may set it back and return through frames pushed under either.
		e, ok := fi.table.Insert(key, th.fs.Addr)
		if !ok || fi.writeEntry(th.tid, e) != nil {
			return false
		}
		th.fsKeys = append(th.fsKeys, key)
		return true
	}
	if len(fi.free) == 0 {
		t.reclaim(fi, false)
	}
	if len(fi.free) == 0 {
		// The first thread's state alone: most programs have no other.
		// Then chunks of 2, 4, up to 8; those of 2 and 4 populated.
		n := min(max(1, 2*fi.chunk), 8)
		states, err := fi.newStates(th.tid, th.proc.pid, n, n > 1 && n < 8)
		if err != nil {
			if !t.warnedState {
				t.warnedState = true
				fmt.Fprintf(t.cfg.Warn, "rtrace: warning: tid %d: cannot make its trace buffer, its calls are not traced: %v\n", th.tid, err)
			}
			return false
		}
		fi.chunk = n
		slices.Reverse(states) // taken from the end: in address order
		fi.free = append(fi.free, states...)
	}
	st := fi.free[len(fi.free)-1]
	fi.free = fi.free[:len(fi.free)-1]
	e, ok := fi.table.Insert(key, st.Addr)
	if !ok {
		fi.free = append(fi.free, st)
		if key != 0 && !fi.warned {
			fi.warned = true
			fmt.Fprintf(t.cfg.Warn, "rtrace: warning: pid %d: the fast engine's thread table is full: new threads run untraced\n", th.proc.pid)
		}
		return false
	}
	if err := fi.writeEntry(th.tid, e); err != nil {
		fi.table.Remove(key)
		fi.free = append(fi.free, st)
		return false
	}
	st.SetWatch(t.cfg.WatchCPU)
	th.fs, th.fsKey = st, key
	t.drain.add(st, th.tid)
	return true
}

// fastState returns th's state, registering th under its %fs base when it
// has none yet (a thread stopped before its first fast call).
func (t *Tracer) fastState(th *thread, regs *unix.PtraceRegs) *fast.State {
	if th.fastView() == nil {
		t.fastRegister(th, th.proc.image.fast.keyOf(th.tid, regs.Fs_base))
	}
	return th.fastView()
}

// unmapAll takes out of p, at a detach, what rtrace mapped there: the
// scratch mappings and, with the fast engine, every thread state and the
// table. Every thread is parked, out of rtrace's code, its return
// addresses restored. A thread inside a stub's critical section (its guard
// set: a signal handler interrupted it) would come back to its state: then
// nothing is unmapped.
func (t *Tracer) unmapAll(p *process) {
	im := p.image
	fi := im.fast
	if fi != nil && fi.dead {
		return
	}
	var tid int
	var states []*fast.State
	if fi != nil {
		t.reclaim(fi, true)
		states = slices.Clone(fi.free)
	}
	for _, th := range t.threads {
		if th.proc == p && th.vforked {
			return // its memory is its parent's: the parent's detach decides
		}
		if th.proc == p {
			if th.fs != nil {
				states = append(states, th.fs)
			}
			// The system calls run in a thread stopped outside a system
			// call, or inside one the kernel may restart: one interrupted
			// inside vfork, say, would run it again when its registers are
			// put back (a second child).
			var regs unix.PtraceRegs
			if tid == 0 && ptrace.GetRegs(th.tid, &regs) == nil && restartable(regs.Orig_rax) {
				tid = th.tid
			}
		}
	}
	guarded := false
	for _, st := range states {
		guarded = guarded || st.Guarded()
	}
	if tid == 0 || guarded || im.keepScratch || fi != nil && fi.cloned || t.stacksRefer(p, im.scratch, im.rets) {
		// A thread inside a stub, a return address or a signal frame's pc
		// in rtrace's code (a call made from a function's copy, a handler
		// that interrupted a trampoline): the code stays, with the table
		// and the states it reads, and runs without rtrace.
		fmt.Fprintf(t.cfg.Warn, "rtrace: warning: pid %d: rtrace's memory stays mapped (a thread may still run or return into rtrace's code, or none was outside a system call to unmap it)\n", p.pid)
		t.neutralize(p)
		if fi != nil {
			fi.dead = true // its table entries stay: a stub may still look them up
		}
		return
	}
	t.drain.sync()
	munmap := func(addr, size uint64) {
		if _, err := remoteSyscall(tid, unix.SYS_MUNMAP, addr, size); err != nil {
			fmt.Fprintf(t.cfg.Warn, "rtrace: warning: pid %d: unmapping rtrace's memory at %#x: %v\n", p.pid, addr, err)
		}
	}
	for _, st := range states {
		munmap(st.Addr, fast.StateSize)
	}
	if fi != nil {
		munmap(fi.tableAddr, fast.TableSize+4096)
		fi.dead = true // nothing more is written into the process
	}
	for _, s := range im.scratch {
		munmap(s[0], s[1]-s[0])
	}
	im.scratch = nil
}

// neutralize makes the int3 engine's trampolines, which stay mapped after
// a detach, run without rtrace: their int3 and the swap of the return
// address become nops (single-byte ones: a thread may resume at any of
// them), so a thread that comes back to one (a signal handler returning)
// runs the displaced instructions and goes back to the function.
func (t *Tracer) neutralize(p *process) {
	mem, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", p.pid), os.O_WRONLY, 0)
	if err != nil {
		return
	}
	defer mem.Close()
	nops := bytes.Repeat([]byte{0x90}, 1+7+4) // int3; lea ret(%rip),%r11; mov %r11,(%rsp)
	p.image.bps.All(func(b *bp.Breakpoint) {
		if b.Plan.Action == bp.Detoured && b.Plan.Trap != 0 {
			mem.WriteAt(nops, int64(b.Plan.Trap))
		}
	})
}

// restartable reports whether a thread stopped inside system call nr (or
// outside any, -1) may run rtrace's system calls: the kernel restarts nr
// when its registers are put back, harmless but for the calls that make a
// process or replace one.
func restartable(nr uint64) bool {
	switch nr {
	case unix.SYS_CLONE, unix.SYS_CLONE3, unix.SYS_FORK, unix.SYS_VFORK, unix.SYS_EXECVE, unix.SYS_EXECVEAT:
		return false
	}
	return true
}

// stacksRefer reports whether a word on the stack of a thread of p, from
// its stack pointer to the end of the mapping holding it (4 MiB at most),
// lies in one of ranges: a return address or a signal frame's saved pc.
// The return breakpoints (rets) do not count: every return hijacked to
// one was put back (restoreReturns), so a copy left is a stale word in a
// frame's unwritten slot (a deeper call's return address, from before),
// which TestAttachDetachLoop met under load; and a return to one after a
// detach would hit its int3 whether the mapping stays or not.
func (t *Tracer) stacksRefer(p *process, ranges [][2]uint64, rets []uint64) bool {
	if len(ranges) == 0 {
		return false
	}
	maps, err := readMaps(p.pid)
	if err != nil {
		return true
	}
	mm, err := uftrace.ParseMaps(bytes.NewReader(maps))
	if err != nil {
		return true
	}
	for tid, th := range t.threads {
		if th.proc != p {
			continue
		}
		var regs unix.PtraceRegs
		if ptrace.GetRegs(tid, &regs) != nil {
			continue
		}
		end := regs.Rsp
		for _, m := range mm {
			if regs.Rsp >= m.Start && regs.Rsp < m.End {
				end = min(m.End, regs.Rsp+4<<20)
			}
		}
		buf := make([]byte, end-regs.Rsp)
		if ptrace.ReadMem(tid, regs.Rsp, buf) != nil {
			return true
		}
		for i := 0; i+8 <= len(buf); i += 8 {
			v := binary.LittleEndian.Uint64(buf[i:])
			for _, r := range ranges {
				if v >= r[0] && v < r[1] && !slices.Contains(rets, v) {
					return true
				}
			}
		}
	}
	return false
}

// fastStall makes the threads of p that wait for room in their rings give
// up at once (a detach must step them out of rtrace's code).
func (t *Tracer) fastStall(p *process) {
	fi := p.image.fast
	if fi == nil {
		return
	}
	for _, th := range t.threads {
		if th.proc == p && th.fs != nil {
			th.fs.Stall()
		}
	}
}

// fastTrap handles an int3 in the shared code at pc; handled is false for
// an int3 elsewhere.
func (t *Tracer) fastTrap(th *thread, regs *unix.PtraceRegs, pc uint64, ts uint64) (handled bool, err error) {
	fi := th.proc.image.fast
	s, ok := fi.site(pc)
	if !ok {
		return false, nil
	}
	switch pc {
	case s.EntryMiss:
		// A vfork child whose parent had no state: its calls are not
		// traced (a state made now would be its parent's too).
		if th.vforked || !t.fastRegister(th, regs.Rcx) {
			ptrace.SetPC(th.tid, s.EntryOut)
		}
	case s.Held:
		t.fastDeliver(th)
		return true, nil
	case s.ExitStop:
		t.fastExitValue(th, regs, ts)
	case s.ExitMiss:
		if th.fs == nil || !t.fastRegister(th, regs.Rcx) {
			unix.Kill(th.tid, unix.SIGKILL)
			return true, fmt.Errorf("tid %d: a return through rtrace's exit stub, but rtrace holds no state for the thread (pc %#x)", th.tid, pc)
		}
	case s.EntryUnhooked:
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
	th.held = append(th.held, h)
	st.Hold()
	resume(th.tid, 0)
	return true
}

// fastDeliver delivers the first signal held for th, which stopped at the
// end of a critical section (Sites.Held): in place of the int3's SIGTRAP,
// with the signal's own siginfo. The handler returns to the stub, which
// stops again while signals are held.
func (t *Tracer) fastDeliver(th *thread) {
	if st := th.fastView(); st != nil && len(th.held) <= 1 {
		st.Release() // the last one goes now
	}
	if len(th.held) == 0 {
		resume(th.tid, 0)
		return
	}
	h := th.held[0]
	th.held = th.held[1:]
	if ptrace.SetSigInfo(th.tid, &h.info) != nil {
		return // it died meanwhile: wait4 reports it
	}
	resume(th.tid, h.sig)
}

// fastEntry handles a stop at the int3 entry of f (a function the fast
// engine could not detour, setjmp, a personality routine): record it as the
// int3 engine would, or send the thread to f's stub. probe: a USDT probe
// shares the int3, and its EVENT goes inside the call: the tracer records
// the entry itself first.
func (t *Tracer) fastEntry(th *thread, f *fn, regs *unix.PtraceRegs, ts uint64, probe bool) uint64 {
	im := th.proc.image
	if len(f.args) > 0 || len(f.rets) > 0 || f.reads != 0 || probe && !f.jump && !f.personality {
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
			t.fastRecord(th, uftrace.Record{Time: ts, Type: uftrace.Entry, Depth: d, Addr: f.addr}, nil)
			t.fastRecord(th, uftrace.Record{Time: ts, Type: uftrace.Exit, Depth: d, Addr: f.addr}, nil)
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
	fi := th.proc.image.fast
	st := t.fastState(th, regs)
	if st == nil || st.Guarded() || st.Depth() >= fast.MaxStack || len(fi.sites) == 0 {
		return
	}
	ret, err := ptrace.PeekWord(th.tid, regs.Rsp)
	if err != nil {
		return
	}
	if th.unhooked {
		// As the stub's entry_unhooked.
		t.fastPopBelow(th, unwoundBelow(regs.Rsp, fi.isExit(ret)), ts)
	}
	var flags uint64
	if len(f.rets) > 0 || f.reads != 0 {
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
	fastRecoverCaller(th, st)
	var payload []byte
	if len(f.args) > 0 {
		payload = t.values(th, f.args, regs)
	}
	last := st.LastCPU()
	ev := t.recordEntry(th, f, ts, d, payload, &last, t.fastRecord)
	st.SetLastCPU(last)
	if ev != nil {
		if th.fastReads == nil {
			th.fastReads = map[frameKey][]uftrace.ReadEvent{}
		}
		th.fastReads[frameKey{regs.Rsp, d}] = ev
	}
}

// fastExitValue records, at ExitStop, the return of the frame the exit
// stub just popped, with its return value.
func (t *Tracer) fastExitValue(th *thread, regs *unix.PtraceRegs, ts uint64) {
	st := th.fastView()
	if st == nil {
		return
	}
	// fr is popped, still in memory above the top. (-W cpu: the exit stub
	// watched already.)
	fr := st.Frame(st.Depth())
	f := th.proc.image.fnAt(fr.Addr)
	if old, ok := th.fastReads[frameKey{fr.Slot, fr.Depth}]; ok && f != nil {
		delete(th.fastReads, frameKey{fr.Slot, fr.Depth})
		recordReads(th, ts, fr.Depth+1, f.reads, old, t.fastRecord)
	}
	var payload []byte
	if f != nil && len(f.rets) > 0 {
		payload = t.values(th, f.rets, regs)
	}
	t.fastRecord(th, uftrace.Record{Time: ts, Type: uftrace.Exit, Depth: fr.Depth, Addr: fr.Addr}, payload)
}

// fastView is the state th's calls write to: its own, or in a vfork
// child its parent's (nil: none yet).
func (th *thread) fastView() *fast.State {
	if th.vfork != nil {
		return th.vfork
	}
	return th.fs
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
// (drainer.openFramesLocked), its ring drained.
func (t *Tracer) openFrames(th *thread, st *fast.State) int {
	t.drain.mu.Lock()
	defer t.drain.mu.Unlock()
	return t.drain.openFramesLocked(th.tid, st)
}

// fastPop pops th's top frame, recording its exit at ts (none while
// th.openEnds).
func (t *Tracer) fastPop(th *thread, st *fast.State, ts uint64) fast.Frame {
	fr := st.Pop()
	if th.fastReads != nil {
		delete(th.fastReads, frameKey{fr.Slot, fr.Depth}) // gone without its diff
	}
	if !th.openEnds {
		t.fastRecord(th, uftrace.Record{Time: ts, Type: uftrace.Exit, Depth: fr.Depth, Addr: fr.Addr}, nil)
	}
	return fr
}

// fastPopBelow records the exits of th's frames whose slot is below sp.
func (t *Tracer) fastPopBelow(th *thread, sp, ts uint64) {
	st := th.fs
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
	if th.vfork != nil {
		// A vfork child: its calls went to its parent's state. Close its
		// view of the frames there (its own and those it inherited), drop
		// its own, and give the state back to its parent.
		st := th.vfork
		t.drain.syncState(st)
		t.fastExits(th, st, min(th.vforkShared, st.Depth()), st.Depth(), ts)
		// The child popped and pushed frames of the state: the parent's
		// are those it had at the vfork.
		st.Truncate(0)
		for _, fr := range th.vforkFrames {
			st.Push(fr)
		}
		if th.vforkParent != nil {
			t.drain.setOwner(st, th.vforkParent.tid)
		}
		st.SetShared(false)
		th.vfork, th.vforkParent = nil, nil
		return
	}
	st := th.fs
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
		t.drain.syncState(st)
		t.fastExits(th, st, 0, t.openFrames(th, st), ts)
	} else {
		t.drain.syncState(st)
		if n := t.openFrames(th, st); n < st.Depth() {
			st.Pop() // a half-done step's frame: no EXIT to write
		}
		for st.Depth() > 0 {
			t.fastPop(th, st, ts)
		}
	}
	t.drain.syncState(st)
	t.drain.remove(st)
	th.fs = nil
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
// drainer finishes the rest (drainer.retire). It reports false when th
// needs fastClose instead (no state, a vfork child, a process without
// rtrace's code or ended).
func (t *Tracer) fastRetire(th *thread, ts uint64) bool {
	st := th.fs
	if st == nil || th.vfork != nil || th.proc == nil || len(th.stack) > 0 || len(th.batch) > 0 {
		return false
	}
	fi := th.proc.image.fast
	if fi == nil || fi.dead || fi.ended || t.drain.ownerOf(st) != th.tid {
		return false // not its own now: lent to a vfork child
	}
	reuse := t.dropEntries(th, fi)
	th.fs = nil
	t.drain.retire(st, th.tid, ts, fi, reuse)
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
	for _, k := range append(th.fsKeys, th.fsKey) {
		if e, ok := fi.table.Remove(k); ok && (tid == 0 || fi.writeEntry(tid, e) != nil) {
			written = false
		}
	}
	th.fsKeys = nil
	return written
}

// reclaim takes back fi's states that the drainer finished (all of them
// with force): to reuse, or unmapped.
func (t *Tracer) reclaim(fi *fastImage, force bool) {
	reuse, drop := t.drain.reclaim(fi, force)
	fi.free = append(fi.free, reuse...)
	for _, st := range drop {
		unmapState(st)
	}
}

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
		th.unwinds = append(th.unwinds, st.Depth())
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
			t.fastRecord(th, uftrace.Record{Time: ts, Type: uftrace.Exit, Depth: jb.call.depth, Addr: jb.call.addr}, nil)
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
// view, back on th's stack (realRets).
func fastRealRets(th *thread, st *fast.State) {
	fi := th.proc.image.fast
	for i := st.Depth() - 1; i >= 0; i-- {
		if fr := st.Frame(i); !fi.isExit(fr.Ret) {
			ptrace.PokeWord(th.tid, fr.Slot, fr.Ret)
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
			if fr.Slot > slot {
				ptrace.PokeWord(th.tid, fr.Slot, fr.Ret)
			}
			return
		}
	}
}

// fastRehook aims the return of st's top frame at the exit stub again
// when its slot is at least min (rehook).
func fastRehook(th *thread, st *fast.State, min uint64) {
	if n := st.Depth(); n > 0 && !th.unhooked && !th.backtrace && st.Frame(n-1).Slot >= min {
		ptrace.PokeWord(th.tid, st.Frame(n-1).Slot, th.proc.image.fast.sites[0].Exit)
	}
}

// fastHijackRets aims the return addresses of st's frames from the
// from-th on at the exit trampoline again (hijackRets).
func fastHijackRets(th *thread, st *fast.State, from int) {
	exit := th.proc.image.fast.sites[0].Exit
	for i := from; i < st.Depth(); i++ {
		ptrace.PokeWord(th.tid, st.Frame(i).Slot, exit)
	}
}

// otherGroup reports whether task tid is in another thread group than
// pid's (false when unknown).
func otherGroup(tid, pid int) bool {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tid))
	if err != nil {
		return false
	}
	v, ok := statusValue(status, "Tgid:")
	if !ok {
		return false
	}
	n, err := strconv.Atoi(v)
	return err == nil && n != pid
}

// sameVM reports whether two tasks share their memory
// (kcmp(2), KCMP_VM).
func sameVM(a, b int) bool {
	r, _, errno := unix.Syscall6(unix.SYS_KCMP, uintptr(a), uintptr(b), 1 /* KCMP_VM (include/uapi/linux/kcmp.h) */, 0, 0, 0)
	return errno == 0 && r == 0
}

// fastDisable takes out every entry of th's address space, with every
// thread parked, for good: a second process shares the memory, and the
// stubs cannot tell its threads from its parent's. Frames already pushed
// return through the exit stub as before.
func (t *Tracer) fastDisable(th *thread, fi *fastImage) {
	if fi.disabled {
		return
	}
	fi.disabled = true
	fmt.Fprintf(t.cfg.Warn, "rtrace: warning: pid %d shares its memory with a child (clone CLONE_VM without CLONE_THREAD): the fast engine records no more calls there (--engine=int3 does)\n", th.proc.pid)
	t.whileParked(th, func() {
		mem, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", th.tid), os.O_RDWR, 0)
		if err != nil {
			return
		}
		defer mem.Close()
		im := th.proc.image
		t.arm(mem, im, 0, len(im.funcs), false)
	})
}

// fastFork sets up the fast engine in a forked child, stopped: its memory
// is a copy of its parent's but for the thread states (MADV_DONTFORK), so
// it gets a fresh table holding one thread, whose state starts with the
// frames its parent had at the fork.
func (t *Tracer) fastFork(th *thread, frames []fast.Frame) {
	parent := th.proc.image.fast
	fi := &fastImage{tableAddr: parent.tableAddr, rdfsbase: parent.rdfsbase, sites: slices.Clip(parent.sites)}
	th.proc.image.fast = fi
	th.fs = nil
	// Kept until cleared: the entries stay in the child's memory, and a
	// fork of it inherits them.
	fi.inherited = parent.inherited
	if clearTable(th.tid, fi.tableAddr, fi.inherited) != nil {
		return
	}
	fi.inherited = nil
	var regs unix.PtraceRegs
	if err := ptrace.GetRegs(th.tid, &regs); err != nil {
		return
	}
	key := fi.keyOf(th.tid, regs.Fs_base)
	if len(frames) == 0 || !t.fastRegister(th, key) {
		return
	}
	for _, fr := range frames {
		th.fs.Push(fr)
	}
}

// fastStart registers a new thread of a traced process at its first stop
// (at later stops it does nothing), under the key its stubs will look
// up: its %fs base, which clone set from its tls argument (CLONE_SETTLS),
// or the word there without rdfsbase (glibc's TCB points to itself before
// the thread starts). Its first call then finds its state instead of
// stopping at entry_miss. A thread that shares a registered key (no
// CLONE_SETTLS) is left to entry_miss as before.
func (t *Tracer) fastStart(th *thread) {
	if th.started {
		return
	}
	th.started = true
	fi := th.proc.image.fast
	if fi == nil || fi.disabled || fi.dead || th.fs != nil || th.vforked || th.vfork != nil || t.detached {
		return
	}
	var regs unix.PtraceRegs
	if ptrace.GetRegs(th.tid, &regs) != nil {
		return
	}
	key := fi.keyOf(th.tid, regs.Fs_base)
	if key == 0 {
		return
	}
	if _, ok := fi.table.Lookup(key); ok {
		return
	}
	t.fastRegister(th, key)
}

// drainer moves the records of every thread's ring to the function sink
// while the program runs, and orders them before what the tracer hands
// the sink (lockedSink). One goroutine polls; the tracer thread syncs.
type drainer struct {
	mu     sync.Mutex
	sink   FuncSink
	clock  *fast.Clock
	owner  map[*fast.State]int    // the tid each state's records belong to
	last   map[int]uint64         // per task: the last time handed on
	latest map[int]uftrace.Record // per task: the last record handed on
	recs   []Rec
	// states and tids are drainRound's list of the rings to drain.
	states []*fast.State
	tids   []int
	events func(uint64)
	err    error // the first sink error
	lost   uint64
	// retiring are the states of threads that exited, handed over at
	// their exit event (retire) and finished here, off the tracer's path.
	retiring []*retiree
	pending  []*retiree // retireRound's list
	closing  uint32     // set by close: nap's futex word
	closed   bool       // the last drain is done: the goroutine hands nothing more
	stop     chan struct{}
}

// retiree is the state of a thread that exited: its ring to drain, then
// its open frames to close at the exit's time, then its task's end.
type retiree struct {
	st     *fast.State
	tid    int
	ts     uint64     // the exit event's time: the open frames' EXIT records
	fi     *fastImage // the state's process: only compared (reclaim)
	reuse  bool       // its table entries are gone from the process: reusable
	exit   bool       // the tracer's Exit call for tid came meanwhile:
	exitTS uint64     // made once the state is finished
	done   bool
}

// ownerOf returns the tid st's records go to (0: none).
func (d *drainer) ownerOf(st *fast.State) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.owner[st]
}

// retire hands the drainer st, the state of tid, which exited at ts: a
// thread's last records (up to a ring of them) were drained at its exit
// event, on the tracer thread, while the program's other threads waited
// for the tracer (a 4-thread fib(25): 0.3-1.7 ms per exit).
func (d *drainer) retire(st *fast.State, tid int, ts uint64, fi *fastImage, reuse bool) {
	d.mu.Lock()
	d.retiring = append(d.retiring, &retiree{st: st, tid: tid, ts: ts, fi: fi, reuse: reuse})
	d.mu.Unlock()
}

// retireLocked finishes r: drains its ring, records the exits of the
// frames still open, makes the Exit call that waited for them, and
// forgets the state (reset for reuse when it can be).
func (d *drainer) retireLocked(r *retiree) {
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
	if st.Depth() > 0 {
		recs := make([]Rec, 0, st.Depth())
		for st.Depth() > 0 {
			fr := st.Pop()
			recs = append(recs, Rec{Record: uftrace.Record{Time: r.ts, Type: uftrace.Exit, Depth: fr.Depth, Addr: fr.Addr}})
		}
		d.events(uint64(len(recs)))
		d.noteErr(d.recordsLocked(r.tid, recs))
	}
	if r.exit {
		d.noteErr(d.sink.Exit(r.exitTS, r.tid))
		delete(d.latest, r.tid) // a reused tid starts afresh
	}
	delete(d.owner, st)
	if r.reuse {
		st.Reset()
	}
}

// retireTidLocked finishes the states tid's threads left (a tid can be
// reused): what is handed on for tid next follows their records.
func (d *drainer) retireTidLocked(tid int) {
	for _, r := range d.retiring {
		if r.tid == tid {
			d.retireLocked(r)
		}
	}
}

func (d *drainer) retireAllLocked() {
	for _, r := range d.retiring {
		d.retireLocked(r)
	}
}

// retireRound moves each retired state on by one batch of its ring, or
// finishes it once its ring is empty, taking the lock for each step only
// (as drainRound does), and reports whether it did anything.
func (d *drainer) retireRound() bool {
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
func (d *drainer) retiringBefore(tid int, st *fast.State) bool {
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
func (d *drainer) deferExit(time uint64, tid int) bool {
	for _, r := range d.retiring {
		if r.tid == tid && !r.done && !r.exit {
			r.exit, r.exitTS = true, time
			return true
		}
	}
	return false
}

// reclaim returns the finished states of fi's threads that exited (all of
// them with force), reset for reuse or not (unmap them), and forgets them.
func (d *drainer) reclaim(fi *fastImage, force bool) (reuse, drop []*fast.State) {
	d.mu.Lock()
	defer d.mu.Unlock()
	kept := d.retiring[:0]
	for _, r := range d.retiring {
		if r.fi == fi && force {
			d.retireLocked(r)
		}
		switch {
		case r.fi != fi || !r.done:
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

// noteErr keeps the first sink error.
func (d *drainer) noteErr(err error) {
	if err != nil && d.err == nil {
		d.err = err
	}
}

// openFramesLocked is how many of st's frames have their ENTRY and not
// their EXIT in tid's trace, for a thread that stopped for good, its ring
// drained: one killed inside a stub may have pushed its top frame without
// writing the ENTRY yet, or written the EXIT without popping it yet. Its
// last record tells: the top frame is open when that record is its ENTRY
// or one of a call inside it. (With records lost, nothing can be told.)
func (d *drainer) openFramesLocked(tid int, st *fast.State) int {
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

func newDrainer(sink FuncSink, clock *fast.Clock, events func(uint64)) *drainer {
	return &drainer{sink: sink, clock: clock, owner: map[*fast.State]int{}, last: map[int]uint64{}, latest: map[int]uftrace.Record{},
		events: events, stop: make(chan struct{})}
}

func (d *drainer) add(st *fast.State, tid int) {
	if d == nil {
		return
	}
	d.mu.Lock()
	d.owner[st] = tid
	d.mu.Unlock()
}

// remove drains st and forgets it.
func (d *drainer) remove(st *fast.State) {
	if d == nil {
		return
	}
	d.mu.Lock()
	d.drainLocked(st, d.owner[st])
	delete(d.owner, st)
	d.mu.Unlock()
}

// setOwner drains st and sends its later records to tid's task.
func (d *drainer) setOwner(st *fast.State, tid int) {
	if d == nil {
		return
	}
	d.mu.Lock()
	if old, ok := d.owner[st]; ok {
		d.drainLocked(st, old)
		d.owner[st] = tid
	}
	d.mu.Unlock()
}

// syncState drains st's ring: what its thread wrote before it stopped.
// Other threads' records need no order with what the tracer writes of
// this one (lockedSink), and draining them too made every thread exit of
// a 4-thread fib(25) drain its siblings' rings on the tracer thread.
func (d *drainer) syncState(st *fast.State) {
	d.mu.Lock()
	if tid, ok := d.owner[st]; ok {
		d.drainLocked(st, tid)
	}
	d.mu.Unlock()
}

// sync drains every ring.
func (d *drainer) sync() {
	if d == nil {
		return
	}
	d.mu.Lock()
	d.drainAllLocked()
	d.mu.Unlock()
}

// drainAllLocked drains every ring, a batch from each in turn: a thread
// waiting for room in its ring sees it move while the others are drained.
func (d *drainer) drainAllLocked() bool {
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
func (d *drainer) drainRound(least uint64) bool {
	d.mu.Lock()
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
		if tid, ok := d.owner[st]; ok && tid == d.tids[i] && st.Len() >= least && !d.retiringBefore(tid, st) && d.drainBatchLocked(st, tid) {
			any = true
		}
		d.mu.Unlock()
	}
	return any
}

// drainTidLocked drains the rings whose records are tid's.
func (d *drainer) drainTidLocked(tid int) {
	d.retireTidLocked(tid)
	for st, owner := range d.owner {
		if owner == tid {
			d.drainLocked(st, tid)
		}
	}
}

// drainLocked hands st's pending records to the sink as tid's.
func (d *drainer) drainLocked(st *fast.State, tid int) bool {
	any := false
	// At most one ring's worth: a thread writing as fast as rtrace reads
	// must not hold the lock (and the tracer) forever.
	for i := 0; i <= fast.RingCap/drainBatch && d.drainBatchLocked(st, tid); i++ {
		any = true
	}
	return any
}

// nap sleeps for dur in the calling thread, or until close wakes it: a
// time.Sleep under a millisecond lasts a millisecond when the Go runtime
// has nothing else to wake for (it waits in epoll_wait, whose timeout
// counts milliseconds), and a ring of 2^16 records fills in 0.8 ms at
// fib(30)'s pace. The sleep is a FUTEX_WAIT on d.closing with a timeout
// (futex(2)): close sets the word and wakes it, and a trace's end no
// longer waits for the rest of a sleep of up to 1 ms.
func (d *drainer) nap(dur time.Duration) {
	const waitPrivate = 0 | 128 // FUTEX_WAIT | FUTEX_PRIVATE_FLAG, linux/futex.h
	ts := unix.NsecToTimespec(dur.Nanoseconds())
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&d.closing)), waitPrivate, 0, uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// wakeNap ends the drainer's sleep, and any later one, at once.
func (d *drainer) wakeNap() {
	const wakePrivate = 1 | 128 // FUTEX_WAKE | FUTEX_PRIVATE_FLAG
	atomic.StoreUint32(&d.closing, 1)
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&d.closing)), wakePrivate, 1, 0, 0, 0)
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
func (d *drainer) drainBatchLocked(st *fast.State, tid int) bool {
	if !st.Pending() {
		return false
	}
	// The records are converted where they lie in the ring, their times
	// kept monotonic per task (the TSC conversion and the tracer's clock
	// differ by the calibration's error).
	sc := d.clock.Scale()
	last := d.last[tid]
	d.recs = d.recs[:0]
	lost := st.Drain(drainBatch, func(part []fast.Rec) {
		at := len(d.recs)
		d.recs = slices.Grow(d.recs, len(part)+1)[:at+len(part)]
		out, t := d.recs[at:], last
		for i, r := range part {
			t = max(sc.Nanos(r.TSC), t)
			typ, depth, addr := fast.Unword(r.Word)
			out[i] = Rec{Record: uftrace.Record{Time: t, Type: uftrace.RecordType(typ), Depth: depth, Addr: addr}}
			if typ == int(uftrace.Event) {
				// The stubs' only event, -W cpu's: the CPU above the id.
				out[i].Addr, out[i].More, out[i].Payload = addr&(1<<20-1), true, uftrace.WatchPayload(uint32(addr>>20))
			}
		}
		last = t
	})
	n := len(d.recs)
	if lost > 0 {
		// The records that did not fit came after these.
		d.lost += lost
		d.recs = append(d.recs, Rec{Record: uftrace.Record{Time: last, Type: uftrace.Lost, Addr: lost}})
	}
	if len(d.recs) == 0 {
		return false
	}
	d.events(uint64(n))
	if err := d.handLocked(tid, d.recs); err != nil && d.err == nil {
		d.err = err
	}
	return true
}

// recordsLocked hands recs to the sink, their times kept monotonic per
// task (the TSC conversion and the tracer's clock differ by the
// calibration's error).
func (d *drainer) recordsLocked(tid int, recs []Rec) error {
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
func (d *drainer) handLocked(tid int, recs []Rec) error {
	d.last[tid] = recs[len(recs)-1].Time
	d.latest[tid] = recs[len(recs)-1].Record
	return d.sink.Records(tid, recs)
}

// run polls the rings until stopped: at once while they fill, backing off
// to 1 ms when they stay empty.
func (d *drainer) run() {
	d.clock.Nanos(0) // the clock's calibration sleeps: not under the lock
	idle := 50 * time.Microsecond
	least := uint64(1)
	for {
		select {
		case <-d.stop:
			return
		default:
		}
		retired := d.retireRound()
		if d.drainRound(least) || retired {
			idle, least = 50*time.Microsecond, drainLeast
			continue
		}
		d.nap(idle)
		idle, least = min(2*idle, time.Millisecond), 1
	}
}

// close stops the goroutine, drains what is left and returns the first
// sink error.
func (d *drainer) close() error {
	if d == nil {
		return nil
	}
	// The last drain here, not after the goroutine's end: waking the
	// tracer's locked thread once the goroutine ended took 0.03–0.25 ms.
	// The goroutine stops at its next turn of the lock (d.closed).
	d.mu.Lock()
	d.closed = true
	d.drainAllLocked()
	err := d.err
	d.mu.Unlock()
	close(d.stop)
	d.wakeNap()
	return err
}

// lockedSink is the function sink the tracer uses with the fast engine:
// each call runs under the drainer's lock, and first drains the rings of
// the thread it is about (all of them for an exec's session or a toggle),
// so what the tracer hands on follows the records written before it.
// Other threads' records need no order with it: a trace keeps each
// thread's records apart.
type lockedSink struct {
	d *drainer
}

// Which rings a call drains first.
const (
	drainNone = 0
	drainAll  = -1
)

func (l *lockedSink) do(tid int, f func(FuncSink) error) error {
	l.d.mu.Lock()
	defer l.d.mu.Unlock()
	switch tid {
	case drainNone:
	case drainAll:
		l.d.drainAllLocked()
	default:
		l.d.drainTidLocked(tid)
	}
	return f(l.d.sink)
}

func (l *lockedSink) Session(s Session) error {
	return l.do(drainAll, func(f FuncSink) error { return f.Session(s) })
}
func (l *lockedSink) Maps(sid string, maps []byte) error {
	return l.do(drainNone, func(f FuncSink) error { return f.Maps(sid, maps) })
}
func (l *lockedSink) Dlopen(time uint64, tid int, sid string, base uint64, path string) error {
	return l.do(tid, func(f FuncSink) error { return f.Dlopen(time, tid, sid, base, path) })
}
func (l *lockedSink) Task(time uint64, tid, pid int) error {
	return l.do(tid, func(f FuncSink) error { return f.Task(time, tid, pid) })
}
func (l *lockedSink) Fork(time uint64, pid, ppid int) error {
	return l.do(ppid, func(f FuncSink) error {
		l.d.retireTidLocked(pid) // a reused tid: its old task ends first
		return f.Fork(time, pid, ppid)
	})
}
func (l *lockedSink) Exit(time uint64, tid int) error {
	l.d.mu.Lock()
	deferred := l.d.deferExit(time, tid)
	l.d.mu.Unlock()
	if deferred {
		return nil
	}
	return l.do(tid, func(f FuncSink) error {
		delete(l.d.latest, tid) // a reused tid starts afresh
		return f.Exit(time, tid)
	})
}
func (l *lockedSink) Toggle(on bool, pid int) error {
	return l.do(drainAll, func(f FuncSink) error { return f.Toggle(on, pid) })
}
func (l *lockedSink) Symbols(sid string, funcs []trace.Func) error {
	return l.do(drainNone, func(f FuncSink) error { return f.Symbols(sid, funcs) })
}
func (l *lockedSink) Event(id uint64, name string) error {
	return l.do(drainNone, func(f FuncSink) error { return f.Event(id, name) })
}
func (l *lockedSink) Probe(time uint64, tid int, name string, args []string) error {
	return l.do(tid, func(f FuncSink) error { return f.Probe(time, tid, name, args) })
}
func (l *lockedSink) Records(tid int, recs []Rec) error {
	return l.do(tid, func(FuncSink) error { return l.d.recordsLocked(tid, recs) })
}
