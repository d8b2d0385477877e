package bp

import "golang.org/x/arch/x86/x86asm"

// A quick decoder for what Branches needs of an instruction: its length,
// the target of a relative branch, and a rip-relative memory operand.
// x86asm.Decode takes about 135 ns per instruction (BenchmarkBranches),
// and Branches decodes every function of a module before the program
// starts: 46 ms for sqlite3's 1.5 MB of code. quick handles the
// instructions compilers emit most, from the opcode maps of the Intel SDM,
// Volume 2, Appendix A, and says nothing (ok false) of the rest, which go
// to x86asm. TestQuickMatchesX86asm and FuzzQuick hold it to x86asm's
// answers wherever it answers.

// fromX86asm is what quick would report of inst, as x86asm decodes it.
func fromX86asm(inst x86asm.Inst) (in quickInst) {
	in.len = inst.Len
	if rel, ok := inst.Args[0].(x86asm.Rel); ok && inst.PCRel > 0 {
		in.rel, in.disp = true, int64(rel)
		return in
	}
	for i, a := range inst.Args {
		m, ok := a.(x86asm.Mem)
		if !ok || m.Base != x86asm.RIP || m.Index != 0 {
			continue
		}
		// x86asm gives a rip-relative disp32 zero-extended.
		in.rip, in.disp = true, int64(int32(m.Disp))
		in.slot = i == 0 && (inst.Op == x86asm.CALL || inst.Op == x86asm.JMP)
	}
	return in
}

// quickInst is what quick reports of one instruction.
type quickInst struct {
	len int
	// rel: a relative branch (jmp, jcc, call, loop, jrcxz) to next+disp.
	rel bool
	// rip: a rip-relative memory operand at next+disp; slot when it is the
	// operand of an indirect call or jmp (ff /2, ff /4).
	rip, slot bool
	disp      int64
}

// Operand kinds of the one-byte and two-byte opcode maps.
const (
	opBad   = iota // not handled: x86asm decodes it
	opNone         // no operand bytes
	opM            // ModRM
	opMIb          // ModRM, imm8
	opMIz          // ModRM, imm16/32
	opIb           // imm8
	opIz           // imm16/32
	opIw           // imm16
	opRel8         // rel8 branch
	opRel32        // rel32 branch
	opMovI         // b8+r: imm16/32/64
	opGrp3b        // f6: ModRM, imm8 for /0 and /1 (test)
	opGrp3v        // f7: ModRM, imm16/32 for /0 and /1
	opEnter        // c8: imm16, imm8
)

var oneByte = func() (t [256]uint8) {
	for _, base := range []int{0x00, 0x08, 0x10, 0x18, 0x20, 0x28, 0x30, 0x38} {
		t[base], t[base+1], t[base+2], t[base+3] = opM, opM, opM, opM
		t[base+4], t[base+5] = opIb, opIz
	}
	for op := 0x50; op <= 0x5f; op++ {
		t[op] = opNone
	}
	t[0x63] = opM
	t[0x68], t[0x69], t[0x6a], t[0x6b] = opIz, opMIz, opIb, opMIb
	for op := 0x70; op <= 0x7f; op++ {
		t[op] = opRel8
	}
	t[0x80], t[0x81], t[0x83] = opMIb, opMIz, opMIb
	for op := 0x84; op <= 0x8d; op++ {
		t[op] = opM
	}
	t[0x8c] = opBad // mov from a segment register
	for op := 0x90; op <= 0x99; op++ {
		t[op] = opNone
	}
	t[0x9b], t[0x9c], t[0x9d], t[0x9e], t[0x9f] = opNone, opNone, opNone, opNone, opNone
	for _, op := range []int{0xa4, 0xa5, 0xa6, 0xa7, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf} {
		t[op] = opNone
	}
	t[0xa8], t[0xa9] = opIb, opIz
	for op := 0xb0; op <= 0xb7; op++ {
		t[op] = opIb
	}
	for op := 0xb8; op <= 0xbf; op++ {
		t[op] = opMovI
	}
	t[0xc0], t[0xc1], t[0xc2], t[0xc3] = opMIb, opMIb, opIw, opNone
	t[0xc6], t[0xc7], t[0xc8], t[0xc9] = opMIb, opMIz, opEnter, opNone
	t[0xcc], t[0xcd] = opNone, opIb
	for op := 0xd0; op <= 0xd3; op++ {
		t[op] = opM
	}
	t[0xe0], t[0xe1], t[0xe2], t[0xe3] = opRel8, opRel8, opRel8, opRel8
	t[0xe8], t[0xe9], t[0xeb] = opRel32, opRel32, opRel8
	t[0xf4], t[0xf5] = opNone, opNone
	t[0xf6], t[0xf7] = opGrp3b, opGrp3v
	for op := 0xf8; op <= 0xfd; op++ {
		t[op] = opNone
	}
	t[0xfe], t[0xff] = opM, opM
	return t
}()

