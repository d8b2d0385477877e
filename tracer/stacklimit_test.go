package tracer

import (
	"os"
	"strings"
	"testing"
)

const limitsText = `Limit                     Soft Limit           Hard Limit           Units     
Max cpu time              unlimited            unlimited            seconds   
Max stack size            8388608              unlimited            bytes     
Max core file size        0                    unlimited            bytes     
`

// parseStackLimit reads the soft stack limit the walker bounds its loads
// with, and 0 (unknown) for "unlimited" or a missing line.
func TestParseStackLimit(t *testing.T) {
	if n := parseStackLimit([]byte(limitsText)); n != 8388608 {
		t.Errorf("stack limit %d, want 8388608", n)
	}
	unl := strings.Replace(limitsText, "8388608 ", "unlimited", 1)
	if n := parseStackLimit([]byte(unl)); n != 0 {
		t.Errorf("unlimited: %d, want 0", n)
	}
	if n := parseStackLimit([]byte("Max stack size")); n != 0 {
		t.Errorf("no value: %d", n)
	}
	// This process's own limits parse (the kernel's format today).
	b, err := os.ReadFile("/proc/self/limits")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "Max stack size") {
		t.Fatalf("/proc/self/limits has no stack line:\n%s", b)
	}
	parseStackLimit(b)
}

func FuzzParseStackLimit(f *testing.F) {
	f.Add([]byte(limitsText))
	f.Add([]byte("Max stack size\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		parseStackLimit(b) // never panics
	})
}
