package tracer

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestPendingSignal(t *testing.T) {
	status := []byte("Name:\ttight\nShdPnd:\t0000000000000100\nSigPnd:\t0000000000000010\nSigBlk:\t0000000000000000\n")
	if !pendingSignal(status, unix.SIGTRAP) {
		t.Error("SigPnd 0x10: SIGTRAP (5) not seen pending")
	}
	if pendingSignal(status, unix.SIGKILL) {
		t.Error("SigPnd 0x10: SIGKILL seen pending (ShdPnd's bit 9 is the process's, not the thread's)")
	}
	if pendingSignal([]byte("SigPnd:\tzz\n"), unix.SIGTRAP) || pendingSignal(nil, unix.SIGTRAP) {
		t.Error("a bad or missing SigPnd reads as pending")
	}
}

// FuzzPendingSignal: any status text, any signal number, no panic.
func FuzzPendingSignal(f *testing.F) {
	f.Add([]byte("SigPnd:\t0000000000000010\n"), 5)
	f.Add([]byte("SigPnd:\tffffffffffffffff\n"), 64)
	f.Add([]byte("SigPnd:"), 0)
	f.Fuzz(func(t *testing.T, status []byte, sig int) {
		pendingSignal(status, unix.Signal(sig))
	})
}
