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

// MaxSlot bounds the scratch bytes one planned function needs: a detour
// trampoline (26 bytes of prologue), the relocated copy of at most 19
// displaced bytes (a call grows 5 → 25 bytes, a jcc rel8 2 → 6), and an
// absolute jump back (14 bytes).
const MaxSlot = 176

// How the code at a traced function's entry reaches the tracer and goes on.
type Action uint8

const (
	// Jump: an int3 over an instruction that only moves rip (nop, endbr64,
	// jmp): set rip to Resume.
	Jump Action = iota + 1
	// OutOfLine: an int3 over an instruction whose relocated copy runs in a
	// scratch slot that jumps back: set rip to Resume, the slot. Cheaper than
	// emulating push/mov/sub in the tracer, which would need SETREGS and a
	// memory write (docs/ptrace-costs.md).
	OutOfLine
	// Detoured: a 5-byte jmp at the entry leads to a trampoline that loads
	// the return address into r11, stops at an int3 (Trap), then swaps the
	// return address for the return breakpoint itself and runs the displaced
	// instructions. At the stop the tracer reads the registers and continues:
	// no memory access and no rip write, 3 system calls fewer per entry
	// than OutOfLine.
	Detoured
)

// Plan says how a traced function's entry is instrumented.
type Plan struct {
	Action Action
	Resume uint64 // Jump, OutOfLine: new rip after the stop
	Slot   []byte // OutOfLine, Detoured: code for the scratch slot
	// Detoured: the jmp to write at Patch, over the bytes in Orig (what a
	// detach restores), and the address of the trampoline's int3.
	Patch uint64
	Jmp   []byte
	Orig  []byte
	Trap  uint64
	// Moved maps the address of each instruction the jmp displaces, after
	// the first, to its copy in the trampoline: where a thread stopped
	// there goes on once the jmp is written.
	Moved map[uint64]uint64
}

// ErrUnsupported is wrapped by Prepare and PrepareDetour for code they
// cannot displace.
var ErrUnsupported = errors.New("cannot displace instruction")

var endbr64 = []byte{0xf3, 0x0f, 0x1e, 0xfa}

// Prepare plans an int3 over the instruction at addr (code holds its bytes,
// at least 15 when available); slot is the scratch address its copy would
// live at.
func Prepare(code []byte, addr, slot uint64) (Plan, error) {
	if bytes.HasPrefix(code, endbr64) {
		return Plan{Action: Jump, Resume: addr + 4}, nil
	}
	inst, err := decode(code, addr)
	if err != nil {
		return Plan{}, err
	}
	next := addr + uint64(inst.Len)
	switch inst.Op {
	case x86asm.NOP:
		return Plan{Action: Jump, Resume: next}, nil
	case x86asm.INT:
		if code[0] == Int3 {
			return Plan{}, fmt.Errorf("%w: an int3 is there already: another tracer's breakpoint (a debugger's, or a uprobe's: bpftrace, perf probe)", ErrUnsupported)
		}
	case x86asm.JMP:
		if rel, ok := inst.Args[0].(x86asm.Rel); ok {
			return Plan{Action: Jump, Resume: uint64(int64(next) + int64(rel))}, nil
		}
	}
	s, err := relocate(nil, inst, code, addr, slot)
	if err != nil {
		return Plan{}, err
	}
	return Plan{Action: OutOfLine, Resume: slot, Slot: jumpBack(s, slot, next)}, nil
}

// Trampoline prologue of a detour, up to and including the int3:
//
//	mov %r11,-0x10(%rsp)  save r11 in the red zone (free at a function's entry)
//	mov (%rsp),%r11       the return address, for the tracer to read
//	int3
var detourHead = []byte{0x4c, 0x89, 0x5c, 0x24, 0xf0, 0x4c, 0x8b, 0x1c, 0x24, Int3}

// DetourHeadLen is the length of a trampoline's head, its int3 included:
// a thread stopped in it has not started the call yet.
const DetourHeadLen = 10

