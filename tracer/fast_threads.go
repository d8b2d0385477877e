package tracer

import (
	"fmt"
	"os"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"

	"rtrace/tracer/fast"
	"rtrace/tracer/ptrace"
)

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

// newStates makes n thread states in tid's process, stopped: one memfd
// the process maps shared (not inherited by a fork) and rtrace maps too.
// Five system calls in the process make a state ready, in two stops (four
// in stub.S's newstates, then close): made by the chunk, the states of a
// program that starts threads cost them once per chunk.
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
	size := uint64(n) * fast.StateSize
	flags := uint64(unix.MAP_SHARED)
	if populate {
		flags |= unix.MAP_POPULATE
	}
	// memfd_create, ftruncate, mmap and madvise(MADV_DONTFORK) in one stop
	// (stub.S, newstates); close after rtrace opened the descriptor.
	g := fi.gadget()
	g.pc = fi.sites[0].NewStates
	regs, err := remoteRun(tid, g, 0, fi.memfdName(), size, flags)
	if err != nil {
		return nil, err
	}
	fd, addr := regs.R12, regs.Rax
	if int64(fd) < 0 {
		return nil, fmt.Errorf("memfd_create: %w", unix.Errno(-int64(fd)))
	}
	defer remoteSyscallAt(tid, fi.gadget(), unix.SYS_CLOSE, fd)
	if e := int64(addr); e < 0 && e > -4096 {
		if regs.R15 == 1 {
			return nil, fmt.Errorf("ftruncate: %w", unix.Errno(-e))
		}
		return nil, fmt.Errorf("mapping the thread states: %w", unix.Errno(-e))
	}
	unmapRemote := func() { remoteSyscallAt(tid, fi.gadget(), unix.SYS_MUNMAP, addr, size) }
	f, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/%d", pid, fd), os.O_RDWR, 0)
	if err != nil {
		unmapRemote()
		return nil, err
	}
	defer f.Close()
	// Not unix.Mmap: each state is unmapped on its own (unmapState).
	p, err := unix.MmapPtr(int(f.Fd()), 0, nil, uintptr(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unmapRemote()
		return nil, fmt.Errorf("mapping the thread states: %w", err)
	}
	mem := unsafe.Slice((*byte)(p), size)
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
	if th.fast.fs != nil {
		// Its %fs base changed (arch_prctl): the same state, frames
		// included, under the new key too. The old one stays: the thread
		// may set it back and return through frames pushed under either.
		e, ok := fi.table.Insert(key, th.fast.fs.Addr)
		if !ok || fi.writeEntry(th.tid, e) != nil {
			return false
		}
		th.fast.fsKeys = append(th.fast.fsKeys, key)
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
	th.fast.fs, th.fast.fsKey = st, key
	if t.res != nil {
		var regs unix.PtraceRegs
		if ptrace.GetRegs(th.tid, &regs) == nil {
			t.fastResState(th, st, regs.Rsp)
		}
	}
	t.drain.Add(st, th.tid)
	t.coarseFor(th, st)
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

// fastStart registers a new thread of a traced process at its first stop
// (at later stops it does nothing), under the key its stubs will look
// up: its %fs base, which clone set from its tls argument (CLONE_SETTLS),
// or the word there without rdfsbase (glibc's TCB points to itself before
// the thread starts). Its first call then finds its state instead of
// stopping at entry_miss. A thread that shares a registered key (no
// CLONE_SETTLS) is left to entry_miss as before.
func (t *Tracer) fastStart(th *thread) {
	if th.fast.started {
		return
	}
	th.fast.started = true
	fi := th.proc.image.fast
	if fi == nil || fi.disabled || fi.dead || th.fast.fs != nil || th.vforked || th.fast.vfork != nil || t.detached {
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
