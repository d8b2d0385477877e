package bp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"golang.org/x/arch/x86/x86asm"
)

// Int3 is the breakpoint instruction.
const Int3 = 0xcc

// SlotSize is the room one displaced instruction takes in the scratch page:
// the instruction (at most 15 bytes, 16 with a rel8->rel32 rewrite) and an
// absolute jump back (14 bytes).
const SlotSize = 32

// How the displaced instruction runs after the tracer has handled the stop.
type Action uint8

const (
	// Jump: the instruction only moves rip (nop, endbr64, jmp): set rip to Resume.
	Jump Action = iota + 1
	// OutOfLine: run a relocated copy in a scratch slot that jumps back:
	// set rip to Resume, the slot. Cheaper than emulating push/mov/sub in the
	// tracer, which would need SETREGS and a memory write (FIELD-NOTES.md).
	OutOfLine
)

// Plan says how to run the instruction displaced by a breakpoint.
type Plan struct {
	Action Action
	Resume uint64 // new rip after the stop
	Slot   []byte // code for the scratch slot (OutOfLine only)
	Insn   x86asm.Inst
	Len    int
}

// ErrUnsupported is wrapped by Prepare for instructions it cannot displace.
var ErrUnsupported = errors.New("cannot displace instruction")

var endbr64 = []byte{0xf3, 0x0f, 0x1e, 0xfa}

// Prepare decodes the instruction at addr (code holds its bytes, at least
// 15 when available) and plans how it runs when a breakpoint replaces its
// first byte; slot is the scratch address its copy would live at.
func Prepare(code []byte, addr, slot uint64) (Plan, error) {
	if bytes.HasPrefix(code, endbr64) {
		return Plan{Action: Jump, Resume: addr + 4, Len: 4}, nil
	}
	inst, err := x86asm.Decode(code, 64)
	if err != nil {
		return Plan{}, fmt.Errorf("%w: decoding % x: %v", ErrUnsupported, code[:min(len(code), 8)], err)
	}
	p := Plan{Insn: inst, Len: inst.Len}
	next := addr + uint64(inst.Len)
	switch inst.Op {
	case x86asm.NOP:
		p.Action, p.Resume = Jump, next
		return p, nil
	case x86asm.INT:
		if code[0] == Int3 {
			return p, fmt.Errorf("%w: already an int3 (another debugger?)", ErrUnsupported)
		}
	case x86asm.JMP:
		if inst.PCRel > 0 && inst.Args[0] != nil {
			if rel, ok := inst.Args[0].(x86asm.Rel); ok {
				p.Action, p.Resume = Jump, uint64(int64(next)+int64(rel))
				return p, nil
			}
		}
	case x86asm.LOOP, x86asm.LOOPE, x86asm.LOOPNE, x86asm.JRCXZ, x86asm.JECXZ, x86asm.JCXZ:
		return p, fmt.Errorf("%w: %v has only a rel8 form", ErrUnsupported, inst.Op)
	case x86asm.SYSCALL:
		// Fine out of line: the kernel returns to the next instruction, the jump back.
	}
	insn := append([]byte(nil), code[:inst.Len]...)
	if inst.PCRel == 1 {
		// A short conditional jump: rewrite as jcc rel32 (0f 8x) so its
		// target stays reachable from the slot.
		if insn[0] < 0x70 || insn[0] > 0x7f || inst.Len != 2 {
			return p, fmt.Errorf("%w: rel8 operand in %v", ErrUnsupported, inst)
		}
		target := int64(next) + int64(int8(insn[1]))
		insn = []byte{0x0f, 0x80 | (insn[0] & 0xf), 0, 0, 0, 0}
		rel := target - int64(slot+6)
		if rel < math.MinInt32 || rel > math.MaxInt32 {
			return p, fmt.Errorf("%w: jump target out of rel32 range of the scratch page", ErrUnsupported)
		}
		binary.LittleEndian.PutUint32(insn[2:], uint32(int32(rel)))
	} else if inst.PCRel == 4 {
		// RIP-relative operand or rel32 branch: point it at the same target
		// from the slot (target = next + old; new = target - slot end).
		old := int64(int32(binary.LittleEndian.Uint32(insn[inst.PCRelOff:])))
		rel := int64(next) + old - int64(slot+uint64(inst.Len))
		if rel < math.MinInt32 || rel > math.MaxInt32 {
			return p, fmt.Errorf("%w: rip-relative %v out of rel32 range of the scratch page", ErrUnsupported, inst)
		}
		binary.LittleEndian.PutUint32(insn[inst.PCRelOff:], uint32(int32(rel)))
	} else if inst.PCRel != 0 {
		return p, fmt.Errorf("%w: %d-byte pc-relative operand in %v", ErrUnsupported, inst.PCRel, inst)
	}
	// jmp *0(%rip); .quad next — an absolute jump that clobbers no register.
	p.Slot = append(insn, 0xff, 0x25, 0, 0, 0, 0)
	p.Slot = binary.LittleEndian.AppendUint64(p.Slot, next)
	p.Action, p.Resume = OutOfLine, slot
	return p, nil
}
