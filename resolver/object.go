package resolver

import (
	"debug/dwarf"
	"debug/elf"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"rtrace/internal/elfx"
)

// object is what the resolver knows of one ELF file: its segments, function
// symbols and DWARF, each from the file itself or its separate debug file.
type object struct {
	loads []elfx.Load
	syms  symtab
	dw    *dwarfIndex // nil without usable DWARF
	// warn reports a problem found late (in a unit read lazily); the
	// object reports at most one.
	warn func(error)
}

// elfFile is one parsed ELF file: the facts elfx reads, plus what only
// debug/elf gives (sections, DWARF, debug link).
type elfFile struct {
	*elfx.File
	ef        *elf.File
	text      []span
	hasSymtab bool
	hasDWARF  bool
}

// parseELF reads an ELF file. Corrupt input gives an error, never a panic.
func parseELF(ra io.ReaderAt) (*elfFile, error) {
	xf, err := elfx.Parse(ra)
	if err != nil {
		return nil, err
	}
	ef, err := elfx.NewELF(ra)
	if err != nil {
		return nil, err
	}
	f := &elfFile{File: xf, ef: ef}
	for _, s := range ef.Sections {
		const text = elf.SHF_ALLOC | elf.SHF_EXECINSTR
		if s.Flags&text == text && s.Size > 0 {
			f.text = append(f.text, span{s.Addr, s.Addr + s.Size})
		}
		switch {
		case s.Type == elf.SHT_SYMTAB:
			f.hasSymtab = true
		case (s.Name == ".debug_info" || s.Name == ".zdebug_info") && s.Type != elf.SHT_NOBITS:
			f.hasDWARF = true
		}
	}
	sortSpans(f.text)
	if len(f.text) == 0 { // no section headers: the executable segments
		for _, l := range xf.Loads {
			if l.Exec {
				f.text = append(f.text, span{l.Vaddr, l.Vaddr + l.Memsz})
			}
		}
		sortSpans(f.text)
	}
	return f, nil
}

// readDWARF indexes the DWARF of f. Corrupt DWARF gives an error.
func readDWARF(f *elfFile, text []span) (*dwarfIndex, error) {
	d, err := elfx.DWARF(f.ef)
	if err != nil {
		return nil, fmt.Errorf("corrupt DWARF: %w", err)
	}
	var lines *lineTable
	var cus []cuRange
	err = elfx.Guard(func() (err error) {
		lines, cus, err = readLines(d, text)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("corrupt DWARF: %w", err)
	}
	return &dwarfIndex{d: d, lines: lines, cus: cus, units: map[dwarf.Offset]*unitFuncs{}, names: map[dwarf.Offset]string{}}, nil
}

// newObject builds an object from a parsed file and, when it lacks
// symbols or DWARF, its debug file (nil for none). An error in DWARF
// leaves the object with symbols only; it is returned as a warning.
func newObject(main, debug *elfFile) (*object, error) {
	o := &object{loads: main.Loads}
	o.syms = symtab{funcs: main.Funcs, text: main.text}
	if !main.hasSymtab && debug != nil && debug.hasSymtab {
		o.syms.funcs = debug.Funcs
	}
	src := main
	if !main.hasDWARF && debug != nil && debug.hasDWARF {
		src = debug
	}
	if !src.hasDWARF {
		return o, nil
	}
	dw, err := readDWARF(src, main.text)
	if err != nil {
		return o, err
	}
	o.dw = dw
	return o, nil
}

// parseObject reads an object from ra, without looking for a debug file:
// the entry point the fuzz test drives.
func parseObject(ra io.ReaderAt) (*object, error) {
	f, err := parseELF(ra)
	if err != nil {
		return nil, err
	}
	return newObject(f, nil)
}

// openObject reads the object at path and, if it lacks symbols or DWARF,
// its separate debug file found through dirs. A nil object: the file is
// unusable, err says why. An object with an error: usable, with a warning
// (corrupt DWARF, an unreadable debug file).
func openObject(path string, dirs []string) (*object, error) {
	m, err := openModule(path, dirs)
	if err != nil {
		return nil, err
	}
	defer m.close()
	var warn error
	if m.warn != nil {
		warn = fmt.Errorf("%s: %w", path, m.warn)
	}
	var debug *elfFile
	if m.debug != nil {
		debug = m.debug.elfFile
	}
	o, err := newObject(m.main, debug)
	if err != nil {
		warn = fmt.Errorf("%s: %w", path, err)
	}
	return o, warn
}

// lookup returns what is known of link-time address pc: the function name
// (raw, as the symbol table or DWARF spells it) and source position.
//
// The name is DWARF's when DWARF covers pc, as sp-rtrace's default BFD
// method (bfd_find_nearest_line) and addr2line give it: the innermost
// inlined function, the source name rather than a compiler clone's symbol
// ("msort_with_tmp", not "msort_with_tmp.part.0"). The symbol table's
// name stands when DWARF has none, or when only the symbol carries the C++
// linkage name that demangles with class and parameters.
func (o *object) lookup(pc uint64) (name, file string, line int) {
	if fn, ok := o.syms.lookup(pc); ok {
		name = fn.Name
	}
	if o.dw == nil {
		return name, "", 0
	}
	file, line = o.dw.lines.lookup(pc)
	dn, inlined, err := o.dwarfFunction(pc)
	if err != nil && o.warn != nil {
		o.warn(err)
		o.warn = nil
	}
	if dn != "" && (inlined || name == "" || !mangled(name) || mangled(dn)) {
		name = dn
	}
	return name, file, line
}

// mangled reports whether name is an Itanium C++ ABI mangled name.
func mangled(name string) bool { return strings.HasPrefix(name, "_Z") }

// dwarfFunction is dwarfIndex.function, which reads DWARF units lazily,
// made safe against panics in debug/dwarf on corrupt input.
func (o *object) dwarfFunction(pc uint64) (name string, inlined bool, err error) {
	err = elfx.Guard(func() (err error) {
		name, inlined, err = o.dw.function(pc)
		return err
	})
	return name, inlined, err
}

// displayPath is the source path as output: its base name unless full.
func displayPath(file string, full bool) string {
	if full {
		return file
	}
	return filepath.Base(file)
}
