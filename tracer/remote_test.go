package tracer

import (
	"errors"
	"os/exec"
	"runtime"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// A thread that ends while runToTrap runs it (a program that exits
// before the trap, or is killed meanwhile): runToTrap says so, and its
// wait's exit status is kept for the loop (takeReaped), which would
// otherwise never see the thread end.
func TestRunToTrapKeepsExit(t *testing.T) {
	for { // what another test left
		if _, _, _, ok := takeReaped(); !ok {
			break
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // the tracer is this thread; its tracee dies with it
		cmd := exec.Command("/bin/sh", "-c", "exit 7")
		cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
		if err := cmd.Start(); err != nil {
			t.Error(err)
			return
		}
		pid := cmd.Process.Pid
		var ws unix.WaitStatus
		if _, err := unix.Wait4(pid, &ws, unix.WALL, nil); err != nil || !ws.Stopped() {
			t.Errorf("the child did not stop at its exec: %v %v", ws, err)
			return
		}
		// A trap it never reaches: it runs to its end.
		if err := runToTrap(pid, 1); !errors.Is(err, errEnded) {
			t.Errorf("runToTrap returned %v for a thread that exited, want errEnded", err)
		}
		tid, ws, _, ok := takeReaped()
		if !ok || tid != pid || !ws.Exited() || ws.ExitStatus() != 7 {
			t.Errorf("kept end: tid %d (want %d), status %v, kept %v; want exit 7", tid, pid, ws, ok)
		}
		if _, err := unix.Wait4(pid, &ws, unix.WALL|unix.WNOHANG, nil); err != unix.ECHILD {
			t.Errorf("the child is still there to wait for: %v", err)
		}
	}()
	<-done
}
