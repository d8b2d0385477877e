package elfx

// PageSize is the x86-64 page size, the unit in which the kernel
// (fs/binfmt_elf.c, ELF_PAGESTART) and ld.so (elf/dl-map-segments.h) map
// ELF segments.
const PageSize = 0x1000

// PageDown rounds v down to a page boundary.
func PageDown(v uint64) uint64 { return v &^ (PageSize - 1) }

// PageUp rounds v up to a page boundary; it wraps to 0 within the last
// page of the address space.
func PageUp(v uint64) uint64 { return (v + PageSize - 1) &^ (PageSize - 1) }
