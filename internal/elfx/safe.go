package elfx

import (
	"debug/dwarf"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"strings"

	"rtrace/internal/regular"
)

// ErrCorrupt is returned when the standard library's ELF or DWARF reader
// panics on its input instead of returning an error. It does on some
// corrupt files, lazily too (symbols, section data, DWARF entries read on
// demand): golang/go#10999, #47445, #75130; see FuzzParse.
var ErrCorrupt = errors.New("corrupt ELF or DWARF")

// NewELF parses an x86-64 ELF object from r, like elf.NewFile. Corrupt
// input gives an error wrapping ErrNotELF or ErrCorrupt, never a panic.
// Later reads of the file (Symbols, Section.Data, DWARF entries) can still
// panic: make them inside Guard.
func NewELF(r io.ReaderAt) (*elf.File, error) {
	var f *elf.File
	err := Guard(func() error {
		var err error
		f, err = elf.NewFile(r)
		return err
	})
	switch {
	case errors.Is(err, ErrCorrupt):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrNotELF, err)
	}
	if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_X86_64 {
		return nil, fmt.Errorf("%w: class %v machine %v", ErrNotELF, f.Class, f.Machine)
	}
	return f, nil
}

// OpenELF opens the ELF object at path like NewELF. Closing the returned
// file closes path. Errors name path.
func OpenELF(path string) (*elf.File, error) {
	// Not a FIFO, which would block elf.Open's open, nor a device. (A
	// file swapped in between is not guarded against: elf.File closes only
	// what elf.Open opened.)
	if err := regular.Check(path); err != nil {
		return nil, err
	}
	var f *elf.File
	err := Guard(func() error {
		var err error
		f, err = elf.Open(path)
		return err
	})
	var pe *fs.PathError
	switch {
	case errors.As(err, &pe): // os.Open and ReadAt name path
		return nil, err
	case errors.Is(err, ErrCorrupt):
		return nil, fmt.Errorf("%s: %w", path, err)
	case err != nil:
		return nil, fmt.Errorf("%s: %w: %v", path, ErrNotELF, err)
	}
	if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_X86_64 {
		f.Close()
		return nil, fmt.Errorf("%s: %w: class %v machine %v", path, ErrNotELF, f.Class, f.Machine)
	}
	return f, nil
}

// DWARF loads the DWARF of f (f.DWARF, which decompresses and relocates
// sections eagerly) with panics turned into ErrCorrupt.
func DWARF(f *elf.File) (*dwarf.Data, error) {
	var d *dwarf.Data
	err := Guard(func() error {
		var err error
		d, err = f.DWARF()
		return err
	})
	return d, err
}

// Guard runs fn, which reads an ELF file or its DWARF, and turns a panic
// raised while debug/elf or debug/dwarf code was running into an error
// wrapping ErrCorrupt. Any other panic goes on: it is a bug in fn, not bad
// input, and must crash with its stack intact. Guard is the one place rtrace
// recovers from the standard library's readers.
func Guard(fn func() error) (err error) {
	finished := false
	defer func() {
		if finished || !parserPanicking() {
			return // returned, or a panic that is not ours to stop
		}
		err = fmt.Errorf("%w: %v", ErrCorrupt, recover())
	}()
	err = fn()
	finished = true
	return err
}

// parserPanicking reports whether the panic in progress was raised below
// Guard with a frame of debug/elf or debug/dwarf on the stack. It runs in
// Guard's deferred function, which runs on top of the panicking frames
// (as a deferred runtime/debug.Stack sees where a panic came from).
func parserPanicking() bool {
	pcs := make([]uintptr, 128)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		fr, more := frames.Next()
		switch {
		case fr.Function == "rtrace/internal/elfx.Guard":
			return false
		case strings.HasPrefix(fr.Function, "debug/elf."), strings.HasPrefix(fr.Function, "debug/dwarf."):
			return true
		}
		if !more {
			return false
		}
	}
}
