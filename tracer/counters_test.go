package tracer

import (
	"bytes"
	"os"
	"slices"
	"testing"
)

func TestParseCounters(t *testing.T) {
	if v, err := parseStatm([]byte("3873 1869 1650 5 0 227 0\n"), 4); err != nil || !slices.Equal(v, []uint64{15492, 7476, 6600}) {
		t.Errorf("statm: %v %v", v, err)
	}
	stat := "1234 (a (b) c) S 1 1234 1234 0 -1 4194560 790 0 3 0 0 0 0 0 20 0 1 0 100 15863808 1869 18446744073709551615\n"
	if v, err := parseStatFaults([]byte(stat)); err != nil || !slices.Equal(v, []uint64{3, 790}) {
		t.Errorf("stat: %v %v", v, err)
	}
	full := "1234 (a (b) c) S 1 1234 1234 0 -1 4194560 790 0 3 0 0 0 0 0 20 0 1 0 100 15863808 1869 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 5 0 0\n"
	if cpu, ok := parseStatCPU([]byte(full)); !ok || cpu != 5 {
		t.Errorf("stat: processor %d %v, want 5", cpu, ok)
	}
	if _, ok := parseStatCPU([]byte(stat)); ok {
		t.Errorf("stat of 24 fields: a processor read")
	}
	for _, bad := range []string{"", "1 2", "x y z"} {
		if _, err := parseStatm([]byte(bad), 4); err == nil {
			t.Errorf("statm %q: no error", bad)
		}
	}
	for _, bad := range []string{"", "1 (x) S 1", "1 (x) S 1 1 1 0 -1 0 x 0 3"} {
		if _, err := parseStatFaults([]byte(bad)); err == nil {
			t.Errorf("stat %q: no error", bad)
		}
	}
	// This process's own, as the kernel writes them.
	if ev := readCounters(os.Getpid(), 3); len(ev) != 2 || ev[0].Values[1] == 0 || ev[1].Values[1] == 0 {
		t.Errorf("readCounters of this process: %+v", ev)
	}
}

func FuzzParseCounters(f *testing.F) {
	f.Add([]byte("3873 1869 1650 5 0 227 0\n"))
	f.Add([]byte("1234 (a (b) c) S 1 1234 1234 0 -1 4194560 790 0 3 0 0 0 0 0 20 0 1 0 100 15863808 1869 18446744073709551615\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if v, err := parseStatm(b, 4); err == nil && len(v) != 3 {
			t.Errorf("statm: %d values", len(v))
		}
		if v, err := parseStatFaults(b); err == nil && len(v) != 2 {
			t.Errorf("stat: %d values", len(v))
		}
		if _, ok := parseStatCPU(b); ok && len(bytes.Fields(b)) < 39 {
			t.Errorf("stat: a CPU from %d fields", len(bytes.Fields(b)))
		}
	})
}
