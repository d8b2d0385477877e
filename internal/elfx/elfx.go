package elfx

import (
	"bytes"
	"cmp"
	"debug/elf"
	"encoding/hex"
	"errors"
	"io"
	"slices"
	"strings"

	"rtrace/internal/elfnote"
	"rtrace/internal/usdt"
)

// Func is a function symbol. Value is the link-time address.
type Func struct {
	Name  string
	Value uint64
	Size  uint64
	Local bool
	Weak  bool
	// Aliases are the other names at Value (libc's free is also
	// __libc_free, cfree).
	Aliases []string
	// Synthetic: no symbol names it; its bounds are an FDE's and its
	// name is SyntheticName's (see FrameFuncs).
	Synthetic bool
}

// Load is one PT_LOAD segment.
type Load struct {
	Vaddr, Memsz, Offset, Filesz uint64
	Exec                         bool
}

// File holds what rtrace needs of one ELF object.
type File struct {
	Path    string
	Type    elf.Type // ET_EXEC or ET_DYN
	Entry   uint64
	Interp  string   // PT_INTERP, "" for static executables
	Needed  []string // DT_NEEDED: the libraries it names
	Loads   []Load
	BuildID string
	Funcs   []Func // sorted by Value; from .symtab, else .dynsym
	// Stripped: no .symtab function, Funcs are .dynsym's (see FrameFuncs).
	Stripped bool
	Imports  []Import // functions called through the GOT, sorted by slot
	// Probes are the USDT probe sites (.note.stapsdt); ProbeErr says why
	// the list stops early when the notes are malformed.
	Probes   []usdt.Probe
	ProbeErr error
	IsGo     bool
	Setuid   bool
	FileCaps bool // it has file capabilities (setcap)
}

// ErrNotELF is returned for files that are not 64-bit x86-64 ELF objects.
var ErrNotELF = errors.New("not an x86-64 ELF file")

