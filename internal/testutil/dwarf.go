package testutil

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"testing"
)

// dwarfSections are the sections a fuzzed DWARF input carries, in order.
var dwarfSections = []string{".debug_abbrev", ".debug_info", ".debug_line", ".debug_str",
	".debug_line_str", ".debug_rnglists", ".debug_ranges", ".debug_addr", ".debug_str_offsets"}

// PackDWARF returns the DWARF sections of the ELF file path as one fuzz
// input (UnpackDWARF reads it back): each section's length (4 bytes,
// little endian) and its bytes, in dwarfSections' order.
func PackDWARF(t testing.TB, path string) []byte {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b []byte
	for _, name := range dwarfSections {
		var data []byte
		if s := f.Section(name); s != nil {
			if data, err = s.Data(); err != nil {
				t.Fatalf("%s: %s: %v", path, name, err)
			}
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(len(data)))
		b = append(b, data...)
	}
	return b
}

// UnpackDWARF builds DWARF data from a PackDWARF input, however cut or
// changed: a length past the end takes what is left. debug/dwarf's own
// errors (and panics) are the caller's to handle.
func UnpackDWARF(in []byte) (*dwarf.Data, error) {
	secs := make([][]byte, len(dwarfSections))
	for i := range secs {
		if len(in) < 4 {
			break
		}
		n := int(binary.LittleEndian.Uint32(in))
		in = in[4:]
		n = min(n, len(in))
		secs[i], in = bytes.Clone(in[:n]), in[n:]
	}
	d, err := dwarf.New(secs[0], nil, nil, secs[1], secs[2], nil, secs[6], secs[3])
	if err != nil {
		return nil, err
	}
	for i, name := range dwarfSections[4:] {
		if s := secs[4+i]; len(s) > 0 && name != ".debug_ranges" {
			if err := d.AddSection(name, s); err != nil {
				return nil, err
			}
		}
	}
	return d, nil
}
