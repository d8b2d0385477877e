package tracer

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestStatusMask(t *testing.T) {
	status := []byte("Name:\ttight\nShdPnd:\t0000000000000100\nSigPnd:\t0000000000000010\nSigBlk:\t0000000000000000\n")
	if !statusMask(status, "SigPnd:", unix.SIGTRAP) {
		t.Error("SigPnd 0x10: SIGTRAP (5) not seen pending")
	}
	if statusMask(status, "SigPnd:", unix.SIGKILL) {
		t.Error("SigPnd 0x10: SIGKILL seen pending (ShdPnd's bit 9 is the process's, not the thread's)")
	}
	if statusMask(status, "SigBlk:", unix.SIGTRAP) {
		t.Error("SigBlk 0: SIGTRAP seen blocked")
	}
	if statusMask([]byte("SigPnd:\tzz\n"), "SigPnd:", unix.SIGTRAP) || statusMask(nil, "SigPnd:", unix.SIGTRAP) {
		t.Error("a bad or missing SigPnd reads as pending")
	}
}

// FuzzStatusMask: any status text, any signal number, no panic.
func FuzzStatusMask(f *testing.F) {
	f.Add([]byte("SigPnd:\t0000000000000010\n"), 5)
	f.Add([]byte("SigPnd:\tffffffffffffffff\n"), 64)
	f.Add([]byte("SigPnd:"), 0)
	f.Fuzz(func(t *testing.T, status []byte, sig int) {
		statusMask(status, "SigPnd:", unix.Signal(sig))
	})
}
