package elfnote

import (
	"encoding/binary"
	"testing"
)

func note(name string, typ uint32, desc []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(name)+1))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(desc)))
	b = binary.LittleEndian.AppendUint32(b, typ)
	b = append(b, name...)
	b = append(b, make([]byte, 1+(-(len(name)+1))&3)...)
	b = append(b, desc...)
	return append(b, make([]byte, (-len(desc))&3)...)
}

func TestParse(t *testing.T) {
	data := append(note("GNU", 3, []byte{1, 2, 3, 4, 5}), note("stapsdt", 3, []byte("abc"))...)
	ns, err := Parse(data)
	if err != nil || len(ns) != 2 || ns[0].Name != "GNU" || len(ns[0].Desc) != 5 || ns[1].Name != "stapsdt" || string(ns[1].Desc) != "abc" {
		t.Fatalf("Parse = %+v, %v", ns, err)
	}
	// A truncated second note: the first is kept, the error reported.
	ns, err = Parse(data[:len(data)-4])
	if err == nil || len(ns) != 1 {
		t.Fatalf("truncated: %+v, %v", ns, err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(note("GNU", 3, []byte{1, 2, 3, 4}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 3, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		Parse(data)
	})
}
