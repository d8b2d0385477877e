// Package elfx reads the ELF facts the tracer and the resolver share:
// function symbols, load segments and bias, build id, interpreter, entry
// point, and whether the program is a Go binary. Every entry point recovers
// from debug/elf panics on corrupt input.
package elfx
