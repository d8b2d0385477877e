package perfcomm

import (
	"encoding/binary"
	"slices"
	"testing"
)

func TestParseCPUList(t *testing.T) {
	for in, want := range map[string][]int{"0-3,6\n": {0, 1, 2, 3, 6}, "0": {0}, "": nil, "3-1": nil, "a": nil, "0-1,x": nil} {
		if got := parseCPUList(in); !slices.Equal(got, want) {
			t.Errorf("%q: %v, want %v", in, got, want)
		}
	}
}

// lost builds a PERF_RECORD_LOST record of n records.
func lost(n uint64) []byte {
	b := make([]byte, 24)
	binary.LittleEndian.PutUint32(b, 2)
	binary.LittleEndian.PutUint16(b[6:], 24)
	binary.LittleEndian.PutUint64(b[16:], n)
	return b
}

func TestLostIn(t *testing.T) {
	comm := make([]byte, 40)
	binary.LittleEndian.PutUint32(comm, 3)
	binary.LittleEndian.PutUint16(comm[6:], 40)
	if n := lostIn(append(append(append([]byte{}, comm...), lost(7)...), lost(5)...)); n != 12 {
		t.Errorf("lost %d, want 12", n)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("0-3,6", lost(3))
	f.Add("", []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, list string, data []byte) {
		for _, c := range parseCPUList(list) {
			if c < 0 {
				t.Fatalf("%q: cpu %d", list, c)
			}
		}
		lostIn(data)
	})
}
