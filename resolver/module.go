package resolver

import (
	"debug/dwarf"
	"debug/elf"
	"fmt"
	"path/filepath"
	"sort"

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
			typ = 'W'
		case fn.Local:
			typ = 't'
		}
		syms = append(syms, uftrace.Symbol{Addr: fn.Value - base, Type: typ, Name: fn.Name})
		if e := fn.Value + fn.Size - base; e > end {
			end = e
		}
	}
	return syms, end
}

// DebugFuncs returns the .dbg function blocks of the ELF file at path: each
// function's declaration line and file from DWARF. A file without DWARF
// gives nil; corrupt DWARF gives an error and no blocks.
func DebugFuncs(path string, f *elfx.File) (funcs []uftrace.DebugFunc, err error) {
	defer func() {
		if p := recover(); p != nil {
			funcs, err = nil, fmt.Errorf("%s: corrupt DWARF: %v", path, p)
		}
	}()
	ef, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer ef.Close()
	if ef.Section(".debug_info") == nil {
		return nil, nil
	}
	d, err := ef.DWARF()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	names := map[uint64]string{}
	for _, fn := range f.Funcs {
		names[fn.Value] = fn.Name
	}
	base := f.MinVaddr()
	r := d.Reader()
	var files []*dwarf.LineFile
	seen := map[uint64]bool{}
	for {
		e, err := r.Next()
		if err != nil {
			return nil, fmt.Errorf("%s: reading DWARF: %w", path, err)
		}
		if e == nil {
			break
		}
		switch e.Tag {
		case dwarf.TagCompileUnit:
			files = nil
			if lr, err := d.LineReader(e); err == nil && lr != nil {
				files = lr.Files()
			}
		case dwarf.TagSubprogram:
			low, ok := e.Val(dwarf.AttrLowpc).(uint64)
			name := names[low]
			if !ok || name == "" || seen[low] {
				continue
			}
			line, _ := e.Val(dwarf.AttrDeclLine).(int64)
			fi, _ := e.Val(dwarf.AttrDeclFile).(int64)
			file := ""
			if fi > 0 && int(fi) < len(files) && files[fi] != nil {
				file = files[fi].Name
			}
			if line <= 0 || file == "" {
				continue
			}
			seen[low] = true
			funcs = append(funcs, uftrace.DebugFunc{Addr: low - base, Name: name, Line: int(line), File: filepath.Clean(file)})
		}
	}
	sort.Slice(funcs, func(i, j int) bool { return funcs[i].Addr < funcs[j].Addr })
	return funcs, nil
}
