package bench

import (
	"fmt"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"rtrace/tracer/ptrace"
)

// Floor runs prog (testdata/int3loop.c) with hits breakpoints under the
// barest tracer there is: int3 → wait4 → PTRACE_CONT, on one locked OS
// thread, pinned with the target to one CPU when pin is set, as rtrace does.
// It returns the time per hit, from the first stop to the exit.
func Floor(prog string, hits int, pin bool) (time.Duration, error) {
	th := ptrace.NewThread()
	defer th.Close()
	var d time.Duration
	var err error
	th.Do(func() { d, err = floor(prog, hits, pin) })
	return d, err
}

func floor(prog string, hits int, pin bool) (time.Duration, error) {
	if pin {
		defer ptrace.PinToCurrentCPU()()
	}
	pid, err := syscall.ForkExec(prog, []string{prog, strconv.Itoa(hits)}, &syscall.ProcAttr{
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Ptrace: true},
	})
	if err != nil {
		return 0, err
	}
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, unix.WALL, nil); err != nil {
		return 0, err
	}
	ptrace.Cont(pid, 0) // from the exec stop
	n := 0
	var start time.Time
	for {
		if _, err := unix.Wait4(pid, &ws, unix.WALL, nil); err != nil {
			return 0, err
		}
		if ws.Exited() || ws.Signaled() {
			break
		}
		if n == 0 {
			start = time.Now()
		}
		n++
		ptrace.Cont(pid, 0)
	}
	if n != hits {
		return 0, fmt.Errorf("%s: %d stops, want %d (%v)", prog, n, hits, ws)
	}
	if n < 2 {
		return 0, fmt.Errorf("%s: too few stops to time", prog)
	}
	return time.Since(start) / time.Duration(n-1), nil
}
