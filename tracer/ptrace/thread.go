package ptrace

import "runtime"

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
