package resolver

import (
	"errors"

	"rtrace/internal/elfx"
)

// errNoExecLoad: the object has no executable PT_LOAD, so no r-xp mapping
// of it can be placed.
var errNoExecLoad = errors.New("no executable PT_LOAD segment")

// loadBias returns the load bias (runtime address minus link-time address)
// of an object whose executable PT_LOAD is mapped at [from, to).
//
// The kernel (fs/binfmt_elf.c, elf_map) and ld.so (elf/dl-map-segments.h)
// map each PT_LOAD at ELF_PAGESTART(bias + p_vaddr) from file offset
// ELF_PAGESTART(p_offset), p_vaddr and p_offset being congruent modulo the
// page size. The r-xp line of /proc/pid/maps therefore starts at
// bias + PageDown(p_vaddr) of the PF_X segment. sp-rtrace's rule,
// "address minus mapping start" for objects whose first PT_LOAD has vaddr
// 0, is wrong for the split R / RX / R / RW layout of ld -z separate-code
// (the default since binutils 2.31), where the text starts a page or more
// into the object.
func loadBias(loads []elfx.Load, from, to uint64) (uint64, error) {
	var exec []elfx.Load
	for _, l := range loads {
		if l.Exec {
			exec = append(exec, l)
		}
	}
	if len(exec) == 0 {
		return 0, errNoExecLoad
	}
	l := exec[0]
	// Several executable segments (unusual linker scripts): the mapping
	// length picks the one it holds.
	for _, e := range exec {
		if elfx.PageUp(e.Vaddr+e.Memsz)-elfx.PageDown(e.Vaddr) == to-from {
			l = e
			break
		}
	}
	return from - elfx.PageDown(l.Vaddr), nil
}