// PrepareDetour plans a detour for the function at addr whose code is body
// (its whole symbol size): a jmp rel32 at the entry (after an endbr64, which
// stays for indirect-branch tracking) to a trampoline at slot that stops at
// an int3 with the return address in r11, replaces the return address with
// ret (the return breakpoint), restores r11, runs the displaced instructions
// and jumps back. The trampoline is within rel32 range of the function.
//
// It fails with ErrUnsupported when the displaced bytes cannot be moved: a
// function shorter than the jmp, an instruction x86asm cannot decode, or an
// instruction that cannot be relocated. The caller then falls back to
// Prepare. The caller also checks, with the Branches of every function of
// the image, that no branch lands inside the jmp's five bytes.
func PrepareDetour(body []byte, addr, slot, ret uint64) (Plan, error) {
	plan, err := PrepareDetourWith(body, addr, slot, func(slot uint64) ([]byte, error) {
		t := append([]byte(nil), detourHead...)
		// lea ret(%rip),%r11; mov %r11,(%rsp); mov -0x10(%rsp),%r11
		t = append(t, 0x4c, 0x8d, 0x1d)
		rel := int64(ret) - int64(slot+uint64(len(t))+4)
		if rel < math.MinInt32 || rel > math.MaxInt32 {
			return nil, fmt.Errorf("%w: return breakpoint out of rel32 range", ErrUnsupported)
		}
		t = binary.LittleEndian.AppendUint32(t, uint32(int32(rel)))
		return append(t, 0x4c, 0x89, 0x1c, 0x24, 0x4c, 0x8b, 0x5c, 0x24, 0xf0), nil
	})
	if err == nil {
		plan.Trap = slot + uint64(len(detourHead)) - 1
	}
	return plan, err
}

// PrepareDetourWith plans a detour whose trampoline at slot starts with
// the code head returns for it (the fast engine's stub head), then runs
// the displaced instructions and jumps back. It fails as PrepareDetour
// does; Trap is not set.
func PrepareDetourWith(body []byte, addr, slot uint64, head func(slot uint64) ([]byte, error)) (Plan, error) {
	patch := addr
	if bytes.HasPrefix(body, endbr64) {
		patch += 4
	}
	start := int(patch - addr)
	// Instructions covering the 5 bytes of the jmp: at most 5 (an
	// x86asm.Inst is large; a growing slice of them was a third of this
	// function's time).
	var buf [5]x86asm.Inst
	insts := buf[:0]
	n := start
	for n < start+5 {
		if n >= len(body) {
			return Plan{}, fmt.Errorf("%w: function of %d bytes is too short for a jump", ErrUnsupported, len(body))
		}
		inst, err := decode(body[n:], addr+uint64(n))
		if err != nil {
			return Plan{}, err
		}
		insts = append(insts, inst)
		n += inst.Len
	}
	end := patch + uint64(n-start)
	t, err := head(slot)
	if err != nil {
		return Plan{}, err
	}
	off := start
	var moved map[uint64]uint64 // most displace one instruction: none moved
	for _, inst := range insts {
		if off > start {
			if moved == nil {
				moved = map[uint64]uint64{}
			}
			moved[addr+uint64(off)] = slot + uint64(len(t))
		}
		var err error
		if t, err = relocate(t, inst, body[off:], addr+uint64(off), slot); err != nil {
			return Plan{}, err
		}
		off += inst.Len
	}
	t = jumpBack(t, slot, end)
	jmp, err := entryJmp(patch, slot)
	if err != nil {
		return Plan{}, err
	}
	return Plan{
		Action: Detoured, Slot: t, Patch: patch, Jmp: jmp,
		Orig:  append([]byte(nil), body[start:start+5]...),
		Moved: moved,
	}, nil
}

// entryJmp is the jmp rel32 written at patch to the trampoline at slot.
func entryJmp(patch, slot uint64) ([]byte, error) {
	rel := int64(slot) - int64(patch+5)
	if rel < math.MinInt32 || rel > math.MaxInt32 {
		return nil, fmt.Errorf("%w: trampoline out of rel32 range of the function", ErrUnsupported)
	}
	return binary.LittleEndian.AppendUint32([]byte{0xe9}, uint32(int32(rel))), nil
}

