package launcher

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

// gcSettings reads GOGC and the memory limit without changing them.
func gcSettings() (gogc int, limit int64) {
	gogc = debug.SetGCPercent(-1)
	debug.SetGCPercent(gogc)
	return gogc, debug.SetMemoryLimit(-1)
}

func TestStartupGC(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	heaps := 0
	defer func(f func()) { setUpHeap = f }(setUpHeap)
	setUpHeap = func() { heaps++ }
	ready := startupGC()
	if heaps != 1 {
		t.Errorf("startupGC placed the heap %d times, want once", heaps)
	}
	if gogc, limit := gcSettings(); gogc != -1 || limit != startupLimit {
		t.Errorf("during start-up: GOGC %d, limit %d; want off with limit %d", gogc, limit, startupLimit)
	}
	ready()
	ready() // idempotent
	if gogc, limit := gcSettings(); gogc != runGOGC || limit != math.MaxInt64 {
		t.Errorf("once ready: GOGC %d, limit %d; want %d, no limit", gogc, limit, runGOGC)
	}
	// A user's GOGC is theirs.
	t.Setenv("GOGC", "50")
	debug.SetGCPercent(50)
	startupGC()()
	if gogc, _ := gcSettings(); gogc != 50 {
		t.Errorf("with GOGC=50 set: GOGC %d after the session's start-up", gogc)
	}
	if heaps != 1 {
		t.Errorf("with GOGC=50 set: the heap was placed again (%d times in all)", heaps)
	}
}

// TestHugeHeap checks that the range hugeHeap advises is marked for huge
// pages in the process's mappings (VmFlags hg, proc(5)).
func TestHugeHeap(t *testing.T) {
	mode, err := os.ReadFile(thpEnabled)
	if err != nil || !bytes.Contains(mode, []byte("[madvise]")) {
		t.Skipf("transparent huge pages are not in madvise mode here (%s: %q)", thpEnabled, mode)
	}
	lo, hi := hugeHeap()
	if lo == 0 || hi-lo < hugeHeapSize-hugePage || lo%hugePage != 0 {
		t.Fatalf("advised [%#x, %#x), want %d MiB aligned on 2 MiB", lo, hi, hugeHeapSize>>20)
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	var in bool // inside a mapping that overlaps [lo, hi)
	covered := uintptr(0)
	var vlo, vhi uintptr
	for line := range strings.Lines(string(smaps)) {
		if f := strings.Fields(line); len(f) > 0 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			var a, b uint64
			fmt.Sscanf(f[0], "%x-%x", &a, &b)
			vlo, vhi = uintptr(a), uintptr(b)
			in = vlo < hi && vhi > lo
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			if !slices.Contains(strings.Fields(line)[1:], "hg") {
				t.Errorf("mapping %#x-%#x in the advised range lacks hg: %s", vlo, vhi, strings.TrimSpace(line))
			}
			covered += min(vhi, hi) - max(vlo, lo)
		}
	}
	if covered != hi-lo {
		t.Errorf("mappings cover %#x of the %#x bytes advised", covered, hi-lo)
	}
}
