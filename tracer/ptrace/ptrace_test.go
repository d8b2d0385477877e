package ptrace

import (
	"os/exec"
	"runtime"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// deep calls f under n small frames (a few dozen bytes each) on the
// goroutine's stack: for some n a call inside f finds the stack full and
// grows (copies) it.
//
//go:noinline
func deep(n int, f func()) {
	if n > 0 {
		deep(n-1, f)
		return
	}
	f()
}

// reads starts a child stopped at its exec, traced by a new thread whose
// goroutine has n small frames on its stack, and reads the child's registers
// and the word at its pc from there: what the caller gets, and what it
// got with nothing on the stack.
func reads(t *testing.T, n int) (regs, base unix.PtraceRegs, word, baseWord uint64) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // the thread dies with the goroutine: its tracee with it
		cmd := exec.Command("/bin/true")
		cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
		if err := cmd.Start(); err != nil {
			t.Error(err)
			return
		}
		pid := cmd.Process.Pid
		defer func() {
			unix.Kill(pid, unix.SIGKILL)
			var ws unix.WaitStatus
			unix.Wait4(pid, &ws, unix.WALL, nil)
		}()
		var ws unix.WaitStatus
		if _, err := unix.Wait4(pid, &ws, unix.WALL, nil); err != nil || !ws.Stopped() {
			t.Errorf("child did not stop at its exec: %v %v", ws, err)
			return
		}
		if err := GetRegs(pid, &base); err != nil {
			t.Error(err)
			return
		}
		baseWord, _ = PeekWord(pid, base.Rip)
		deep(n, func() {
			// On this frame: a stack copy moves them.
			var r unix.PtraceRegs
			GetRegs(pid, &r)
			w, _ := PeekWord(pid, base.Rip)
			regs, word = r, w
		})
	}()
	<-done
	return
}

// Whatever the goroutine's stack when a request runs, the registers and
// words read land where the caller looks: a pointer turned into a uintptr
// before a Go call once pointed into the stack's old copy after the call
// grew it, and the reads came back as zeros (a program's first
// instruction, restored from such a read, crashed it).
func TestReadsSurviveStackGrowth(t *testing.T) {
	for n := range 400 {
		regs, base, word, baseWord := reads(t, n)
		if t.Failed() {
			return
		}
		if baseWord == 0 || regs != base || word != baseWord {
			t.Errorf("%d frames on the stack: rip %#x word %#x, want rip %#x word %#x", n, regs.Rip, word, base.Rip, baseWord)
		}
	}
}