// Prefix classes of a two-byte opcode (the SSE opcodes' mandatory
// prefixes): which of none, 66, f3 and f2 make it an instruction.
const (
	pNP  = 1 << iota // no prefix
	p66              // 66
	pF3              // f3
	pF2              // f2
	pAll = pNP | p66 | pF3 | pF2
	pSSE = pNP | p66 // MMX/SSE and their SSE2 66 forms
)

// twoByte is the 0f map: the operand kind, and the prefix classes that
// make each opcode valid.
var twoByte, twoBytePrefixes = func() (t, ps [256]uint8) {
	set := func(kind, prefixes uint8, ops ...int) {
		for _, op := range ops {
			t[op], ps[op] = kind, prefixes
		}
	}
	span := func(lo, hi int) []int {
		var ops []int
		for op := lo; op <= hi; op++ {
			ops = append(ops, op)
		}
		return ops
	}
	set(opNone, pNP, 0x05, 0x0b, 0x31, 0xa2) // syscall, ud2, rdtsc, cpuid
	set(opM, pAll, 0x10, 0x11, 0x2a, 0x2c, 0x2d, 0x51, 0x58, 0x59, 0x5a, 0x5c, 0x5d, 0x5e, 0x5f)
	set(opM, pSSE, 0x14, 0x15, 0x28, 0x29, 0x2e, 0x2f, 0x54, 0x55, 0x56, 0x57)
	set(opM, pSSE, span(0x60, 0x6b)...)
	set(opM, pSSE, 0x6e, 0x74, 0x75, 0x76)
	set(opM, pSSE|pF3, 0x5b, 0x6f, 0x7e, 0x7f)
	set(opMIb, pAll, 0x70, 0xc2)
	set(opMIb, pSSE, 0xc6)
	set(opM, pSSE, span(0xd1, 0xd5)...)
	set(opM, pSSE, span(0xd8, 0xe5)...)
	set(opM, pSSE, span(0xe8, 0xef)...)
	set(opM, pSSE, span(0xf1, 0xf6)...)
	set(opM, pSSE, span(0xf8, 0xfe)...)
	// Integer instructions: a rep prefix does not change them.
	set(opM, pAll, span(0x40, 0x4f)...) // cmovcc
	set(opM, pAll, span(0x90, 0x9f)...) // setcc
	set(opM, pAll, 0x18, 0x1f)          // prefetch, nopl: /reg checked in quick
	set(opRel32, pAll, span(0x80, 0x8f)...)
	set(opM, pAll, 0xa3, 0xa5, 0xab, 0xad, 0xaf, 0xb0, 0xb1, 0xb3, 0xb6, 0xb7, 0xbb, 0xbc, 0xbd, 0xbe, 0xbf, 0xc0, 0xc1)
	set(opMIb, pAll, 0xa4, 0xac, 0xba)
	set(opNone, pAll, span(0xc8, 0xcf)...) // bswap
	return t, ps
}()