// JumpBack appends to t, placed at base, a jump to target (rel32 when in
// range, else an absolute indirect jmp); it clobbers no register.
func JumpBack(t []byte, base, target uint64) []byte { return jumpBack(t, base, target) }

func decode(code []byte, addr uint64) (x86asm.Inst, error) {
	inst, err := x86asm.Decode(code, 64)
	if err != nil {
		return inst, fmt.Errorf("%w: decoding % x at %#x: %v", ErrUnsupported, code[:min(len(code), 8)], addr, err)
	}
	return inst, nil
}

// relocate appends to t the code that does what inst (decoded from code at
// addr) does, placed at base+len(t): rip-relative operands and relative
// branches keep their targets, a call pushes the original return address.
func relocate(t []byte, inst x86asm.Inst, code []byte, addr, base uint64) ([]byte, error) {
	pos := base + uint64(len(t))
	next := addr + uint64(inst.Len)
	insn := code[:inst.Len]
	if insn[0] == Int3 {
		return nil, fmt.Errorf("%w: an int3 is there already: another tracer's breakpoint (a debugger's, or a uprobe's: bpftrace, perf probe)", ErrUnsupported)
	}
	rel, isRel := inst.Args[0].(x86asm.Rel)
	switch {
	case inst.Op == x86asm.CALL && !isRel:
		return relocateIndirectCall(t, inst, insn, addr, base)
	case inst.PCRel == 0:
		return append(t, insn...), nil
	case inst.Op == x86asm.CALL && isRel:
		// Push the original return address, so unwinders and exceptions see
		// the real caller.
		return jumpBack(pushReturn(t, next), base, uint64(int64(next)+int64(rel))), nil
	case inst.Op == x86asm.JMP && isRel:
		return jumpBack(t, base, uint64(int64(next)+int64(rel))), nil
	case inst.PCRel == 1 && insn[0] >= 0x70 && insn[0] <= 0x7f && inst.Len == 2:
		// A short conditional jump: rewrite as jcc rel32 (0f 8x).
		t = append(t, 0x0f, 0x80|(insn[0]&0xf))
		return appendRel32(t, pos+6, uint64(int64(next)+int64(int8(insn[1]))))
	case inst.PCRel == 4:
		// RIP-relative operand or rel32 branch: same target from pos.
		old := int64(int32(binary.LittleEndian.Uint32(insn[inst.PCRelOff:])))
		t = append(t, insn[:inst.PCRelOff]...)
		t, err := appendRel32(t, pos+uint64(inst.Len), uint64(int64(next)+old))
		if err != nil {
			return nil, fmt.Errorf("%w (%v)", err, inst)
		}
		return append(t, insn[inst.PCRelOff+4:]...), nil
	}
	if inst.PCRel == 1 {
		return nil, fmt.Errorf("%w: %v has only a rel8 form", ErrUnsupported, inst.Op)
	}
	return nil, fmt.Errorf("%w: %d-byte pc-relative operand in %v", ErrUnsupported, inst.PCRel, inst)
}

// appendRel32 appends the rel32 that reaches target from an instruction
// ending at end.
func appendRel32(t []byte, end, target uint64) ([]byte, error) {
	rel := int64(target) - int64(end)
	if rel < math.MinInt32 || rel > math.MaxInt32 {
		return nil, fmt.Errorf("%w: target %#x out of rel32 range of the scratch page", ErrUnsupported, target)
	}
	return binary.LittleEndian.AppendUint32(t, uint32(int32(rel))), nil
}

// jumpBack appends a jump to target from base+len(t): jmp rel32 when in
// range, else jmp *0(%rip) with the address after it. Neither clobbers a
// register.
func jumpBack(t []byte, base, target uint64) []byte {
	rel := int64(target) - int64(base+uint64(len(t))+5)
	if rel >= math.MinInt32 && rel <= math.MaxInt32 {
		t = append(t, 0xe9)
		return binary.LittleEndian.AppendUint32(t, uint32(int32(rel)))
	}
	t = append(t, 0xff, 0x25, 0, 0, 0, 0)
	return binary.LittleEndian.AppendUint64(t, target)
}

