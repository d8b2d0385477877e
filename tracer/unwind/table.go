package unwind

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"strings"

	"github.com/go-delve/delve/pkg/dwarf/frame"
	"github.com/go-delve/delve/pkg/dwarf/leb128"
)

// A Table is a module's CFI compiled into rows the fast engine's
// in-process walker follows (tracer/fast, walk.S): the ORC and libunwind
// fast-trace model, each row a CFA of rsp or rbp plus a constant, the
// return address at a constant offset from the CFA and rbp unchanged,
// saved at a constant offset or zero. A row the model cannot express
// stops the walker, and rtrace finishes the walk with Backtrace: the
// frames are the same either way (TestTableMatchesCFI, FuzzTableMatchesCFI).
//
// Starts are link-time addresses (the module's pc minus its load bias), in
// increasing order; row i holds from Starts[i] up to Starts[i+1] (the last
// up to the end of the address space), and addresses below Starts[0] have
// no FDE.
type Table struct {
	Starts []uint32
	Rows   []uint64
}

// A packed row (Table.Rows, and the walker's reading of them):
//
//	bits 0-2   kind: rowFP, rowCFA, rowEnd, rowStop
//	bit 3      the CFA is rbp + offset (else rsp + offset)
//	bit 4      a signal frame: the caller's pc is exact, not a return address
//	bits 5-7   rbp: bpSame, bpAt (saved at CFA + offset), bpVal (is CFA + offset), bpSP (the frame's rsp), bpZero
//	bits 8-15  the return address's offset from the CFA, in 8-byte words (int8)
//	bits 16-31 rbp's offset from the CFA (int16)
//	bits 32-63 the CFA's offset (int32)
const (
	// rowFP: no FDE covers the pc, or its rules fall back to the rbp
	// chain in Backtrace (an unknown CFA register, a return address rule
	// other than an offset, a program delve cannot run).
	rowFP = 0
	// rowCFA: unwind with the row's rules.
	rowCFA = 1
	// rowEnd: the outermost frame (the return address is undefined): the
	// walk ends.
	rowEnd = 2
	// rowStop: a rule the model cannot express (DWARF expressions, offsets
	// out of range, a program the compiler does not know): the walker
	// stops and rtrace unwinds the rest.
	rowStop = 3

	rowBaseBP = 1 << 3
	rowSignal = 1 << 4

	bpSame = 0
	bpAt   = 1
	bpVal  = 2
	bpSP   = 3
	bpZero = 4
)

// packRow packs what Backtrace does with r (unwindCFI, restore).
func packRow(r row) uint64 {
	if !r.fde {
		return rowFP
	}
	var w uint64 = rowCFA
	switch r.cfa.kind {
	case kReg:
		if r.cfa.off < math.MinInt32 || r.cfa.off > math.MaxInt32 {
			return rowStop
		}
		if r.cfa.reg == regBP {
			w |= rowBaseBP
		}
		w |= uint64(uint32(int32(r.cfa.off))) << 32
	case kValExpr:
		return rowStop
	default:
		return rowFP
	}
	switch r.ra.kind {
	case kUndef:
		return rowEnd
	case kAt:
		if r.ra.off%8 != 0 || r.ra.off/8 < math.MinInt8 || r.ra.off/8 > math.MaxInt8 {
			return rowStop
		}
		w |= uint64(uint8(int8(r.ra.off/8))) << 8
	case kExpr:
		return rowStop
	default:
		// Backtrace stops where the CFA does not grow before it falls
		// back to the rbp chain for such a rule (same value, register):
		// rtrace walks it.
		return rowStop
	}
	bp, off := uint64(bpZero), int64(0)
	switch r.bp.kind {
	case kSame:
		bp = bpSame
	case kAt, kVal:
		bp, off = bpAt, r.bp.off
		if r.bp.kind == kVal {
			bp = bpVal
		}
		if off < math.MinInt16 || off > math.MaxInt16 {
			return rowStop
		}
	case kReg:
		switch r.bp.reg {
		case regBP:
			bp = bpSame
		case regSP:
			bp = bpSP
		}
	case kExpr, kValExpr:
		return rowStop
	}
	w |= bp<<5 | uint64(uint16(int16(off)))<<16
	if r.signal {
		w |= rowSignal
	}
	return w
}

