package procstatus

import "testing"

func TestHWM(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"Name:\tx\nVmPeak:\t  100 kB\nVmHWM:\t    1234 kB\nVmRSS:\t 10 kB\n", 1234 << 10, true},
		{"Name:\tkthreadd\nState:\tS (sleeping)\n", 0, false}, // a kernel thread: no memory lines
		{"VmHWM:\t1 MB\n", 0, false},
		{"VmHWM:\t12 MB\n", 0, false},
		{"VmRSS:\t10 kB\n", 0, false},
		{"VmHWM:\t-5 kB\n", 0, false},
		{"VmHWM:\n", 0, false},
		{"VmHWM:\t99999999999999999999 kB\n", 0, false},
	} {
		got, ok := HWM([]byte(c.in))
		if got != c.want || ok != c.ok {
			t.Errorf("%q: %d %v, want %d %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func FuzzHWM(f *testing.F) {
	f.Add([]byte("Name:\tcat\nVmHWM:\t    1234 kB\n"))
	f.Add([]byte("VmHWM: 99999999999999999999 kB"))
	f.Add([]byte("VmHWM:"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if v, ok := HWM(b); ok && (v < 0 || v > 1<<50) {
			t.Fatalf("%d bytes accepted", v)
		}
	})
}