// quick decodes the instruction at the start of b (64-bit mode).
func quick(b []byte) (in quickInst, ok bool) {
	i := 0
	opsize := false
	var rep byte // the last f2 or f3
	for ; i < len(b); i++ {
		switch b[i] {
		case 0x66:
			opsize = true
		case 0xf2, 0xf3:
			rep = b[i]
		case 0x2e, 0x3e, 0x26, 0x36, 0x64, 0x65, 0xf0:
		case 0x67:
			return in, false // 32-bit addressing
		default:
			goto prefixesDone
		}
	}
prefixesDone:
	if i >= len(b) || i > 4 { // long runs of prefixes (padding) go to x86asm
		return in, false
	}
	rexW := false
	if b[i]&0xf0 == 0x40 {
		rexW = b[i]&8 != 0
		i++
		if i >= len(b) {
			return in, false
		}
	}
	op := b[i]
	i++
	kind := oneByte[op]
	twoB := op == 0x0f
	if twoB {
		if i >= len(b) {
			return in, false
		}
		op = b[i]
		i++
		kind = twoByte[op] // 0f 38 and 0f 3a (SSSE3, SSE4) go to x86asm
		class := uint8(pNP)
		switch {
		case rep != 0 && opsize:
			return in, false // which one is mandatory: x86asm decides
		case rep == 0xf3:
			class = pF3
		case rep == 0xf2:
			class = pF2
		case opsize:
			class = p66
		}
		if twoBytePrefixes[op]&class == 0 {
			return in, false
		}
	}
	if kind == opBad {
		return in, false
	}
	// Operand-size prefixed branches are rel16 to x86asm.
	if opsize && (kind == opRel8 || kind == opRel32) {
		return in, false
	}
	imm := 0
	iz := 4 // an Iz immediate: 16 bits with 66, unless REX.W makes it 64-bit
	if opsize && !rexW {
		iz = 2
	}
	switch kind {
	case opIb, opMIb:
		imm = 1
	case opIz, opMIz:
		imm = iz
	case opIw:
		imm = 2
	case opEnter:
		imm = 3
	case opMovI:
		imm = iz
		if rexW {
			imm = 8
		}
	case opRel8:
		if i >= len(b) {
			return in, false
		}
		in.len = i + 1
		in.rel, in.disp = true, int64(int8(b[i]))
		return in, true
	case opRel32:
		if i+4 > len(b) {
			return in, false
		}
		in.len = i + 4
		in.rel, in.disp = true, int64(int32(le32(b[i:])))
		return in, true
	}
	hasModRM := kind == opM || kind == opMIb || kind == opMIz || kind == opGrp3b || kind == opGrp3v
	if hasModRM {
		if i >= len(b) {
			return in, false
		}
		modrm := b[i]
		i++
		mod, reg, rm := modrm>>6, modrm>>3&7, modrm&7
		if twoB {
			switch op {
			case 0x18:
				if reg > 3 || mod == 3 || rexW {
					return in, false
				}
			case 0x1f:
				if reg != 0 || rexW {
					return in, false
				}
			case 0xba:
				if reg < 4 {
					return in, false
				}
			}
		} else {
			switch op {
			case 0xf6, 0xf7:
				switch {
				case reg == 1:
					return in, false // test's undocumented alias
				case reg == 0 && op == 0xf6:
					imm = 1
				case reg == 0:
					imm = iz
				}
			case 0xff:
				if reg == 7 || mod == 3 && (reg == 3 || reg == 5) {
					return in, false
				}
				in.slot = reg == 2 || reg == 4
			case 0xc0, 0xc1, 0xd0, 0xd1, 0xd2, 0xd3:
				if reg == 6 {
					return in, false // the undocumented sal, which x86asm does not know
				}
			case 0x8d:
				if mod == 3 {
					return in, false
				}
			case 0xc7:
				if reg != 0 {
					return in, false // xbegin
				}
			case 0xfe:
				if reg > 1 {
					return in, false
				}
			case 0xc6:
				if reg != 0 {
					return in, false // xabort
				}
			}
		}
		if mod != 3 {
			switch {
			case rm == 4:
				if i >= len(b) {
					return in, false
				}
				sib := b[i]
				i++
				switch {
				case mod == 1:
					i++
				case mod == 2 || sib&7 == 5 && mod == 0:
					i += 4
				}
			case mod == 0 && rm == 5:
				if i+4 > len(b) {
					return in, false
				}
				in.rip, in.disp = true, int64(int32(le32(b[i:])))
				i += 4
			case mod == 1:
				i++
			case mod == 2:
				i += 4
			}
		}
		if !in.rip {
			in.slot = false
		}
	}
	i += imm
	if i > len(b) || i > 15 {
		return quickInst{}, false
	}
	in.len = i
	return in, true
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
