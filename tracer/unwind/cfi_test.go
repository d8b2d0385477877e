package unwind

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/go-delve/delve/pkg/dwarf/frame"

	"rtrace/internal/elfx"
)

// TestParseEHFrame checks .eh_frame's pc-relative pointers and the bias:
// FDE ranges come back as runtime addresses, sorted, whatever the order of
// the section.
func TestParseEHFrame(t *testing.T) {
	const addr, bias = 0x2000, 0x555555554000
	eh := ehFrame(addr,
		ehFDE{lo: 0x1200, hi: 0x1300, ins: []byte{0x0e, 16}},
		ehFDE{lo: 0x1100, hi: 0x1200, ins: nil},
		ehFDE{lo: 0x1000, hi: 0x1080, ins: nil})
	fdes, err := elfx.ParseCFI(eh, addr, nil, bias)
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]uint64{{0x1000, 0x1080}, {0x1100, 0x1200}, {0x1200, 0x1300}}
	if len(fdes) != len(want) {
		t.Fatalf("%d FDEs, want %d", len(fdes), len(want))
	}
	for i, w := range want {
		if fdes[i].Begin() != w[0]+bias || fdes[i].End() != w[1]+bias {
			t.Errorf("FDE %d: [%#x,%#x), want [%#x,%#x)", i, fdes[i].Begin(), fdes[i].End(), w[0]+bias, w[1]+bias)
		}
	}
	c := &cfi{fdes: fdes, rows: map[uint64]row{}}
	r := c.rowAt(bias + 0x1250)
	if !r.fde || r.cfa.kind != kReg || r.cfa.reg != regSP || r.cfa.off != 16 ||
		r.ra.kind != kAt || r.ra.off != -8 || r.bp.kind != kSame {
		t.Errorf("row at %#x: %+v", bias+0x1250, r)
	}
	if r := c.rowAt(bias + 0x1090); r.fde {
		t.Errorf("row in the gap [0x1080,0x1100) has an FDE: %+v", r)
	}

	// .eh_frame and .debug_frame together; a broken section is left out.
	bad := slices.Clone(eh)
	fde := 4 + binary.LittleEndian.Uint32(bad) // the first FDE follows the CIEs
	fde += 4 + binary.LittleEndian.Uint32(bad[fde:])
	binary.LittleEndian.PutUint32(bad[fde+4:], 0x1234)
	if _, err := elfx.ParseCFI(bad, addr, nil, 0); err == nil {
		t.Errorf("an FDE pointing at no CIE parsed")
	}
	fdes, err = elfx.ParseCFI(bad, addr, synthCFI(), 0)
	if err != nil || len(fdes) != 7 {
		t.Errorf("bad .eh_frame, good .debug_frame: %d FDEs, %v; want the 7 of .debug_frame", len(fdes), err)
	}
	if _, err := elfx.ParseCFI(nil, 0, nil, 0); err != elfx.ErrNoCFI {
		t.Errorf("no sections: %v, want %v", err, elfx.ErrNoCFI)
	}
}

// FuzzParseCFI feeds arbitrary .eh_frame and .debug_frame contents to the
// parser, then computes rows over every FDE and unwinds with them: nothing
// may panic.
func FuzzParseCFI(f *testing.F) {
	f.Add(ehFrame(0x2000, ehFDE{lo: 0x1000, hi: 0x1100, ins: []byte{0x0e, 16, 0x80 | 6, 2}}), false)
	f.Add(ehFrame(0x2000, ehFDE{lo: 0x1000, hi: 0x1100, ins: []byte{0x0f, 3, 0x77, 8, 0x06}}), false)
	f.Add(synthCFI(), true)
	f.Add([]byte{}, true)
	f.Fuzz(func(t *testing.T, data []byte, debug bool) {
		var fdes frame.FrameDescriptionEntries
		var err error
		if debug {
			fdes, err = elfx.ParseCFI(nil, 0, data, 0)
		} else {
			fdes, err = elfx.ParseCFI(data, 0x2000, nil, 0)
		}
		if err != nil {
			return
		}
		c := &cfi{fdes: fdes, rows: map[uint64]row{}}
		u := New()
		u.AddModule(synthPath, 0, 1, ^uint64(0))
		u.cfis[cfiKey{synthPath, 0}] = c
		s := newStack(stackBase, 0x200)
		for i := range uint64(0x40) {
			s.put(stackBase+8*i, stackBase+8*i+0x40) // plausible frame pointers
		}
		for i, fde := range fdes {
			if i == 64 {
				break
			}
			for _, pc := range []uint64{fde.Begin() + 1, fde.Begin() + (fde.End()-fde.Begin())/2, fde.End()} {
				c.rowAt(pc)
				u.Backtrace(s.mem(), Regs{PC: pc, SP: stackBase, BP: stackBase + 0x10}, 16, nil)
			}
		}
	})
}

