// Package elfnote splits ELF note sections (SHT_NOTE data: namesz, descsz,
// type, then name and desc, each padded to 4 bytes) into notes. Shared by
// the build-id reader (internal/elfx) and the USDT note reader
// (internal/usdt).
package elfnote

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Note is one note: its owner name (NUL trimmed), type and descriptor.
type Note struct {
	Name string
	Type uint32
	Desc []byte
}

// Limits on a note's name and descriptor: larger ones are corrupt.
const (
	maxName = 1 << 16
	maxDesc = 1 << 20
)

// Parse returns the notes of data. A note that overruns data, or whose
// sizes are beyond the limits, ends the list with an error; the notes
// before it are returned.
func Parse(data []byte) ([]Note, error) {
	var out []Note
	for off := uint64(0); off+12 <= uint64(len(data)); {
		namesz := uint64(binary.LittleEndian.Uint32(data[off:]))
		descsz := uint64(binary.LittleEndian.Uint32(data[off+4:]))
		typ := binary.LittleEndian.Uint32(data[off+8:])
		nameEnd := off + 12 + (namesz+3)&^3
		descEnd := nameEnd + (descsz+3)&^3
		if namesz > maxName || descsz > maxDesc || descEnd > uint64(len(data)) {
			return out, fmt.Errorf("note at +%#x overruns the section", off)
		}
		out = append(out, Note{
			Name: string(bytes.TrimRight(data[off+12:off+12+namesz], "\x00")),
			Type: typ,
			Desc: data[nameEnd : nameEnd+descsz],
		})
		off = descEnd
	}
	return out, nil
}
