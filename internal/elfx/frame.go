package elfx

import (
	"cmp"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-delve/delve/pkg/dwarf/frame"
)

// ErrNoCFI says an object has neither .eh_frame nor .debug_frame.
var ErrNoCFI = errors.New("no .eh_frame or .debug_frame")

// CFI reads the call frame information of the ELF object ef: the FDEs of
// its .eh_frame and .debug_frame, with addresses plus bias, sorted by start
// (see ParseCFI). path names the object in errors.
func CFI(ef *elf.File, path string, bias uint64) (frame.FrameDescriptionEntries, error) {
	var eh, debug []byte
	var ehAddr uint64
	// Section data is read (and decompressed) on demand: inside the guard.
	err := Guard(func() (err error) {
		if s := ef.Section(".eh_frame"); s != nil && s.Type != elf.SHT_NOBITS && s.Addr != 0 {
			if eh, err = s.Data(); err != nil {
				return fmt.Errorf("reading .eh_frame of %s: %w", path, err)
			}
			ehAddr = s.Addr
		}
		if s := ef.Section(".debug_frame"); s != nil && s.Type != elf.SHT_NOBITS {
			if debug, err = s.Data(); err != nil {
				return fmt.Errorf("reading .debug_frame of %s: %w", path, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	fdes, err := ParseCFI(eh, ehAddr, debug, bias)
	if err != nil {
		return nil, fmt.Errorf("parsing CFI of %s: %w", path, err)
	}
	return fdes, nil
}

// ParseCFI parses an .eh_frame section (linked at ehAddr) and a .debug_frame
// section, either possibly empty, into FDEs with addresses plus bias, sorted
// by start. A section that fails to parse is left out; it is an error only
// that nothing is left.
func ParseCFI(eh []byte, ehAddr uint64, debug []byte, bias uint64) (frame.FrameDescriptionEntries, error) {
	var all frame.FrameDescriptionEntries
	var errs []error
	if len(eh) > 0 && ehAddr != 0 {
		// A non-zero ehFrameAddr is what makes delve read the .eh_frame
		// variant (pc-relative pointers, CIE ids counted backwards).
		fdes, err := safeParse(eh, bias, ehAddr)
		if err != nil {
			errs = append(errs, fmt.Errorf(".eh_frame: %w", err))
		}
		all = all.Append(fdes)
	}
	if len(debug) > 0 {
		fdes, err := safeParse(debug, bias, 0)
		if err != nil {
			errs = append(errs, fmt.Errorf(".debug_frame: %w", err))
		}
		// Append sorts and drops duplicates: frame.Parse does not sort,
		// and FDEForPC's binary search silently misses on unsorted input.
		all = all.Append(fdes)
	}
	if len(all) == 0 {
		if len(errs) > 0 {
			return nil, errors.Join(errs...)
		}
		return nil, ErrNoCFI
	}
	return all, nil
}

// safeParse is frame.Parse, whose parser panics on some truncated input.
func safeParse(data []byte, bias, ehAddr uint64) (fdes frame.FrameDescriptionEntries, err error) {
	defer func() {
		if r := recover(); r != nil {
			fdes, err = nil, fmt.Errorf("panic: %v", r)
		}
	}()
	return frame.Parse(data, binary.LittleEndian, bias, 8, ehAddr)
}

// SyntheticName is the name of a function no symbol names, by its
// link-time address: stable from run to run, and replaced by the real
// name wherever a symbol table (a separate debug file) gives one.
func SyntheticName(vaddr uint64) string { return fmt.Sprintf("func_%x", vaddr) }

// FrameFuncs returns the functions of a stripped object f (f.Stripped):
// its .dynsym functions, and a synthetic one (SyntheticName, Synthetic
// set) for each other FDE that starts in its code. An FDE brackets one
// function, whose bounds gcc and clang emit for unwinding even when the
// symbols are stripped. Left out: the FDEs of the PLT sections (the linker
// describes its stubs), and any outside the executable segments; the FDE
// at the entry point is named _start, which it is. A part of a function
// that gcc splits off (foo.cold) has an FDE of its own and so comes back
// as a function: callers that plant at entries must tell it apart (it is
// reached by a jump, never called). For an object with a symbol table,
// f.Funcs is returned as is.
func FrameFuncs(f *File) ([]Func, error) {
	if !f.Stripped {
		return f.Funcs, nil
	}
	ef, err := OpenELF(f.Path)
	if err != nil {
		return nil, err
	}
	defer ef.Close()
	return frameFuncs(f, ef)
}

// frameFuncs is FrameFuncs of f, read as ef.
func frameFuncs(f *File, ef *elf.File) ([]Func, error) {
	fdes, err := CFI(ef, f.Path, 0)
	if errors.Is(err, ErrNoCFI) {
		return f.Funcs, nil
	}
	if err != nil {
		return nil, err
	}
	var skip [][2]uint64 // the PLT sections
	for _, s := range ef.Sections {
		if s.Name == ".plt" || strings.HasPrefix(s.Name, ".plt.") {
			skip = append(skip, [2]uint64{s.Addr, s.Addr + s.Size})
		}
	}
	named := make(map[uint64]bool, len(f.Funcs))
	for _, fn := range f.Funcs {
		named[fn.Value] = true
	}
	out := slices.Clone(f.Funcs)
	for _, fde := range fdes {
		lo, hi := fde.Begin(), fde.End()
		if named[lo] || hi <= lo || !f.InExec(lo) || slices.ContainsFunc(skip, func(r [2]uint64) bool { return lo >= r[0] && lo < r[1] }) {
			continue
		}
		named[lo] = true
		name := SyntheticName(lo)
		if lo == f.Entry {
			name = "_start"
		}
		out = append(out, Func{Name: name, Value: lo, Size: hi - lo, Local: true, Synthetic: true})
	}
	slices.SortFunc(out, func(a, b Func) int { return cmp.Compare(a.Value, b.Value) })
	return out, nil
}

// InExec reports whether the link-time address vaddr is in an executable
// segment of f.
func (f *File) InExec(vaddr uint64) bool {
	for _, l := range f.Loads {
		if l.Exec && vaddr >= l.Vaddr && vaddr < l.Vaddr+l.Memsz {
			return true
		}
	}
	return false
}
