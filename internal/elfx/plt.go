package elfx

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"sort"
	"strings"
)

// Import is a function the object calls in another module, through a GOT
// slot the loader fills with its address.
type Import struct {
	Name string // symbol name, without version
	GOT  uint64 // link-time address of the GOT slot
	// Stub is the link-time address of the PLT stub that jumps through the
	// slot (in .plt, .plt.sec or .plt.got), 0 when there is none: code
	// built with -fno-plt calls through the slot directly.
	Stub, StubSize uint64
}

// Relocation types of x86-64 (elf.R_X86_64_*) that fill a GOT slot with a
// symbol's address.
const (
	rGlobDat  = uint32(elf.R_X86_64_GLOB_DAT)
	rJumpSlot = uint32(elf.R_X86_64_JMP_SLOT)
)

// imports returns f's imported functions sorted by GOT slot: the function
// symbols of JUMP_SLOT relocations and the undefined ones of GLOB_DAT
// relocations, each with the PLT stub that
// jumps through its slot, if any. dyn is f.DynamicSymbols().
func imports(f *elf.File, dyn []elf.Symbol) []Import {
	bySlot := map[uint64]*Import{}
	var out []*Import
	for _, s := range f.Sections {
		if s.Type != elf.SHT_RELA {
			continue
		}
		data, err := s.Data()
		if err != nil {
			continue
		}
		for ; len(data) >= 24; data = data[24:] {
			off := binary.LittleEndian.Uint64(data)
			info := binary.LittleEndian.Uint64(data[8:])
			typ, idx := uint32(info), info>>32
			if typ != rGlobDat && typ != rJumpSlot || idx == 0 || idx > uint64(len(dyn)) {
				continue
			}
			sym := dyn[idx-1] // DynamicSymbols skips the null symbol 0
			if t := elf.ST_TYPE(sym.Info); t != elf.STT_FUNC && t != elf.STT_GNU_IFUNC && !(t == elf.STT_NOTYPE && sym.Section == elf.SHN_UNDEF && typ == rJumpSlot) {
				continue
			}
			// A JUMP_SLOT of a function the object defines itself is a
			// call through its PLT too (an exported function the loader
			// may bind elsewhere), as uftrace's PLT hooks see it
			// (libmcount/plthook.c hooks every JUMP_SLOT); a GLOB_DAT of
			// one takes its address.
			if sym.Section != elf.SHN_UNDEF && typ != rJumpSlot || sym.Name == "" || bySlot[off] != nil {
				continue
			}
			name, _, _ := strings.Cut(sym.Name, "@")
			im := &Import{Name: name, GOT: off}
			bySlot[off] = im
			out = append(out, im)
		}
	}
	for _, name := range []string{".plt", ".plt.sec", ".plt.got"} {
		s := f.Section(name)
		if s == nil || s.Type != elf.SHT_PROGBITS {
			continue
		}
		code, err := s.Data()
		if err != nil {
			continue
		}
		size := s.Entsize
		if size == 0 || size > 32 {
			size = 16
		}
		for off := uint64(0); off+size <= uint64(len(code)); off += size {
			slot, ok := stubSlot(code[off:off+size], s.Addr+off)
			if im := bySlot[slot]; ok && im != nil && im.Stub == 0 {
				im.Stub, im.StubSize = s.Addr+off, size
			}
		}
	}
	res := make([]Import, 0, len(out))
	for _, im := range out {
		res = append(res, *im)
	}
	sort.Slice(res, func(i, j int) bool { return res[i].GOT < res[j].GOT })
	return res
}

// stubSlot finds the `jmp *disp(%rip)` (ff 25, maybe after endbr64 and a
// bnd prefix) of one PLT entry at addr and returns the slot it reads.
func stubSlot(entry []byte, addr uint64) (uint64, bool) {
	i := bytes.Index(entry, []byte{0xff, 0x25})
	if i < 0 || i+6 > len(entry) {
		return 0, false
	}
	disp := int32(binary.LittleEndian.Uint32(entry[i+2:]))
	return uint64(int64(addr) + int64(i+6) + int64(disp)), true
}

// Site is where calls of im are recorded (link-time address and size): its
// PLT stub, or its GOT slot when it has no stub.
func (im Import) Site() (addr, size uint64) {
	if im.Stub != 0 {
		return im.Stub, im.StubSize
	}
	return im.GOT, 8
}
