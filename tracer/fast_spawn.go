package tracer

import (
	"fmt"
	"os"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"

	"rtrace/tracer/fast"
	"rtrace/tracer/ptrace"
)

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
// frames its parent had at the fork and the resource call it was making
// (a fork in a signal handler, inside accept: the child returns from it
// through exit_res). The unwind arena is its parent's, inherited.
func (t *Tracer) fastFork(th *thread, frames []fast.Frame, res fast.PendingRes) {
	parent := th.proc.image.fast
	fi := &fastImage{tableAddr: parent.tableAddr, rdfsbase: parent.rdfsbase, sites: slices.Clip(parent.sites),
		arena: parent.arena, walkIndex: parent.walkIndex, life: parent.life}
	th.proc.image.fast = fi
	th.fast.fs = nil
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
		th.fast.fs.Push(fr)
	}
	th.fast.fs.SetPendingRes(res)
}
