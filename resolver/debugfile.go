package resolver

import (
	"bytes"
	"debug/elf"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"rtrace/internal/elfx"
	"rtrace/internal/regular"
)

// debugFile is an open separate debug file, parsed.
type debugFile struct {
	*elfFile
	fh *os.File // open while its DWARF is read
}

// openedModule is an ELF file, parsed, and its separate debug file when it
// needs one (nil when there is none; warn tells why a candidate was
// unusable). Both stay open, for DWARF read lazily, until close.
type openedModule struct {
	main  *elfFile
	debug *debugFile
	warn  error
	fh    *os.File
}

// openModule parses the ELF file at path and, when it lacks a symbol table
// or DWARF, finds its separate debug file.
func openModule(path string, dirs []string) (*openedModule, error) {
	fh, err := regular.Open(path)
	if err != nil {
		return nil, err
	}
	m := &openedModule{fh: fh}
	if m.main, err = parseELF(fh); err != nil {
		fh.Close()
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if !m.main.hasSymtab || !m.main.hasDWARF {
		m.debug, m.warn = findDebugFile(path, m.main, dirs)
	}
	return m, nil
}

func (m *openedModule) close() {
	m.fh.Close()
	if m.debug != nil {
		m.debug.fh.Close()
	}
}

// findDebugFile opens the separate debug file of the object at path, as
// gdb looks for it ("Separate Debug Files" in the gdb manual): by build id,
// <dir>/.build-id/xx/rest.debug for each debug directory, then by the
// .gnu_debuglink name in the object's directory, its .debug
// subdirectory, and under each debug directory followed by the object's
// directory. A candidate must carry the same build id or, without one, the
// CRC32 the link records. It returns nil when there is none; the error
// tells of a candidate by build id that is no ELF file.
func findDebugFile(path string, f *elfFile, dirs []string) (*debugFile, error) {
	self, _ := os.Stat(path)
	var bad error
	try := func(cand string, check func(*debugFile) bool) *debugFile {
		fh, err := regular.Open(cand)
		if err != nil {
			return nil
		}
		st, err := fh.Stat()
		if err != nil || !st.Mode().IsRegular() || self != nil && os.SameFile(self, st) {
			fh.Close()
			return nil
		}
		ef, err := parseELF(fh)
		if err != nil {
			if bad == nil {
				bad = fmt.Errorf("debug file %s: %w", cand, err)
			}
			fh.Close()
			return nil
		}
		if d := (&debugFile{ef, fh}); check(d) {
			return d
		}
		fh.Close()
		return nil
	}
	if id := f.BuildID; len(id) > 2 {
		for _, d := range dirs {
			cand := filepath.Join(d, ".build-id", id[:2], id[2:]+".debug")
			if d := try(cand, func(d *debugFile) bool { return d.BuildID == id }); d != nil {
				return d, nil
			}
		}
	}
	name, crc, ok := debugLink(f.ef)
	if !ok {
		return nil, bad
	}
	dir := filepath.Dir(path)
	cands := []string{filepath.Join(dir, name), filepath.Join(dir, ".debug", name)}
	for _, d := range dirs {
		cands = append(cands, filepath.Join(d, dir, name))
	}
	check := func(d *debugFile) bool {
		if f.BuildID != "" && d.BuildID != "" {
			return d.BuildID == f.BuildID
		}
		sum, err := crcOf(d.fh)
		return err == nil && sum == crc
	}
	for _, c := range cands {
		if d := try(c, check); d != nil {
			return d, nil
		}
	}
	return nil, bad
}

// crcOf is the CRC32 (IEEE, as binutils' gnu_debuglink_crc32) of fh.
func crcOf(fh *os.File) (uint32, error) {
	h := crc32.NewIEEE()
	if _, err := io.Copy(h, io.NewSectionReader(fh, 0, 1<<62)); err != nil {
		return 0, err
	}
	return h.Sum32(), nil
}

// debugLink returns the file name and CRC32 of the .gnu_debuglink section:
// a NUL-terminated name, padding to 4 bytes, a 4-byte CRC.
func debugLink(ef *elf.File) (name string, crc uint32, ok bool) {
	s := ef.Section(".gnu_debuglink")
	if s == nil || s.Type == elf.SHT_NOBITS {
		return "", 0, false
	}
	var data []byte
	if elfx.Guard(func() (err error) { data, err = s.Data(); return err }) != nil {
		return "", 0, false
	}
	n := bytes.IndexByte(data, 0)
	off := (n + 4) &^ 3
	if n <= 0 || off+4 > len(data) {
		return "", 0, false
	}
	name = string(data[:n])
	if name != filepath.Base(name) || name == "." || name == ".." {
		return "", 0, false // a link names a file, never a path
	}
	return name, ef.ByteOrder.Uint32(data[off:]), true
}
