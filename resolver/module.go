package resolver

import (
	"rtrace/internal/elfx"
	"rtrace/internal/uftrace"
)

// Symbols returns the function symbols of f as .sym lines: addresses relative
// to the module's first mapping (st_value minus the first PT_LOAD's
// page-aligned vaddr), and the end of the last function.
func Symbols(f *elfx.File) ([]uftrace.Symbol, uint64) {
	base := f.MinVaddr()
	syms := make([]uftrace.Symbol, 0, len(f.Funcs))
	var end uint64
	for _, fn := range f.Funcs {
		typ := byte('T')
		switch {
		case fn.Weak:
			typ = 'w'
		case fn.Local:
			typ = 't'
		}
		syms = append(syms, uftrace.Symbol{Addr: fn.Value - base, Type: typ, Name: fn.Name})
		if e := fn.Value + fn.Size - base; e > end {
			end = e
		}
	}
	// Library functions get a P symbol where rtrace records their calls:
	// the PLT stub, or the GOT slot for code built with -fno-plt. An end
	// marker after each keeps the gap to the next symbol unnamed.
	starts := map[uint64]bool{}
	for _, s := range syms {
		starts[s.Addr] = true
	}
	for _, im := range f.Imports {
		addr, _ := im.Site()
		syms = append(syms, uftrace.Symbol{Addr: addr - base, Type: 'P', Name: im.Name})
		starts[addr-base] = true
	}
	for _, im := range f.Imports {
		addr, size := im.Site()
		if e := addr + size - base; !starts[e] {
			syms = append(syms, uftrace.Symbol{Addr: e, Type: '?', Name: "__dynsym_end"})
			starts[e] = true
		}
	}
	return syms, end
}

// DebugFuncs returns the .dbg function blocks of the ELF file at path: each
// function's declaration line and file from DWARF, and with auto its
// argument and return-value specs (AutoSpecs). A file without DWARF gives
// nil; corrupt DWARF gives an error and no blocks.
func DebugFuncs(path string, f *elfx.File, auto bool) ([]uftrace.DebugFunc, error) {
	subs, err := elfx.Subprograms(path)
	if err != nil {
		return nil, err
	}
	names := map[uint64]string{}
	for _, fn := range f.Funcs {
		names[fn.Value] = fn.Name
	}
	base := f.MinVaddr()
	var out []uftrace.DebugFunc
	for _, s := range subs {
		name := names[s.Low]
		if name == "" || s.Line == 0 && !auto {
			continue
		}
		df := uftrace.DebugFunc{Addr: s.Low - base, Name: name, Line: s.Line, File: s.File}
		if auto {
			df.ArgSpec, df.RetSpec, df.Enums = AutoSpecs(&s)
		}
		out = append(out, df)
	}
	return out, nil
}