// pushReturn appends code that pushes ret without touching a register or
// the flags the callee could see: lea -8(%rsp),%rsp; movl $lo,(%rsp);
// movl $hi,4(%rsp).
func pushReturn(t []byte, ret uint64) []byte {
	t = append(t, 0x48, 0x8d, 0x64, 0x24, 0xf8, 0xc7, 0x04, 0x24)
	t = binary.LittleEndian.AppendUint32(t, uint32(ret))
	t = append(t, 0xc7, 0x44, 0x24, 0x04)
	return binary.LittleEndian.AppendUint32(t, uint32(ret>>32))
}

// relocateIndirectCall appends an indirect call (call *%reg, call *mem,
// call *disp(%rip)) as a push of its original return address and the
// matching indirect jmp, so the callee returns to the real caller and an
// unwinder never sees the scratch page. Operands based on rsp are refused:
// the push moves rsp before the jmp reads them.
func relocateIndirectCall(t []byte, inst x86asm.Inst, insn []byte, addr, base uint64) ([]byte, error) {
	if m, ok := inst.Args[0].(x86asm.Mem); ok && (m.Base == x86asm.RSP || m.Index == x86asm.RSP) {
		return nil, fmt.Errorf("%w: indirect call through the stack (%v)", ErrUnsupported, inst)
	}
	if r, ok := inst.Args[0].(x86asm.Reg); ok && r == x86asm.RSP {
		return nil, fmt.Errorf("%w: %v", ErrUnsupported, inst)
	}
	i := 0
	for i < len(insn) && (isLegacyPrefix(insn[i]) || insn[i]&0xf0 == 0x40) {
		i++
	}
	if i+1 >= len(insn) || insn[i] != 0xff || (insn[i+1]>>3)&7 != 2 {
		return nil, fmt.Errorf("%w: unexpected call encoding % x", ErrUnsupported, insn)
	}
	t = pushReturn(t, addr+uint64(len(insn)))
	jmp := append([]byte(nil), insn...)
	jmp[i+1] = jmp[i+1]&^0x38 | 4<<3 // ff /2 (call) -> ff /4 (jmp)
	if inst.PCRel == 4 {
		pos := base + uint64(len(t))
		old := int64(int32(binary.LittleEndian.Uint32(jmp[inst.PCRelOff:])))
		rel := int64(addr) + int64(len(insn)) + old - int64(pos+uint64(len(jmp)))
		if rel < math.MinInt32 || rel > math.MaxInt32 {
			return nil, fmt.Errorf("%w: rip-relative %v out of rel32 range of the scratch page", ErrUnsupported, inst)
		}
		binary.LittleEndian.PutUint32(jmp[inst.PCRelOff:], uint32(int32(rel)))
	}
	return append(t, jmp...), nil
}

func isLegacyPrefix(b byte) bool {
	switch b {
	case 0x66, 0x67, 0xf2, 0xf3, 0x2e, 0x3e, 0x26, 0x64, 0x65, 0x36:
		return true
	}
	return false
}

// Refs is what a function's code refers to.
type Refs struct {
	// Targets of its direct jumps and calls (jump tables are not followed).
	Targets []uint64
	// Slots its rip-relative indirect calls and jumps read their target
	// from (GOT slots of code built with -fno-plt).
	Slots []uint64
	// Loads are the other rip-relative memory operands: a GOT slot read as
	// data is a function's address taken, which must stay the real one.
	Loads []uint64
	// Sites are its 5-byte direct calls and jumps (e8/e9 rel32): call
	// sites the fast engine may aim at a function's stub.
	Sites []Site
	// Calls are the targets of its direct calls of any encoding (a
	// prefixed e8 too: the linker relaxes -fno-plt calls to 67 e8), kept
	// only with WantCalls.
	Calls     []uint64
	WantCalls bool
}

