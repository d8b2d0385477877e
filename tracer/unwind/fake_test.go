package unwind

import (
	"encoding/binary"
	"errors"
	"sort"

	"rtrace/internal/elfx"
)

// fakeMem is a target memory made of regions; reads stop at a region's end
// (a partial read, as process_vm_readv's at the end of a mapping).
type fakeMem struct {
	regions []region // sorted by base
	reads   int      // ReadMemory calls
	bytes   int      // bytes asked for
}

type region struct {
	base uint64
	data []byte
}

var errFault = errors.New("fault")

func (f *fakeMem) add(base uint64, data []byte) {
	f.regions = append(f.regions, region{base, data})
	sort.Slice(f.regions, func(i, j int) bool { return f.regions[i].base < f.regions[j].base })
}

func (f *fakeMem) ReadMemory(buf []byte, addr uint64) (int, error) {
	f.reads++
	f.bytes += len(buf)
	for _, r := range f.regions {
		if addr >= r.base && addr-r.base < uint64(len(r.data)) {
			n := copy(buf, r.data[addr-r.base:])
			if n < len(buf) {
				return n, errFault
			}
			return n, nil
		}
	}
	return 0, errFault
}

// stackBuilder lays out 8-byte words of a fake stack at base.
type stackBuilder struct {
	base uint64
	data []byte
}

func newStack(base uint64, size int) *stackBuilder {
	return &stackBuilder{base: base, data: make([]byte, size)}
}

// put stores v at addr.
func (s *stackBuilder) put(addr, v uint64) {
	binary.LittleEndian.PutUint64(s.data[addr-s.base:], v)
}

func (s *stackBuilder) mem() *fakeMem {
	m := &fakeMem{}
	m.add(s.base, s.data)
	return m
}

// cfiBuilder writes a .debug_frame section: one CIE (code alignment 1,
// data alignment -8, return address in r16, CFA = rsp+8 and the return
// address at CFA-8 on entry, as gcc's x86-64 CIEs) and FDEs.
type cfiBuilder struct{ b []byte }

func newCFI() *cfiBuilder {
	c := &cfiBuilder{}
	body := []byte{
		1,          // version
		0,          // augmentation ""
		1,          // code alignment factor
		0x78,       // data alignment factor -8 (sleb128)
		16,         // return address register (uleb128)
		0x0c, 7, 8, // DW_CFA_def_cfa rsp, 8
		0x80 | 16, 1, // DW_CFA_offset r16, cfa-8
	}
	c.entry(0xffffffff, body)
	return c
}

func (c *cfiBuilder) entry(id uint32, body []byte) {
	for (len(body)+4)%8 != 0 {
		body = append(body, 0) // DW_CFA_nop
	}
	c.b = binary.LittleEndian.AppendUint32(c.b, uint32(4+len(body)))
	c.b = binary.LittleEndian.AppendUint32(c.b, id)
	c.b = append(c.b, body...)
}

// fde adds an FDE for [lo,hi) with the instructions ins (the CIE is at 0).
func (c *cfiBuilder) fde(lo, hi uint64, ins ...byte) *cfiBuilder {
	var body []byte
	body = binary.LittleEndian.AppendUint64(body, lo)
	body = binary.LittleEndian.AppendUint64(body, hi-lo)
	c.entry(0, append(body, ins...))
	return c
}

// Synthetic module: code at [0x1000,0x2000), bias 0, CFI from synthCFI.
const (
	synthLo   = 0x1000
	synthHi   = 0x2000
	synthPath = "/synthetic/module"
)

// synthCFI covers:
//
//	A [0x1000,0x1100): CFA rsp+16, rbp at CFA-16 (after push rbp)
//	B [0x1100,0x1200): CFA rbp+16, rbp at CFA-16 (a frame-pointer frame)
//	C [0x1200,0x1300): CFA = [rsp+8] (expression), RA at CFA-8 (expression)
//	D [0x1300,0x1400): return address undefined (outermost, like _start)
//	E [0x1400,0x1500): CFA rsp+0 (the stack pointer does not grow)
//	F [0x1500,0x1600): DW_CFA_restore_state with nothing remembered
//	G [0x1600,0x1700): CFA rsp+8 up to 0x1604, then rsp+32
//	[0x1700,0x2000): no FDE
func synthCFI() []byte {
	c := newCFI()
	c.fde(0x1000, 0x1100, 0x0e, 16, 0x80|6, 2)
	c.fde(0x1100, 0x1200, 0x0c, 6, 16, 0x80|6, 2)
	c.fde(0x1200, 0x1300,
		0x0f, 3, 0x77, 8, 0x06, // DW_CFA_def_cfa_expression: DW_OP_breg7 8; DW_OP_deref
		0x10, 16, 2, 0x38, 0x1c) // DW_CFA_expression r16: (CFA) DW_OP_lit8; DW_OP_minus
	c.fde(0x1300, 0x1400, 0x07, 16)
	c.fde(0x1400, 0x1500, 0x0e, 0)
	c.fde(0x1500, 0x1600, 0x0b)
	c.fde(0x1600, 0x1700, 0x40|4, 0x0e, 32)
	return c.b
}

// synthUnwinder returns an Unwinder whose only module is the synthetic one.
func synthUnwinder(t interface{ Fatal(...any) }) *Unwinder {
	fdes, err := elfx.ParseCFI(nil, 0, synthCFI(), 0)
	if err != nil {
		t.Fatal(err)
	}
	u := New()
	u.AddModule(synthPath, 0, synthLo, synthHi)
	u.cfis[cfiKey{synthPath, 0}] = &cfi{fdes: fdes, rows: map[uint64]row{}}
	return u
}

// ehFrame writes an .eh_frame section linked at addr: two CIEs like gcc's
// and glibc's, "zR" and "zRS" (a signal frame), with pc-relative 4-byte
// pointers, and one FDE per ehFDE.
func ehFrame(addr uint64, fdes ...ehFDE) []byte {
	var b []byte
	entry := func(id uint32, body []byte) {
		for (len(body)+4)%8 != 0 {
			body = append(body, 0)
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(4+len(body)))
		b = binary.LittleEndian.AppendUint32(b, id)
		b = append(b, body...)
	}
	var cies [2]uint64
	for i, aug := range []string{"zR", "zRS"} {
		cies[i] = uint64(len(b))
		body := append([]byte{1}, aug...) // version, augmentation
		body = append(body, 0,
			1, 0x78, 16, // code alignment, data alignment -8, return address r16
			1, 0x1b, // augmentation data: FDE pointers DW_EH_PE_pcrel|sdata4
			0x0c, 7, 8, // DW_CFA_def_cfa rsp, 8
			0x80|16, 1) // DW_CFA_offset r16, cfa-8
		entry(0, body)
	}
	for _, f := range fdes {
		start := uint64(len(b))
		cie := cies[0]
		if f.signal {
			cie = cies[1]
		}
		// The CIE pointer counts back from its own field to the CIE.
		id := uint32(start + 4 - cie)
		begin := f.lo - (addr + start + 8) // pc-relative to the pc_begin field
		var body []byte
		body = binary.LittleEndian.AppendUint32(body, uint32(begin))
		body = binary.LittleEndian.AppendUint32(body, uint32(f.hi-f.lo))
		body = append(body, 0) // augmentation data length
		entry(id, append(body, f.ins...))
	}
	return binary.LittleEndian.AppendUint32(b, 0) // terminator
}

type ehFDE struct {
	lo, hi uint64
	ins    []byte
	signal bool
}