// Parse reads an ELF object from r. Corrupt input yields an error, never a panic.
func Parse(r io.ReaderAt) (*File, error) {
	f, err := NewELF(r)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ef := &File{Type: f.Type, Entry: f.Entry}
	err = Guard(func() error {
		for _, p := range f.Progs {
			switch p.Type {
			case elf.PT_LOAD:
				ef.Loads = append(ef.Loads, Load{Vaddr: p.Vaddr, Memsz: p.Memsz, Offset: p.Off, Filesz: p.Filesz, Exec: p.Flags&elf.PF_X != 0})
			case elf.PT_INTERP:
				// The kernel refuses an interpreter path longer than
				// PATH_MAX (fs/binfmt_elf.c, load_elf_binary).
				if p.Filesz > 4096 {
					continue
				}
				b := make([]byte, p.Filesz)
				if _, err := p.ReadAt(b, 0); err == nil {
					ef.Interp = string(bytes.TrimRight(b, "\x00"))
				}
			}
		}
		ef.BuildID = buildID(f)
		ef.IsGo = f.Section(".go.buildinfo") != nil || f.Section(".gopclntab") != nil
		// .dynsym once: a stripped library's functions and every
		// object's imports both read it (libc's took half of its parse).
		dyn, dynErr := f.DynamicSymbols()
		ef.Funcs, ef.Stripped = funcs(f, dyn)
		ef.Needed, _ = f.ImportedLibraries()
		if dynErr == nil {
			ef.Imports = imports(f, dyn)
		}
		ef.Probes, ef.ProbeErr = usdt.Probes(f)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ef, nil
}

func buildID(f *elf.File) string {
	for _, s := range f.Sections {
		if s.Type != elf.SHT_NOTE {
			continue
		}
		data, err := s.Data()
		if err != nil {
			continue
		}
		notes, _ := elfnote.Parse(data) // a corrupt note ends this section only
		for _, n := range notes {
			if n.Name == "GNU" && n.Type == 3 { // NT_GNU_BUILD_ID
				return hex.EncodeToString(n.Desc)
			}
		}
	}
	return ""
}

// funcs returns the defined function symbols of .symtab, or of .dynsym
// (dyn) when the object is stripped, sorted by address, one name per address (globals
// win over locals, strong over weak).
func funcs(f *elf.File, dyn []elf.Symbol) (_ []Func, stripped bool) {
	syms, err := f.Symbols()
	if err != nil || len(syms) == 0 {
		syms, stripped = dyn, true
	}
	isFunc := func(s *elf.Symbol) bool {
		t := elf.ST_TYPE(s.Info)
		return (t == elf.STT_FUNC || t == elf.STT_GNU_IFUNC) && s.Section != elf.SHN_UNDEF && s.Value != 0 && s.Name != ""
	}
	// Counted first: appending to a growing slice copied libc's
	// functions a dozen times, each into fresh memory (page faults), a
	// third of its parse.
	n := 0
	for i := range syms {
		if isFunc(&syms[i]) {
			n++
		}
	}
	out := make([]Func, 0, n)
	for i := range syms {
		s := &syms[i]
		if !isFunc(s) {
			continue
		}
		out = append(out, Func{
			Name:  s.Name,
			Value: s.Value,
			Size:  s.Size,
			Local: elf.ST_BIND(s.Info) == elf.STB_LOCAL,
			Weak:  elf.ST_BIND(s.Info) == elf.STB_WEAK,
		})
	}
	// Sorted through keys, the table order breaking ties: a stable sort
	// of the structs themselves took most of libc's 2 ms parse. A key
	// packs address, rank and index in one word when they fit (they do
	// in every object but one with an address past 2^40 or 2^21
	// functions), which sorts twice as fast as a pair.
	order := make([]uint64, len(out))
	packed := len(out) < 1<<21
	for i := range out {
		if out[i].Value >= 1<<40 {
			packed = false
		}
		order[i] = out[i].Value<<24 | uint64(rank(out[i]))<<21 | uint64(i)
	}
	if packed {
		slices.Sort(order)
		for i, k := range order {
			order[i] = k & (1<<21 - 1)
		}
	} else {
		for i := range order {
			order[i] = uint64(i)
		}
		slices.SortFunc(order, func(a, b uint64) int {
			x, y := &out[a], &out[b]
			return cmp.Or(cmp.Compare(x.Value, y.Value), cmp.Compare(rank(*x), rank(*y)), cmp.Compare(a, b))
		})
	}
	dedup := make([]Func, 0, len(out))
	for _, i := range order {
		fn := out[i]
		if n := len(dedup); n > 0 && dedup[n-1].Value == fn.Value {
			if fn.Name != dedup[n-1].Name {
				dedup[n-1].Aliases = append(dedup[n-1].Aliases, fn.Name)
			}
			continue
		}
		dedup = append(dedup, fn)
	}
	return dedup, stripped
}

// rank orders the names of one address: globals before locals, then the
// public name before internal ones (calloc, not __libc_calloc, though
// glibc makes calloc the weak alias), then strong before weak.
func rank(f Func) int {
	r := 0
	if f.Local {
		r += 4
	}
	if strings.HasPrefix(f.Name, "_") {
		r += 2
	}
	if f.Weak {
		r++
	}
	return r
}

// MinVaddr is the page-aligned link-time address of the first PT_LOAD.
func (f *File) MinVaddr() uint64 {
	if len(f.Loads) == 0 {
		return 0
	}
	min := f.Loads[0].Vaddr
	for _, l := range f.Loads {
		if l.Vaddr < min {
			min = l.Vaddr
		}
	}
	return PageDown(min)
}

// Bias returns the load bias of f given the start of its lowest mapping:
// runtime address = link-time address + bias. For a non-PIE executable it is 0.
func (f *File) Bias(firstMapStart uint64) uint64 {
	return firstMapStart - f.MinVaddr()
}

// Static reports whether f is an executable without a dynamic loader.
func (f *File) Static() bool { return f.Interp == "" }
