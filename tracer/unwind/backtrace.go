package unwind

import (
	"encoding/binary"

	"github.com/go-delve/delve/pkg/dwarf/op"
)

// Regs is the register state of a frame.
type Regs struct{ PC, SP, BP uint64 }

// MaxDepth caps the depth of one backtrace, whatever the caller asks: the
// stack pointer grows with every frame, so garbage cannot loop, but it
// could take long to run off the stack.
const MaxDepth = 1024

// Backtrace appends up to depth return addresses to out and returns it.
// regs is the state of the caller frame at its call site, as at a stop on a
// function's first instruction: regs.PC is the return address (frame 0),
// regs.SP the caller's rsp once the call returns (rsp at the callee's entry
// + 8), regs.BP the caller's rbp. Each further frame is found with the CFI
// of the module holding the pc, or else with the rbp chain. The walk stops
// at depth, at a zero return address, at the outermost frame (the return
// address is undefined there: _start, clone), when the stack pointer does
// not grow, or when neither CFI nor frame pointers give a caller.
//
// The target's stack is untrusted input: every load is bounds-checked
// (stack.inWindow), and the panics of delve's CFI code on malformed
// programs are stopped where it is called (cfi.compute, stack.eval).
// FuzzBacktrace holds it to that.
func (u *Unwinder) Backtrace(mem Memory, regs Regs, depth int, out []uint64) []uint64 {
	if depth <= 0 || regs.PC == 0 {
		return out
	}
	depth = min(depth, MaxDepth)
	return u.Continue(mem, regs, false, depth-1, append(out, regs.PC))
}

// Continue appends to out up to n more frames of a walk whose last frame
// is regs (exact: regs.PC is where a signal interrupted it, not a return
// address): the callers Backtrace would find next. An in-process walk that
// stopped at a frame ends here, with the frames Backtrace gives.
func (u *Unwinder) Continue(mem Memory, regs Regs, exact bool, n int, out []uint64) []uint64 {
	n = min(n, MaxDepth)
	if n <= 0 || regs.PC == 0 {
		return out
	}
	defer func() { u.stack.mem = nil }()
	u.stack.reset(mem, regs.SP)
	cur := regs
	for range n {
		next, nextExact, ok := u.step(cur, exact)
		if !ok || next.PC == 0 {
			break
		}
		out = append(out, next.PC)
		cur, exact = next, nextExact
	}
	return out
}

// outcome of unwinding one frame with CFI.
type outcome uint8

const (
	done      outcome = iota // found the caller
	outermost                // the return address is undefined: stop
	fallback                 // CFI could not be evaluated: try frame pointers
	stop                     // CFI gave a caller that cannot be right
)

// step finds the caller of the frame cur. exact says cur.PC is where the
// frame was interrupted by a signal, not a return address; so is the
// caller's pc when nextExact.
func (u *Unwinder) step(cur Regs, exact bool) (next Regs, nextExact, ok bool) {
	if m := u.find(cur.PC); m != nil {
		addr := cur.PC - 1
		if exact {
			addr = cur.PC
		}
		if r := u.cfiOf(m).rowAt(addr); r.fde {
			next, out := u.stack.unwindCFI(r, cur)
			switch out {
			case done:
				return next, r.signal, true
			case outermost, stop:
				return Regs{}, false, false
			}
		}
	}
	// No module (JIT code, a module not registered yet), no CFI, or CFI
	// this package cannot evaluate.
	next, ok = u.stack.unwindFP(cur)
	return next, false, ok
}

// unwindFP follows the rbp chain: a function that keeps a frame pointer
// saved its caller's rbp at [rbp] and the return address is at [rbp+8].
// rbp must lie above the frame's rsp, so that the new rsp (rbp+16) grows.
func (s *stack) unwindFP(cur Regs) (Regs, bool) {
	bp := cur.BP
	if bp == 0 || bp < cur.SP || bp%8 != 0 || bp+16 < bp {
		return Regs{}, false
	}
	ra, ok := s.load(bp + 8)
	if !ok {
		return Regs{}, false
	}
	next, ok := s.load(bp)
	if !ok {
		return Regs{}, false
	}
	return Regs{PC: ra, SP: bp + 16, BP: next}, true
}

