package unwind

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// Memory reads the target's memory. ReadMemory may return a short count with
// or without an error; the bytes it counts are valid.
type Memory interface {
	ReadMemory(buf []byte, addr uint64) (int, error)
}

// ProcMem returns a Memory reading pid's memory with process_vm_readv(2),
// which works from any thread and costs about the same for 8 bytes as for
// 4 KiB. It needs the right to ptrace pid (a stopped tracee qualifies).
func ProcMem(pid int) Memory { return procMem(pid) }

type procMem int

func (p procMem) ReadMemory(buf []byte, addr uint64) (int, error) {
	if len(buf) == 0 {
		return 0, nil
	}
	local := [1]unix.Iovec{{Base: &buf[0]}}
	local[0].SetLen(len(buf))
	remote := [1]unix.RemoteIovec{{Base: uintptr(addr), Len: len(buf)}}
	// A read that faults part-way returns the bytes before the fault
	// (process_vm_readv(2), "partial read"); a failed one returns -1.
	n, err := unix.ProcessVMReadv(int(p), local[:], remote[:], 0)
	return max(n, 0), err
}

// Sizes of the stack window. A backtrace starts with one read of
// firstWindow bytes at regs.SP, halved down to minWindow while the read
// fails outright; a load past the window's end extends it with one read of
// as many bytes again, up to maxWindow in all. A read is ~1.8 µs for 8
// bytes and ~2.0 µs for 4 KiB here, 2.65 µs for 16 KiB; ten frames of C
// code rarely span more than a few KiB.
const (
	firstWindow = 4 << 10
	maxWindow   = 64 << 10
	minWindow   = 256
)

// stack serves 8-byte loads from a window of the target's stack, and from
// single reads outside it.
type stack struct {
	mem  Memory
	base uint64 // target address of win[0]
	win  []byte // valid bytes, a prefix of buf
	end  bool   // a read stopped short: the mapping ends at base+len(win)
	buf  []byte // backing store, maxWindow bytes
	word [8]byte
}

// reset reads the window at sp.
func (s *stack) reset(mem Memory, sp uint64) {
	s.mem, s.base, s.win, s.end = mem, sp, nil, true
	if s.buf == nil {
		s.buf = make([]byte, maxWindow)
	}
	if sp+maxWindow < sp { // the window would wrap
		return
	}
	for n := firstWindow; n >= minWindow; n /= 2 {
		got, _ := mem.ReadMemory(s.buf[:n], sp)
		if got > 0 {
			s.win, s.end = s.buf[:min(got, n)], got < n
			return
		}
	}
}

// extend grows the window to cover addr+8 if it can.
func (s *stack) extend(addr uint64) {
	have := uint64(len(s.win))
	if s.end || have == 0 || addr < s.base+have || addr+8-s.base > maxWindow {
		return
	}
	want := max(have, addr+8-s.base-have) // double, or more if needed
	want = min(want, maxWindow-have)
	got, _ := s.mem.ReadMemory(s.buf[have:have+want], s.base+have)
	got = max(0, min(got, int(want)))
	s.win = s.buf[:int(have)+got]
	s.end = uint64(got) < want
}

// inWindow returns the offset in the window of [addr, addr+n), if it is
// there.
func (s *stack) inWindow(addr, n uint64) (uint64, bool) {
	off := addr - s.base
	return off, addr >= s.base && off+n >= off && off+n <= uint64(len(s.win))
}

// load reads the 8-byte little-endian word at addr.
func (s *stack) load(addr uint64) (uint64, bool) {
	off, ok := s.inWindow(addr, 8)
	if !ok {
		s.extend(addr)
		off, ok = s.inWindow(addr, 8)
	}
	if ok {
		return binary.LittleEndian.Uint64(s.win[off:]), true
	}
	if n, _ := s.mem.ReadMemory(s.word[:], addr); n != 8 {
		return 0, false
	}
	return binary.LittleEndian.Uint64(s.word[:]), true
}

// read fills buf from addr, for DWARF expressions (op.ReadMemoryFunc).
func (s *stack) read(buf []byte, addr uint64) (int, error) {
	if off, ok := s.inWindow(addr, uint64(len(buf))); ok {
		return copy(buf, s.win[off:]), nil
	}
	return s.mem.ReadMemory(buf, addr)
}
