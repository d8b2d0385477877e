// Package elfx reads the ELF facts the tracer and the resolver share:
// function symbols, load segments and bias, build id, interpreter, entry
// point, and whether the program is a Go binary. It is also rtrace's one
// safe way to open an ELF file and read its DWARF (NewELF, OpenELF, DWARF,
// Guard): corrupt input gives an error, never a panic.
package elfx