// unwindCFI applies the row r to the frame cur.
func (s *stack) unwindCFI(r row, cur Regs) (Regs, outcome) {
	var cfa uint64
	switch r.cfa.kind {
	case kReg:
		base := cur.SP
		if r.cfa.reg == regBP {
			base = cur.BP
		}
		cfa = base + uint64(r.cfa.off)
	case kValExpr:
		v, ok := s.eval(r.cfa.expr, cur, 0)
		if !ok {
			return Regs{}, fallback
		}
		cfa = v
	default:
		return Regs{}, fallback
	}
	// The caller's rsp is the CFA, by definition of the CFA on x86-64
	// (the value of rsp before the call instruction).
	if cfa <= cur.SP {
		return Regs{}, stop
	}
	next := Regs{SP: cfa}
	switch r.ra.kind {
	case kUndef:
		return Regs{}, outermost
	case kAt:
		pc, ok := s.load(cfa + uint64(r.ra.off))
		if !ok {
			return Regs{}, fallback
		}
		next.PC = pc
	case kExpr:
		addr, ok := s.eval(r.ra.expr, cur, cfa)
		if !ok {
			return Regs{}, fallback
		}
		if next.PC, ok = s.load(addr); !ok {
			return Regs{}, fallback
		}
	default:
		return Regs{}, fallback
	}
	next.BP = s.restore(r.bp, cur, cfa)
	return next, done
}

// restore computes the caller's rbp with rule r; 0 when unknown, which keeps
// frame pointers from being followed from there.
func (s *stack) restore(r rule, cur Regs, cfa uint64) uint64 {
	switch r.kind {
	case kSame:
		return cur.BP
	case kAt:
		v, _ := s.load(cfa + uint64(r.off))
		return v
	case kVal:
		return cfa + uint64(r.off)
	case kReg:
		switch r.reg {
		case regBP:
			return cur.BP
		case regSP:
			return cur.SP
		}
	case kExpr:
		if addr, ok := s.eval(r.expr, cur, cfa); ok {
			v, _ := s.load(addr)
			return v
		}
	case kValExpr:
		v, _ := s.eval(r.expr, cur, cfa)
		return v
	}
	return 0
}

// eval runs a DWARF expression of the CFI with rsp, rbp and rip known. With
// a non-zero cfa it is a register rule's expression, which starts with the
// CFA pushed (DWARF 5, 6.4.2.3 DW_CFA_expression): delve does not push it,
// so the program is prefixed with DW_OP_call_frame_cfa.
func (s *stack) eval(expr []byte, cur Regs, cfa uint64) (v uint64, ok bool) {
	defer func() {
		// delve's evaluator indexes its stack unchecked for some opcodes.
		if recover() != nil {
			v, ok = 0, false
		}
	}()
	if len(expr) == 0 {
		return 0, false
	}
	regs := make([]*op.DwarfRegister, regRA+1)
	regs[regBP] = op.DwarfRegisterFromUint64(cur.BP)
	regs[regSP] = op.DwarfRegisterFromUint64(cur.SP)
	regs[regRA] = op.DwarfRegisterFromUint64(cur.PC)
	dr := op.NewDwarfRegisters(0, regs, binary.LittleEndian, regRA, regSP, regBP, 0)
	prog := expr
	if cfa != 0 {
		dr.CFA = int64(cfa)
		prog = append([]byte{byte(op.DW_OP_call_frame_cfa)}, expr...)
	}
	res, pieces, err := op.ExecuteStackProgram(*dr, prog, 8, s.read)
	if err != nil || pieces != nil {
		return 0, false
	}
	return uint64(res), true
}
