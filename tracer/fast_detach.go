package tracer

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"slices"

	"golang.org/x/sys/unix"

	"rtrace/internal/uftrace"
	"rtrace/tracer/bp"
	"rtrace/tracer/fast"
	"rtrace/tracer/ptrace"
)

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
			if th.fast.fs != nil {
				states = append(states, th.fast.fs)
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
	t.drain.Sync()
	munmap := func(addr, size uint64) {
		if _, err := remoteSyscall(tid, unix.SYS_MUNMAP, addr, size); err != nil {
			fmt.Fprintf(t.cfg.Warn, "rtrace: warning: pid %d: unmapping rtrace's memory at %#x: %v\n", p.pid, addr, err)
		}
	}
	for _, st := range states {
		munmap(st.Addr, fast.StateSize)
	}
	if fi != nil && fi.arena != nil {
		munmap(fi.arena.addr, arenaSize)
	}
	if fi != nil && fi.life != nil {
		munmap(fi.life.addr, 4096)
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
		if th.proc == p && th.fast.fs != nil {
			th.fast.fs.Stall()
		}
	}
}
