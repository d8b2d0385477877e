package unwind

import (
	"strings"

	"github.com/go-delve/delve/pkg/dwarf/frame"

	"rtrace/internal/elfx"
)

// DWARF register numbers of x86-64 (System V psABI, "DWARF Register Number
// Mapping"): rbp 6, rsp 7, and 16 for the return address (rip).
const (
	regBP = 6
	regSP = 7
	regRA = 16
)

// maxRows bounds a module's cache of unwind rows; past it the cache starts
// over (a program has far fewer distinct call sites on its hot paths).
const maxRows = 1 << 16

// cfi is the parsed call frame information of one module (path and bias),
// and the unwind rows already computed from it, by lookup address (see
// rowAt).
type cfi struct {
	fdes frame.FrameDescriptionEntries // sorted by begin; empty: no CFI
	rows map[uint64]row
}

// loadCFI reads the CFI of the ELF object at path, loaded with bias.
func loadCFI(path string, bias uint64) (*cfi, error) {
	f, err := elfx.OpenELF(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fdes, err := elfx.CFI(f, path, bias)
	if err != nil {
		return nil, err
	}
	return &cfi{fdes: fdes, rows: map[uint64]row{}}, nil
}

// kind is how a row finds a value.
type kind uint8

const (
	// kSame: the register keeps its value (no rule, or DW_CFA_same_value).
	kSame kind = iota
	// kUndef: the value is gone; for the return address, the outermost frame.
	kUndef
	kAt      // stored at CFA+off
	kVal     // is CFA+off
	kReg     // register reg's value (CFA: reg+off)
	kExpr    // stored at the address expr computes
	kValExpr // is what expr computes
	kBad     // a rule this package does not evaluate
)

// rule is one column of an unwind row.
type rule struct {
	kind kind
	reg  uint64
	off  int64
	expr []byte
}

// row is what unwinding needs of the CFI row at a call site: how to find
// the CFA, the return address and the caller's rbp. The other registers are
// not tracked: the CFA of x86-64 code is rsp- or rbp-based.
type row struct {
	fde    bool // an FDE covers the call site; else frame pointers
	signal bool // a signal frame: the caller's pc is not a return address
	cfa    rule // kReg (reg+off) or kValExpr
	ra, bp rule
}

// rowAt returns the unwind row at addr: pc-1 for a frame whose pc is a
// return address, since a call can be the last instruction of a function;
// the pc itself for a frame interrupted by a signal.
func (c *cfi) rowAt(addr uint64) row {
	if len(c.fdes) == 0 {
		return row{}
	}
	if r, ok := c.rows[addr]; ok {
		return r
	}
	r := c.compute(addr)
	if len(c.rows) >= maxRows {
		clear(c.rows)
	}
	c.rows[addr] = r
	return r
}

// compute establishes the row at addr with delve; a row without fde when no
// FDE covers addr, with a kBad CFA when its program cannot be run.
func (c *cfi) compute(addr uint64) (r row) {
	defer func() {
		// EstablishFrame panics on some malformed programs (an advance
		// past the end, a restore_state with nothing remembered).
		if recover() != nil {
			r = row{fde: true, cfa: rule{kind: kBad}}
		}
	}()
	fde, err := c.fdes.FDEForPC(addr)
	if err != nil {
		return row{}
	}
	ctx, err := fde.EstablishFrame(addr)
	if err != nil {
		return row{fde: true, cfa: rule{kind: kBad}}
	}
	r = rowOf(ctx)
	// delve parses the 'S' augmentation but does not keep it: read it
	// from the CIE (the x86-64 psABI's signal frame, glibc's __restore_rt).
	r.signal = fde.CIE != nil && strings.Contains(fde.CIE.Augmentation, "S")
	return r
}

// rowOf converts delve's frame context.
func rowOf(ctx *frame.FrameContext) row {
	ra, hasRA := ctx.Regs[ctx.RetAddrReg]
	bp, hasBP := ctx.Regs[regBP]
	return rowFrom(ctx.CFA, ra, hasRA, bp, hasBP)
}

// rowFrom makes the row of a CFA rule and the rules of the return address
// and rbp (has: the register has one).
func rowFrom(cfa frame.DWRule, ra frame.DWRule, hasRA bool, bp frame.DWRule, hasBP bool) row {
	r := row{fde: true}
	switch cfa.Rule {
	case frame.RuleCFA:
		r.cfa = rule{kind: kReg, reg: cfa.Reg, off: cfa.Offset}
		if cfa.Reg != regSP && cfa.Reg != regBP {
			r.cfa.kind = kBad // only rsp, rbp and rip are known past frame 0
		}
	case frame.RuleExpression:
		r.cfa = rule{kind: kValExpr, expr: cfa.Expression}
	default:
		r.cfa = rule{kind: kBad}
	}
	r.ra = ruleOf(ra, hasRA, kUndef)
	r.bp = ruleOf(bp, hasBP, kSame)
	return r
}

// ruleOf converts a register's rule dw (has: it has one); missing is the
// kind of a register without one.
func ruleOf(dw frame.DWRule, has bool, missing kind) rule {
	if !has {
		return rule{kind: missing}
	}
	switch dw.Rule {
	case frame.RuleUndefined:
		// delve's DW_CFA_restore of a register the CIE left alone yields
		// RuleUndefined; for rbp that means "unchanged" in practice.
		return rule{kind: missing}
	case frame.RuleSameVal:
		return rule{kind: kSame}
	case frame.RuleOffset:
		return rule{kind: kAt, off: dw.Offset}
	case frame.RuleValOffset:
		return rule{kind: kVal, off: dw.Offset}
	case frame.RuleRegister:
		return rule{kind: kReg, reg: dw.Reg}
	case frame.RuleExpression:
		return rule{kind: kExpr, expr: dw.Expression}
	case frame.RuleValExpression:
		return rule{kind: kValExpr, expr: dw.Expression}
	}
	return rule{kind: kBad}
}
