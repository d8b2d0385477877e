package ptrace

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Thread is a goroutine locked to one OS thread for its whole life: the
// tracer thread. Delve's native backend does the same (pkg/proc/native,
// ptraceThread): a tracee accepts ptrace requests only from the thread that
// attached it (ptrace(2): "ESRCH ... not being traced by the caller").
type Thread struct {
	reqs chan func()
}

// NewThread starts the locked thread.
func NewThread() *Thread {
	t := &Thread{reqs: make(chan func())}
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		for f := range t.reqs {
			f()
		}
	}()
	return t
}

// Do runs f on the locked thread and waits for it. Long-running work (a
// whole event loop) is one Do call, so the hot path pays no hand-off.
func (t *Thread) Do(f func()) {
	done := make(chan struct{})
	t.reqs <- func() { f(); close(done) }
	<-done
}

// Close ends the thread once pending calls are done.
func (t *Thread) Close() { close(t.reqs) }

// PinToCurrentCPU binds the calling (locked, tracer) thread to the CPU it
// runs on; a child forked from it inherits the mask. Cross-CPU wake-ups
// cost ~15x a same-CPU breakpoint stop on these VMs (docs/ptrace-costs.md). It
// returns a function that restores the previous mask.
func PinToCurrentCPU() (restore func()) {
	var old, set unix.CPUSet
	var cpu uint32
	if unix.SchedGetaffinity(0, &old) != nil {
		return func() {}
	}
	if _, _, e := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&cpu)), 0, 0); e != 0 {
		return func() {}
	}
	set.Set(int(cpu))
	unix.SchedSetaffinity(0, &set)
	return func() { unix.SchedSetaffinity(0, &old) }
}
