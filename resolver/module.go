package resolver

import (
	"debug/dwarf"
	"debug/elf"
	"path/filepath"
	"strings"

	"rtrace/internal/elfx"
	"rtrace/internal/uftrace"
)

// Symbols returns the function symbols of f as .sym lines: addresses relative
// to the module's first mapping (st_value minus the first PT_LOAD's
// page-aligned vaddr), and the end of the last function. Its data objects
// follow (dataSymbols), as in uftrace's .sym files, so that a pointer
// argument into them shows as &NAME.
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
		if e := fn.Value + max(fn.Size, 1) - base; e > end { // a symbol of no size (_fini) still ends after it
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
	funcEnd := end
	for _, d := range dataSymbols(f.Path) {
		if d.Addr < base || starts[d.Addr-base] {
			continue
		}
		d.Addr -= base
		starts[d.Addr] = true
		syms = append(syms, d.Symbol)
		end = max(end, d.Addr+d.Size)
	}
	if end > funcEnd && funcEnd > 0 && !starts[funcEnd] {
		// The last function ends here, not at the data after it (uftrace
		// writes __func_end there too).
		syms = append(syms, uftrace.Symbol{Addr: funcEnd, Type: '?', Name: "__func_end"})
	}
	return syms, end
}

// dataSymbols returns the data objects of the ELF file at path as uftrace
// 0.13 lists them (utils/symbol.c): STT_OBJECT symbols of .symtab (else
// .dynsym) with a size, typed d (local), D (global), v (weak) or u (GNU
// unique), one per address, at their link-time addresses. An unreadable
// file has none.
func dataSymbols(path string) []dataSymbol {
	if path == "" {
		return nil
	}
	ef, err := elfx.OpenELF(path)
	if err != nil {
		return nil
	}
	defer ef.Close()
	var syms []elf.Symbol
	err = elfx.Guard(func() error {
		var err error
		if syms, err = ef.Symbols(); err != nil || len(syms) == 0 {
			syms, err = ef.DynamicSymbols()
		}
		return err
	})
	if err != nil {
		return nil
	}
	var out []dataSymbol
	seen := map[uint64]bool{}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) != elf.STT_OBJECT || s.Size == 0 || s.Section == elf.SHN_UNDEF || s.Section == elf.SHN_ABS ||
			s.Name == "" || strings.ContainsAny(s.Name, " \t\n") || seen[s.Value] {
			continue
		}
		seen[s.Value] = true
		typ := byte('D')
		switch elf.ST_BIND(s.Info) {
		case elf.STB_LOCAL:
			typ = 'd'
		case elf.STB_WEAK:
			typ = 'v'
		case elf.STB_LOOS: // STB_GNU_UNIQUE
			typ = 'u'
		}
		out = append(out, dataSymbol{uftrace.Symbol{Addr: s.Value, Type: typ, Name: s.Name}, s.Size})
	}
	return out
}

// dataSymbol is a data object's .sym line and its size.
type dataSymbol struct {
	uftrace.Symbol
	Size uint64
}

// DebugFuncs returns the .dbg function blocks of the module f, from the
// DWARF of the ELF file at path: f's own file or its separate debug file,
// which shares its link-time addresses. Each block has the function's
// declaration line and file and, with auto, its argument and return-value
// specs (AutoSpecs). An out-of-line copy ("f.part.0") declared only
// through its abstract origin gets the origin's line, as libdw's
// dwarf_decl_line gives uftrace. A file without DWARF gives nil; corrupt
// DWARF gives an error and no blocks.
func DebugFuncs(path string, f *elfx.File, auto bool) ([]uftrace.DebugFunc, error) {
	read := elfx.SubprogramLines // the types only for the arguments' specs
	if auto {
		read = elfx.Subprograms
	}
	subs, err := read(path)
	if err != nil {
		return nil, err
	}
	names := map[uint64]string{}
	for _, fn := range f.Funcs {
		names[fn.Value] = fn.Name
	}
	base := f.MinVaddr()
	var out []uftrace.DebugFunc
	var origins map[uint64]srcPos
	for _, s := range subs {
		name := names[s.Low]
		if name == "" {
			continue
		}
		if s.Line == 0 {
			if origins == nil {
				origins = originDecls(path)
			}
			p := origins[s.Low]
			s.Line, s.File = p.line, p.file
		}
		if s.Line == 0 && !auto {
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

// srcPos is a declaration's source position.
type srcPos struct {
	line int
	file string
}

// originDecls returns, by entry address, the declaration of each function
// whose DWARF entry has code but no DW_AT_decl_line: that of the entry its
// DW_AT_abstract_origin or DW_AT_specification leads to. Unreadable DWARF
// gives what was read before the problem (DebugFuncs has already read it
// once and reports errors).
func originDecls(path string) (out map[uint64]srcPos) {
	out = map[uint64]srcPos{}
	ef, err := elfx.OpenELF(path)
	if err != nil {
		return out
	}
	defer ef.Close()
	d, err := elfx.DWARF(ef)
	if err != nil {
		return out
	}
	type decl struct {
		pos srcPos
		ref dwarf.Offset // the entry it refers to, 0 for none
	}
	decls := map[dwarf.Offset]decl{}
	type pending struct {
		low uint64
		ref dwarf.Offset
	}
	var todo []pending
	var files []*dwarf.LineFile
	r := d.Reader()
	// A panic of debug/dwarf ends the walk like an error does.
	_ = elfx.Guard(func() error {
		for {
			e, err := r.Next()
			if err != nil || e == nil {
				return err
			}
			switch e.Tag {
			case dwarf.TagCompileUnit, dwarf.TagPartialUnit:
				files = nil
				if lr, err := d.LineReader(e); err == nil && lr != nil {
					files = lr.Files()
				}
			case dwarf.TagSubprogram:
				var x decl
				line, _ := e.Val(dwarf.AttrDeclLine).(int64)
				fi, _ := e.Val(dwarf.AttrDeclFile).(int64)
				if line > 0 && fi >= 0 && fi < int64(len(files)) && files[fi] != nil {
					x.pos = srcPos{int(line), filepath.Clean(files[fi].Name)}
				}
				for _, a := range []dwarf.Attr{dwarf.AttrAbstractOrigin, dwarf.AttrSpecification} {
					if ref, ok := e.Val(a).(dwarf.Offset); ok {
						x.ref = ref
						break
					}
				}
				decls[e.Offset] = x
				if low, ok := e.Val(dwarf.AttrLowpc).(uint64); ok && x.pos.line == 0 && x.ref != 0 {
					todo = append(todo, pending{low, x.ref})
				}
			}
		}
	})
	for _, t := range todo {
		// An origin may itself refer on (a definition to its
		// declaration in a class); a few steps suffice.
		for ref, n := t.ref, 0; ref != 0 && n < 4; n++ {
			x := decls[ref]
			if x.pos.line > 0 {
				out[t.low] = x.pos
				break
			}
			ref = x.ref
		}
	}
	return out
}
