package unwind

import (
	"encoding/binary"
	"testing"
)

// FuzzBacktrace unwinds arbitrary stack contents and registers over the
// synthetic module (rsp- and rbp-based CFAs, expressions, an outermost
// frame, a malformed program, a range without FDEs): it must not panic,
// must stop within depth, and must never report a zero pc.
func FuzzBacktrace(f *testing.F) {
	// The stack of TestCFI, which walks every kind of row.
	S := uint64(stackBase)
	s := newStack(S, 0x100)
	for _, w := range [][2]uint64{
		{S + 8, 0x1150}, {S, S + 0x40}, {S + 0x48, 0x1250}, {S + 0x40, S + 0xb0},
		{S + 0x58, S + 0x80}, {S + 0x78, 0x1605}, {S + 0x98, 0x1850},
		{S + 0xb0, 0}, {S + 0xb8, 0x1350},
	} {
		s.put(w[0], w[1])
	}
	f.Add(uint64(0x1050), uint64(0), uint64(0xdead), s.data)
	f.Add(uint64(0x1250), uint64(0x50), uint64(S+0xb0), s.data)
	f.Add(uint64(0x1850), uint64(0x10), uint64(S+0x40), s.data)
	loop := make([]byte, 64) // frame pointers pointing at themselves
	for i := 0; i < 64; i += 8 {
		binary.LittleEndian.PutUint64(loop[i:], S)
	}
	f.Add(uint64(0x1850), uint64(0), uint64(S), loop)
	f.Add(uint64(0x1550), uint64(0), uint64(S+0x20), loop)
	f.Add(^uint64(0), ^uint64(0), ^uint64(0), []byte{})

	u := synthUnwinder(f)
	f.Fuzz(func(t *testing.T, pc, spOff, bp uint64, stack []byte) {
		mem := &fakeMem{}
		mem.add(S, stack)
		const depth = 32
		regs := Regs{PC: pc, SP: S + spOff, BP: bp}
		out := u.Backtrace(mem, regs, depth, nil)
		if len(out) > depth {
			t.Fatalf("%d frames, depth %d", len(out), depth)
		}
		if pc != 0 && (len(out) == 0 || out[0] != pc) {
			t.Fatalf("frame 0 = %x, want %#x", out, pc)
		}
		for i, p := range out {
			if p == 0 {
				t.Fatalf("frame %d is 0: %x", i, out)
			}
		}
	})
}
