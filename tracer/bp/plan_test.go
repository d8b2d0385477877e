package bp

import (
	"bytes"
	"errors"
	"testing"
)

func TestPrepare(t *testing.T) {
	const addr, slot = 0x401000, 0x402000
	cases := []struct {
		name   string
		code   []byte
		act    Action
		resume uint64
		slot   []byte // expected slot prefix (before the jump back)
	}{
		{"endbr64", []byte{0xf3, 0x0f, 0x1e, 0xfa, 0x55}, Jump, addr + 4, nil},
		{"nop5", []byte{0x0f, 0x1f, 0x44, 0, 0}, Jump, addr + 5, nil},
		{"jmp rel32", []byte{0xe9, 0x10, 0, 0, 0}, Jump, addr + 5 + 0x10, nil},
		{"jmp rel8 back", []byte{0xeb, 0xfe}, Jump, addr, nil},
		{"push rbp", []byte{0x55, 0x48, 0x89, 0xe5}, OutOfLine, slot, []byte{0x55}},
		{"push r12", []byte{0x41, 0x54}, OutOfLine, slot, []byte{0x41, 0x54}},
		{"sub rsp", []byte{0x48, 0x83, 0xec, 0x10}, OutOfLine, slot, []byte{0x48, 0x83, 0xec, 0x10}},
		// mov 0x100(%rip),%rax at addr: target addr+7+0x100; from the slot the
		// displacement becomes target-(slot+7) = addr+0x100-slot.
		{"rip-relative", []byte{0x48, 0x8b, 0x05, 0x00, 0x01, 0, 0}, OutOfLine, slot,
			[]byte{0x48, 0x8b, 0x05, 0x00, 0xf1, 0xff, 0xff}},
		// je +3: target addr+5; jcc rel32 from slot: target-(slot+6).
		{"je rel8", []byte{0x74, 0x03}, OutOfLine, slot, []byte{0x0f, 0x84, 0xff, 0xef, 0xff, 0xff}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code := append(c.code, make([]byte, 16)...)
			p, err := Prepare(code, addr, slot)
			if err != nil {
				t.Fatal(err)
			}
			if p.Action != c.act || p.Resume != c.resume {
				t.Fatalf("action %d resume %#x, want %d %#x", p.Action, p.Resume, c.act, c.resume)
			}
			if c.act == OutOfLine {
				if !bytes.HasPrefix(p.Slot, c.slot) {
					t.Fatalf("slot % x, want prefix % x", p.Slot, c.slot)
				}
				tail := p.Slot[len(c.slot):]
				if len(tail) != 14 || tail[0] != 0xff || tail[1] != 0x25 || len(p.Slot) > SlotSize {
					t.Fatalf("slot tail % x is not jmp *0(%%rip)", tail)
				}
			}
		})
	}
	for _, bad := range [][]byte{{0xcc}, {0xe2, 0x05}, {0x06}} {
		if _, err := Prepare(append(bad, make([]byte, 16)...), addr, slot); !errors.Is(err, ErrUnsupported) {
			t.Errorf("% x: err %v, want ErrUnsupported", bad, err)
		}
	}
}

func FuzzPrepare(f *testing.F) {
	f.Add([]byte{0x48, 0x8b, 0x05, 0, 1, 0, 0}, uint64(0x401000), uint64(0x7f0000000000))
	f.Add([]byte{0x74, 0x03}, uint64(0x401000), uint64(0x402000))
	f.Fuzz(func(t *testing.T, code []byte, addr, slot uint64) {
		p, err := Prepare(code, addr, slot)
		if err == nil && p.Action == OutOfLine && len(p.Slot) > SlotSize {
			t.Fatalf("slot of %d bytes", len(p.Slot))
		}
	})
}