// Site is a direct call or jump: the address of its instruction and its
// target.
type Site struct{ At, Target uint64 }

// Branches returns the Refs of body, the code of the function at addr
// (quick decodes most instructions, x86asm the rest). Bytes that do not
// decode are stepped over one at a time and the first is reported
// in err: targets after it may be missing, so a detour must not rely on
// them for this function.
func Branches(body []byte, addr uint64) (refs Refs, err error) {
	err = refs.Add(body, addr)
	return refs, err
}

// Add appends to r the Refs of body, the code of the function at addr, as
// Branches returns them: a decoder of many functions keeps one Refs
// (one set of lists per function, copied again for the merge, made
// 18,000 of the 50,000 allocations of decoding sqlite3). On error, r
// holds what decoded.
func (r *Refs) Add(body []byte, addr uint64) (err error) {
	for off := 0; off < len(body); {
		if body[off] == endbr64[0] && bytes.HasPrefix(body[off:], endbr64) {
			off += 4
			continue
		}
		q, ok := quick(body[off:])
		if !ok {
			inst, derr := x86asm.Decode(body[off:], 64)
			if derr != nil {
				if err == nil {
					err = fmt.Errorf("%w: decoding the function body at +%#x: %v", ErrUnsupported, off, derr)
				}
				off++
				continue
			}
			q = fromX86asm(inst)
		}
		next := addr + uint64(off+q.len)
		switch {
		case q.rel:
			target := next + uint64(q.disp)
			r.Targets = append(r.Targets, target)
			if q.len == 5 && (body[off] == 0xe8 || body[off] == 0xe9) {
				r.Sites = append(r.Sites, Site{At: addr + uint64(off), Target: target})
			}
			if r.WantCalls && isCall(body[off:off+q.len]) {
				r.Calls = append(r.Calls, target)
			}
		case q.slot:
			r.Slots = append(r.Slots, next+uint64(q.disp))
		case q.rip:
			r.Loads = append(r.Loads, next+uint64(q.disp))
		}
		off += q.len
	}
	return err
}

// isCall reports whether the relative branch inst is a call: e8 after
// any legacy prefixes (66, 67, f2 bnd, ...).
func isCall(inst []byte) bool {
	for _, b := range inst {
		switch b {
		case 0x26, 0x2e, 0x36, 0x3e, 0x64, 0x65, 0x66, 0x67, 0xf0, 0xf2, 0xf3:
			continue
		}
		return b == 0xe8
	}
	return false
}

// TailJump reports where the code at addr jumps unconditionally within
// its first three instructions, before any other branch, call or return:
// a wrapper that sets an argument and jumps to the function doing the
// work (glibc's setjmp: mov $1,%esi; jmp __sigsetjmp).
func TailJump(code []byte, addr uint64) (uint64, bool) {
	off := 0
	if bytes.HasPrefix(code, endbr64) {
		off = 4
	}
	for range 3 {
		if off >= len(code) {
			return 0, false
		}
		inst, err := x86asm.Decode(code[off:], 64)
		if err != nil {
			return 0, false
		}
		off += inst.Len
		switch inst.Op {
		case x86asm.JMP:
			if rel, ok := inst.Args[0].(x86asm.Rel); ok {
				return addr + uint64(off) + uint64(int64(rel)), true
			}
			return 0, false
		case x86asm.CALL, x86asm.RET, x86asm.LCALL, x86asm.LJMP, x86asm.LRET, x86asm.SYSCALL, x86asm.INT:
			return 0, false
		}
		if len(inst.Args) > 0 && inst.Args[0] != nil {
			if _, ok := inst.Args[0].(x86asm.Rel); ok {
				return 0, false // a conditional branch
			}
		}
	}
	return 0, false
}