// Lookup returns the packed row at link-time address addr.
func (t *Table) Lookup(addr uint64) uint64 {
	if addr > math.MaxUint32 {
		return rowFP // past every row a module's table can hold
	}
	i, found := slices.BinarySearch(t.Starts, uint32(addr))
	if !found {
		i--
	}
	if i < 0 {
		return rowFP
	}
	return t.Rows[i]
}

// Compile compiles the CFI fdes of a module, parsed at load bias 0, into
// its Table. Each FDE's program runs once, its rows taken where its
// location advances, with delve's semantics (pkg/dwarf/frame's table.go:
// what Backtrace's rows come from): an instruction runs for every pc at or
// past the location it is reached at. An FDE the compiler cannot follow
// (DW_CFA_set_loc, whose base delve does not export) stops the walker over
// its whole range.
func Compile(fdes frame.FrameDescriptionEntries) *Table { return compileAt(fdes, 0) }

// compileAt compiles fdes parsed at load bias bias (runtime addresses):
// the table's addresses are the link-time ones.
func compileAt(fdes frame.FrameDescriptionEntries, bias uint64) *Table {
	// Where the FDE covering a pc can change (frame.FDEForPC): each FDE's
	// begin and end, and past the begin of an empty one.
	var cuts []uint64
	for _, f := range fdes {
		cuts = append(cuts, f.Begin(), f.End())
		if f.End() == f.Begin() {
			cuts = append(cuts, f.Begin()+1)
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	// A table holds about as many rows as the programs have advances;
	// sized once from the FDEs' bytes (an advance takes at least one), it
	// is not grown by doubling, which left twice its size as garbage
	// (cc1plus: 517,000 rows from 49,000 FDEs).
	n := len(cuts)
	for _, f := range fdes {
		n += len(f.Instructions) / 2
	}
	t := &Table{Starts: make([]uint32, 0, n), Rows: make([]uint64, 0, n)}
	add := func(at, w uint64) {
		at -= bias
		if at > math.MaxUint32 {
			return
		}
		if n := len(t.Rows); n > 0 && t.Rows[n-1] == w {
			return
		}
		t.Starts = append(t.Starts, uint32(at))
		t.Rows = append(t.Rows, w)
	}
	// The intervals of one FDE come together (FDEs do not overlap but for
	// a rare duplicate): its program's rows are kept until another's.
	var last *frame.FrameDescriptionEntry
	var rows []progRow
	var p cfaProg
	for i, lo := range cuts {
		hi := uint64(math.MaxUint64)
		if i+1 < len(cuts) {
			hi = cuts[i+1]
		}
		f, err := fdes.FDEForPC(lo)
		if err != nil {
			add(lo, rowFP)
			continue
		}
		if f != last {
			last, rows = f, p.runFDE(f, rows[:0])
		}
		// The rows of f's program within [lo, hi).
		for j, r := range rows {
			end := hi
			if j+1 < len(rows) {
				end = min(end, rows[j+1].at)
			}
			if end <= lo || r.at >= hi {
				continue
			}
			add(max(r.at, lo), r.w)
		}
	}
	if cap(t.Rows) > 2*len(t.Rows)+1024 {
		t.Starts, t.Rows = slices.Clone(t.Starts), slices.Clone(t.Rows)
	}
	return t
}

// progRow is a packed row of an FDE's program, from location at.
type progRow struct {
	at uint64
	w  uint64
}

// cfaProg runs a CFI program as delve's FrameContext does, keeping the
// rules of the CFA, the return address and rbp.
type cfaProg struct {
	buf        bytes.Buffer
	loc        uint64
	codeAlign  uint64
	dataAlign  int64
	raReg      uint64
	cfa        frame.DWRule
	ra, bp     frame.DWRule
	hasRA      bool // a rule for the return address register exists
	hasBP      bool
	remembered []cfaState
	bad        bool // an opcode delve does not know, or a panic of its
	setLoc     bool // DW_CFA_set_loc: not followed
}

type cfaState struct {
	cfa          frame.DWRule
	ra, bp       frame.DWRule
	hasRA, hasBP bool
}

// runFDE appends to rows the rows of f's program in location order, the
// first at f's begin; the last holds up to the end of f. p is reset: one
// cfaProg runs every FDE of a table.
func (p *cfaProg) runFDE(f *frame.FrameDescriptionEntry, rows []progRow) []progRow {
	cie := f.CIE
	if cie == nil {
		return append(rows, progRow{f.Begin(), rowFP})
	}
	signal := strings.Contains(cie.Augmentation, "S")
	*p = cfaProg{codeAlign: cie.CodeAlignmentFactor, dataAlign: cie.DataAlignmentFactor,
		raReg: cie.ReturnAddressRegister, remembered: p.remembered[:0]}
	// The CIE's initial instructions run whole (delve's
	// executeCIEInstructions); their locations do not matter. Reading a
	// Buffer does not write its bytes: the CFI's are read in place.
	p.buf = *bytes.NewBuffer(cie.InitialInstructions)
	for p.buf.Len() > 0 && !p.bad && !p.setLoc {
		p.step()
	}
	if p.setLoc {
		return append(rows, progRow{f.Begin(), rowStop})
	}
	p.loc = f.Begin()
	p.buf = *bytes.NewBuffer(f.Instructions)
	first := len(rows)
	emit := func(at uint64) {
		w := uint64(rowFP) // delve's error: compute's kBad CFA
		if !p.bad {
			w = packRow(p.row(signal))
		}
		if n := len(rows); n > first && rows[n-1].at == at {
			rows[n-1].w = w
			return
		}
		rows = append(rows, progRow{at, w})
	}
	// A pc runs every instruction reached while pc >= loc (advances only
	// add): the row from a location is the state once the advance past it
	// has run, the last location's once every instruction has.
	for p.buf.Len() > 0 && !p.bad {
		at := p.loc
		p.step()
		if p.setLoc {
			return append(rows[:first], progRow{f.Begin(), rowStop})
		}
		if p.loc != at || p.bad {
			emit(at)
		}
	}
	if !p.bad {
		emit(p.loc)
	}
	if len(rows) == first {
		rows = append(rows, progRow{f.Begin(), rowFP})
	}
	return rows
}

// row is the unwind row of the program's state, as compute makes it.
func (p *cfaProg) row(signal bool) row {
	r := rowFrom(p.cfa, p.ra, p.hasRA, p.bp, p.hasBP)
	r.signal = signal
	return r
}

// set gives register reg the rule r.
func (p *cfaProg) set(reg uint64, r frame.DWRule) {
	if reg == p.raReg {
		p.ra, p.hasRA = r, true
	}
	if reg == regBP {
		p.bp, p.hasBP = r, true
	}
}

// step runs one instruction, as delve's executeDwarfInstruction.
func (p *cfaProg) step() {
	defer func() {
		if recover() != nil {
			p.bad = true // compute's recover: a kBad row
		}
	}()
	op, _ := p.buf.ReadByte()
	uleb := func() uint64 { v, _ := leb128.DecodeUnsigned(&p.buf); return v }
	sleb := func() int64 { v, _ := leb128.DecodeSigned(&p.buf); return v }
	block := func() []byte { return p.buf.Next(int(uleb())) }
	switch op & 0xc0 {
	case frame.DW_CFA_advance_loc:
		p.loc += uint64(op&0x3f) * p.codeAlign
		return
	case frame.DW_CFA_offset:
		p.set(uint64(op&0x3f), frame.DWRule{Offset: int64(uleb()) * p.dataAlign, Rule: frame.RuleOffset})
		return
	case frame.DW_CFA_restore:
		// delve's initial rules are never filled: a restore undefines.
		p.set(uint64(op&0x3f), frame.DWRule{Rule: frame.RuleUndefined})
		return
	}
	switch op {
	case frame.DW_CFA_nop:
	case frame.DW_CFA_set_loc:
		p.setLoc = true
	case frame.DW_CFA_advance_loc1:
		b, err := p.buf.ReadByte()
		if err != nil {
			panic("no operand") // as delve's advanceloc1
		}
		p.loc += uint64(b) * p.codeAlign
	case frame.DW_CFA_advance_loc2:
		if b := p.buf.Next(2); len(b) == 2 {
			p.loc += uint64(binary.LittleEndian.Uint16(b)) * p.codeAlign
		}
	case frame.DW_CFA_advance_loc4:
		if b := p.buf.Next(4); len(b) == 4 {
			p.loc += uint64(binary.LittleEndian.Uint32(b)) * p.codeAlign
		}
	case frame.DW_CFA_offset_extended:
		reg := uleb()
		p.set(reg, frame.DWRule{Offset: int64(uleb()) * p.dataAlign, Rule: frame.RuleOffset})
	case frame.DW_CFA_restore_extended, frame.DW_CFA_undefined:
		p.set(uleb(), frame.DWRule{Rule: frame.RuleUndefined})
	case frame.DW_CFA_same_value:
		p.set(uleb(), frame.DWRule{Rule: frame.RuleSameVal})
	case frame.DW_CFA_register:
		reg := uleb()
		p.set(reg, frame.DWRule{Reg: uleb(), Rule: frame.RuleRegister})
	case frame.DW_CFA_remember_state:
		p.remembered = append(p.remembered, cfaState{p.cfa, p.ra, p.bp, p.hasRA, p.hasBP})
	case frame.DW_CFA_restore_state:
		s := p.remembered[len(p.remembered)-1] // empty: delve panics, as here
		p.remembered = p.remembered[:len(p.remembered)-1]
		p.cfa, p.ra, p.bp, p.hasRA, p.hasBP = s.cfa, s.ra, s.bp, s.hasRA, s.hasBP
	case frame.DW_CFA_def_cfa:
		reg := uleb()
		p.cfa = frame.DWRule{Rule: frame.RuleCFA, Reg: reg, Offset: int64(uleb()), Expression: p.cfa.Expression}
	case frame.DW_CFA_def_cfa_register:
		p.cfa.Reg = uleb()
	case frame.DW_CFA_def_cfa_offset:
		p.cfa.Offset = int64(uleb())
	case frame.DW_CFA_def_cfa_expression:
		p.cfa.Expression = block()
		p.cfa.Rule = frame.RuleExpression
	case frame.DW_CFA_expression:
		reg := uleb()
		p.set(reg, frame.DWRule{Rule: frame.RuleExpression, Expression: block()})
	case frame.DW_CFA_offset_extended_sf:
		reg := uleb()
		p.set(reg, frame.DWRule{Offset: sleb() * p.dataAlign, Rule: frame.RuleOffset})
	case frame.DW_CFA_def_cfa_sf:
		reg := uleb()
		p.cfa = frame.DWRule{Rule: frame.RuleCFA, Reg: reg, Offset: sleb() * p.dataAlign, Expression: p.cfa.Expression}
	case frame.DW_CFA_def_cfa_offset_sf:
		p.cfa.Offset = sleb() * p.dataAlign
	case frame.DW_CFA_val_offset:
		reg := uleb()
		// delve does not scale an unsigned val_offset by the data
		// alignment (table.go's valoffset): neither does this.
		p.set(reg, frame.DWRule{Offset: int64(uleb()), Rule: frame.RuleValOffset})
	case frame.DW_CFA_val_offset_sf:
		reg := uleb()
		p.set(reg, frame.DWRule{Offset: sleb() * p.dataAlign, Rule: frame.RuleValOffset})
	case frame.DW_CFA_val_expression:
		reg := uleb()
		p.set(reg, frame.DWRule{Rule: frame.RuleValExpression, Expression: block()})
	case frame.DW_CFA_lo_user, frame.DW_CFA_hi_user:
		p.buf.Next(1)
	case frame.DW_CFA_GNU_args_size:
		uleb()
	default:
		p.bad = true // delve: "unexpected DWARF CFA opcode"
	}
}
