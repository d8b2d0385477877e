package tracer

import "testing"

func TestParseHWM(t *testing.T) {
	for _, c := range []struct {
		in string
		kb uint64
		ok bool
	}{
		{"Name:\tcat\nVmPeak:\t   8000 kB\nVmHWM:\t    1234 kB\nVmRSS:\t 1000 kB\n", 1234, true},
		{"Name:\tkthreadd\nState:\tS (sleeping)\n", 0, false}, // a kernel thread: no memory lines
		{"VmHWM:\t12 MB\n", 0, false},
		{"VmHWM:\t-3 kB\n", 0, false},
		{"VmHWM:\n", 0, false},
	} {
		kb, ok := parseHWM([]byte(c.in))
		if kb != c.kb || ok != c.ok {
			t.Errorf("parseHWM(%q) = %d, %v; want %d, %v", c.in, kb, ok, c.kb, c.ok)
		}
	}
}

func FuzzParseHWM(f *testing.F) {
	f.Add([]byte("Name:\tcat\nVmHWM:\t    1234 kB\n"))
	f.Add([]byte("VmHWM:\t99999999999999999999 kB\n"))
	f.Add([]byte("VmHWM:"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if kb, ok := parseHWM(b); ok && kb > 1<<53 {
			t.Fatalf("%d kB accepted", kb)
		}
	})
}