// Returns lists the ret instructions of the function at addr (body, its
// whole symbol size): the places it returns from. It reports false when
// it cannot tell that these are all: an instruction that does not
// decode, a branch out of the function (a tail call, conditional or not)
// or an indirect jump.
// Calls stay calls, and those that do not return (__stack_chk_fail) do
// no harm.
func Returns(body []byte, addr uint64) ([]uint64, bool) {
	var rets []uint64
	for off := 0; off < len(body); {
		inst, err := x86asm.Decode(body[off:], 64)
		if err != nil {
			return nil, false
		}
		at := addr + uint64(off)
		off += inst.Len
		switch inst.Op {
		case x86asm.RET:
			rets = append(rets, at)
			continue
		case x86asm.LRET, x86asm.LJMP:
			return nil, false
		case x86asm.CALL:
			continue
		case x86asm.JMP:
			if _, ok := inst.Args[0].(x86asm.Rel); !ok {
				return nil, false // indirect
			}
		}
		// A branch, conditional or not, out of the function: a tail call.
		if rel, ok := inst.Args[0].(x86asm.Rel); ok {
			if to := addr + uint64(off) + uint64(int64(rel)); to < addr || to >= addr+uint64(len(body)) {
				return nil, false
			}
		}
	}
	return rets, len(rets) > 0
}

