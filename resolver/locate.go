package resolver

import (
	"strings"

	"rtrace/internal/elfx"
	"rtrace/internal/trace"
)

// Locate returns what is known of the backtrace address addr, a return
// address: the function and line are those Frame shows (of addr-1, the
// call instruction), from the same cached answer. Func is Frame's function
// name with the "()" it appends to C names dropped; a demangled C++ name
// keeps its parameter list unless it is empty ("geo::Shape::area() const",
// "util::inner::count(int)", "geo::Shape::area"). File is the full path
// whatever Options.FullPaths says.
func (r *Resolver) Locate(addr uint64) trace.Location {
	a := r.answer(addr)
	if a.m == nil {
		return trace.Location{}
	}
	l := trace.Location{Module: a.m.Path, Start: a.m.From, Limit: a.m.To}
	if a.m.obj != nil {
		l.Offset = fileOffset(a.m.obj.loads, a.m.From-a.m.bias)
	}
	if a.name != "" {
		l.Func = strings.TrimSuffix(displayName(a.name), "()")
		if a.file != "" && a.line > 0 { // as frameText shows them
			l.File, l.Line = a.file, a.line
		}
	}
	return l
}

// fileOffset returns the file offset of link-time address vaddr, the start
// of a mapping: it lies in a PT_LOAD whose pages are mapped from the
// file's (p_vaddr and p_offset are congruent modulo the page size; see
// loadBias). 0 when no segment holds it.
func fileOffset(loads []elfx.Load, vaddr uint64) uint64 {
	for _, l := range loads {
		start := elfx.PageDown(l.Vaddr)
		if vaddr >= start && vaddr < l.Vaddr+l.Memsz {
			return vaddr - start + elfx.PageDown(l.Offset)
		}
	}
	return 0
}
