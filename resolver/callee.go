package resolver

import (
	"encoding/binary"
	"sort"
	"strings"

	"rtrace/internal/elfx"
	"rtrace/internal/regular"
)

// Callee returns the name of the function the call instruction before the
// return address ret calls through its module's PLT stub or GOT slot: a
// `call rel32` to a stub (an import's .plt or .plt.sec entry), or a
// `call *disp32(%rip)` through a slot (code built with -fno-plt); "" when
// the instruction is neither, or the module cannot be read. The name is
// the one the caller's module imports ("open64"), which tells apart names
// of one function (glibc's open64 is open: a breakpoint there sees one).
// It reads only the module's relocations and the bytes of the call, not
// its symbols or DWARF.
func (r *Resolver) Callee(ret uint64) string {
	if n, ok := r.callees[ret]; ok {
		return n
	}
	n := r.callee(ret)
	if r.callees == nil {
		r.callees = map[uint64]string{}
	}
	r.callees[ret] = n
	return n
}

func (r *Resolver) callee(ret uint64) string {
	m := r.mappingAt(ret)
	if m == nil || !strings.HasPrefix(m.Path, "/") {
		return ""
	}
	first := m
	for first.after != nil {
		first = first.after // a split text mapping: the bias is the first part's
	}
	f, err := elfx.Open(m.Path)
	if err != nil || len(f.Imports) == 0 {
		return ""
	}
	bias, err := loadBias(f.Loads, first.From, first.To)
	if err != nil || ret-bias < 6 {
		return ""
	}
	pc := ret - bias // link-time address after the call
	code, ok := readAt(m.Path, f.Loads, pc-6, 6)
	if !ok {
		return ""
	}
	disp := uint64(int64(int32(binary.LittleEndian.Uint32(code[2:]))))
	switch {
	case code[0] == 0xff && code[1] == 0x15: // call *disp32(%rip)
		slot := pc + disp
		i := sort.Search(len(f.Imports), func(i int) bool { return f.Imports[i].GOT >= slot })
		if i < len(f.Imports) && f.Imports[i].GOT == slot {
			return f.Imports[i].Name
		}
	case code[1] == 0xe8: // call rel32: to the start of a stub, or no call
		target := pc + disp
		for _, im := range f.Imports {
			if im.Stub != 0 && target == im.Stub {
				return im.Name
			}
		}
	}
	return ""
}

// readAt reads n bytes at link-time address vaddr of the ELF file at path:
// from the PT_LOAD whose file bytes hold them.
func readAt(path string, loads []elfx.Load, vaddr uint64, n int) ([]byte, bool) {
	for _, l := range loads {
		if vaddr < l.Vaddr || vaddr+uint64(n) > l.Vaddr+l.Filesz {
			continue
		}
		fh, err := regular.Open(path) // never a FIFO: it would block
		if err != nil {
			return nil, false
		}
		defer fh.Close()
		b := make([]byte, n)
		if _, err := fh.ReadAt(b, int64(vaddr-l.Vaddr+l.Offset)); err != nil {
			return nil, false
		}
		return b, true
	}
	return nil, false
}