// PrepareClone plans a detour to a copy of the whole function at addr
// (body, its whole symbol size), for a function whose own branches land
// inside the 5 bytes the jmp overwrites (a loop back to its first
// instructions): the trampoline at slot is head's code, then every
// instruction of the function relocated, its branches to itself aimed at
// the copy, so that once entered the original body never runs. A call of
// the function itself stays a call of its entry (traced). It fails with
// ErrUnsupported for what the copy cannot hold: an instruction that does
// not decode, an indirect jump (a jump table could lead back into the
// original), an internal branch to the middle of an instruction, or a
// rel8-only branch (loop, jrcxz). The caller checks that no other
// function's branch lands inside the jmp.
//
// Calls in the copy are real calls: their return addresses are in the
// scratch mapping, where an unwinder finds no CFI. With calls false (the
// module uses C++ exceptions), a function that makes calls is refused.
func PrepareClone(body []byte, addr, slot uint64, calls bool, head func(slot uint64) ([]byte, error)) (Plan, error) {
	patch := addr
	if bytes.HasPrefix(body, endbr64) {
		patch += 4
	}
	if int(patch-addr)+5 > len(body) {
		return Plan{}, fmt.Errorf("%w: function of %d bytes is too short for a jump", ErrUnsupported, len(body))
	}
	type insn struct {
		off  int
		inst x86asm.Inst
	}
	var insts []insn
	starts := map[uint64]bool{}
	for off := 0; off < len(body); {
		if bytes.HasPrefix(body[off:], endbr64) {
			insts = append(insts, insn{off, x86asm.Inst{Op: x86asm.NOP, Len: 4}})
			starts[addr+uint64(off)] = true
			off += 4
			continue
		}
		inst, err := decode(body[off:], addr+uint64(off))
		if err != nil {
			return Plan{}, err
		}
		if inst.Op == x86asm.JMP {
			if _, ok := inst.Args[0].(x86asm.Rel); !ok {
				if m, ok := inst.Args[0].(x86asm.Mem); !ok || m.Base != x86asm.RIP {
					return Plan{}, fmt.Errorf("%w: indirect jump (%v) in a function to copy", ErrUnsupported, inst)
				}
			}
		}
		if inst.Op == x86asm.CALL && !calls {
			return Plan{}, fmt.Errorf("%w: a copy's calls would hide it from the C++ unwinder", ErrUnsupported)
		}
		starts[addr+uint64(off)] = true
		insts = append(insts, insn{off, inst})
		off += inst.Len
	}
	end := addr + uint64(len(body))
	// internal returns the target of a branch inside the function, other
	// than a call of its entry.
	internal := func(in insn) (uint64, bool, error) {
		rel, ok := in.inst.Args[0].(x86asm.Rel)
		if !ok || in.inst.PCRel == 0 {
			return 0, false, nil
		}
		target := uint64(int64(addr) + int64(in.off+in.inst.Len) + int64(rel))
		if target <= addr || target >= end {
			// Outside, or the entry itself: a jump there goes through the
			// entry's jmp and is recorded as a call, as without the copy.
			return 0, false, nil
		}
		if in.inst.Op == x86asm.CALL {
			return 0, false, fmt.Errorf("%w: call inside the function (%v)", ErrUnsupported, in.inst)
		}
		if !starts[target] {
			return 0, false, fmt.Errorf("%w: branch into the middle of an instruction at %#x", ErrUnsupported, target)
		}
		return target, true, nil
	}
	// emit lays the copy out at slot; where maps each instruction's
	// original address to its copy (nil on the first pass).
	emit := func(where map[uint64]uint64) ([]byte, map[uint64]uint64, error) {
		t, err := head(slot)
		if err != nil {
			return nil, nil, err
		}
		at := map[uint64]uint64{}
		for _, in := range insts {
			pos := slot + uint64(len(t))
			at[addr+uint64(in.off)] = pos
			code := body[in.off:]
			target, ok, err := internal(in)
			to := where[target]
			if where == nil {
				to = pos // the first pass only measures
			}
			switch {
			case err != nil:
				return nil, nil, err
			case ok && in.inst.Op == x86asm.JMP:
				t = append(t, 0xe9)
				t, err = appendRel32(t, pos+5, to)
			case ok && code[0] >= 0x70 && code[0] <= 0x7f && in.inst.Len == 2:
				t = append(t, 0x0f, 0x80|code[0]&0xf)
				t, err = appendRel32(t, pos+6, to)
			case ok && code[0] == 0x0f && in.inst.Len == 6 && code[1]&0xf0 == 0x80:
				t = append(t, 0x0f, code[1])
				t, err = appendRel32(t, pos+6, to)
			case ok:
				err = fmt.Errorf("%w: %v has only a rel8 form", ErrUnsupported, in.inst.Op)
			case in.inst.Op == x86asm.NOP && in.inst.Len == 4 && bytes.HasPrefix(code, endbr64):
				t = append(t, endbr64...)
			case in.inst.Op == x86asm.CALL && in.inst.PCRel == 4:
				// A real call from the copy, its rel32 (a direct target or a
				// rip-relative slot) adjusted: it returns into the copy.
				insn := code[:in.inst.Len]
				next := addr + uint64(in.off+in.inst.Len)
				old := int64(int32(binary.LittleEndian.Uint32(insn[in.inst.PCRelOff:])))
				t = append(t, insn[:in.inst.PCRelOff]...)
				t, err = appendRel32(t, pos+uint64(in.inst.Len), uint64(int64(next)+old))
				t = append(t, insn[in.inst.PCRelOff+4:]...)
			case in.inst.Op == x86asm.CALL && in.inst.PCRel == 0:
				t = append(t, code[:in.inst.Len]...)
			default:
				t, err = relocate(t, in.inst, code, addr+uint64(in.off), slot)
			}
			if err != nil {
				return nil, nil, err
			}
		}
		return t, at, nil
	}
	// Code that falls off the end goes on where it would have.
	withEnd := func(where map[uint64]uint64) ([]byte, map[uint64]uint64, error) {
		t, at, err := emit(where)
		if err != nil {
			return nil, nil, err
		}
		return jumpBack(t, slot, end), at, nil
	}
	first, where, err := withEnd(nil)
	if err != nil {
		return Plan{}, err
	}
	t, again, err := withEnd(where)
	if err != nil {
		return Plan{}, err
	}
	if len(t) != len(first) || again[patch] != where[patch] {
		return Plan{}, fmt.Errorf("%w: the copy's layout is not stable", ErrUnsupported)
	}
	// The jmp leads to the head, which falls into the copy of the first
	// instruction: a function with endbr64 starts its copy with one too.
	jmp, err := entryJmp(patch, slot)
	if err != nil {
		return Plan{}, err
	}
	return Plan{
		Action: Detoured, Slot: t, Patch: patch, Jmp: jmp,
		Orig: append([]byte(nil), body[patch-addr:patch-addr+5]...),
	}, nil
}