// TestRestore checks each rule for the caller's rbp.
func TestRestore(t *testing.T) {
	const cfa = stackBase + 0x40
	b := newStack(stackBase, 0x100)
	b.put(cfa-16, 0x1111)
	b.put(stackBase+0x80, 0x2222)
	cur := Regs{PC: 0x1050, SP: stackBase, BP: stackBase + 0x30}
	var s stack
	s.reset(b.mem(), stackBase)
	for _, tc := range []struct {
		name string
		r    rule
		want uint64
	}{
		{"same", rule{kind: kSame}, cur.BP},
		{"at CFA-16", rule{kind: kAt, off: -16}, 0x1111},
		{"CFA-16", rule{kind: kVal, off: -16}, cfa - 16},
		{"rsp", rule{kind: kReg, reg: regSP}, cur.SP},
		{"rbp", rule{kind: kReg, reg: regBP}, cur.BP},
		{"rbx: unknown", rule{kind: kReg, reg: 3}, 0},
		// (CFA) DW_OP_lit16; DW_OP_minus: at CFA-16.
		{"expression", rule{kind: kExpr, expr: []byte{0x40, 0x1c}}, 0x1111},
		// DW_OP_breg7 0x80: the value rsp+0x80.
		{"value expression", rule{kind: kValExpr, expr: []byte{0x77, 0x80, 0x01}}, stackBase + 0x80},
		// DW_OP_plus on a stack of one (CFA): delve's error, not a panic.
		{"bad expression", rule{kind: kExpr, expr: []byte{0x22}}, 0},
		{"undefined", rule{kind: kUndef}, 0},
	} {
		if got := s.restore(tc.r, cur, cfa); got != tc.want {
			t.Errorf("%s: rbp = %#x, want %#x", tc.name, got, tc.want)
		}
	}
}

// TestSignalFrame unwinds through a signal frame ("zRS" CIE, as glibc's
// __restore_rt): the pc it gives is where the signal interrupted the
// program, so its row is looked up at the pc itself, not at pc-1.
func TestSignalFrame(t *testing.T) {
	const addr = 0x3000
	eh := ehFrame(addr,
		ehFDE{lo: 0x1000, hi: 0x1100, ins: []byte{0x0e, 16}}, // A: CFA rsp+16
		ehFDE{lo: 0x1100, hi: 0x1200},                        // B: CFA rsp+8
		// The signal frame starts one byte early, as glibc's (a nop
		// before __restore_rt), since the handler's return address is
		// __restore_rt itself. CFA = [rsp+0x20], rip at rsp+0x28.
		ehFDE{lo: 0x12ff, hi: 0x1310, signal: true, ins: []byte{
			0x0f, 3, 0x77, 0x20, 0x06,
			0x10, 16, 2, 0x77, 0x28}})
	fdes, err := elfx.ParseCFI(eh, addr, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	u := New()
	u.AddModule(synthPath, 0, 0x1000, 0x2000)
	u.cfis[cfiKey{synthPath, 0}] = &cfi{fdes: fdes, rows: map[uint64]row{}}

	S := uint64(stackBase)
	s := newStack(S, 0x200)
	s.put(S+0x20, S+0x100) // the interrupted rsp
	s.put(S+0x28, 0x1100)  // the interrupted pc: B's first instruction
	s.put(S+0x100, 0x5555) // B's return address (CFA rsp+8)
	s.put(S+0x108, 0x6666) // what A's row (CFA rsp+16) would read
	got := u.Backtrace(s.mem(), Regs{PC: 0x1300, SP: S}, 3, nil)
	if want := []uint64{0x1300, 0x1100, 0x5555}; !slices.Equal(got, want) {
		t.Errorf("backtrace = %x, want %x", got, want)
	}
}
