package launcher

import (
	"bytes"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Go's collector during a session. Setting the target up (parsing its
// ELF files, decoding and planting its functions) allocates a few MiB in
// a few ms, with the program waiting: under the default GOGC=100 the
// collector ran 4 times in that window and its workers took one of the
// two CPUs the decoder runs on (Lua's start-up: 26.7 ms median, 20.3 with
// no collection; docs/FAST-PATH.md, "Start-up"). So the collector is off
// until the target runs, with a memory limit as the safety net (the Go
// runtime collects as it nears it), then on at runGOGC: while the program
// runs, rtrace's heap holds the symbol tables and the drain's buffers,
// and a larger GOGC trades some MiB for fewer collections beside it.
const (
	startupLimit = 1 << 30
	runGOGC      = 400
)

// startupGC turns the collector off, puts the heap on huge pages
// (hugeHeap) and returns the function that turns the collector back on
// (idempotent). A user's GOGC or GOMEMLIMIT is theirs: left as it is,
// and the heap too.
func startupGC() (ready func()) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	gogc := debug.SetGCPercent(-1)
	debug.SetMemoryLimit(startupLimit)
	setUpHeap()
	var once sync.Once
	return func() {
		once.Do(func() {
			debug.SetMemoryLimit(math.MaxInt64)
			debug.SetGCPercent(max(gogc, runGOGC))
		})
	}
}

// The heap on huge pages. With the collector off, every allocation of the
// set-up lands on memory the process never touched: a page fault per
// 4 KiB, each zeroed by the kernel. They were 27% of rtrace's CPU time in
// a record of Lua (perf, cpu-clock samples; 2,376 faults), and a fault
// costs more in a virtual machine. Go does not ask for transparent huge
// pages, which Debian's kernels give only where asked (madvise mode), and
// each growth of its heap is a new mapping that would not inherit the
// advice. So hugeHeap grows the heap at once by hugeHeapSize with one
// allocation it never touches, advises that range MADV_HUGEPAGE (a
// virtual reservation: the kernel backs only the 2 MiB pages written),
// and frees it with a collection: the page allocator reuses the lowest
// free addresses, so the set-up's allocations land there, one fault per
// 2 MiB. Record of Lua: 1,245 faults instead of 2,807. The collection
// runs first thing in a session, while the heap holds only the command
// line: 3-4 ms on a slow day of the bench's VM (2 ms of CPU). Run after
// the options' check it took 10-17 ms, most of it waiting for the
// collector to mark what elfx.Prefetch was allocating beside it
// (docs/FAST-PATH.md, "Start-up").
const (
	hugeHeapSize = 64 << 20
	hugePage     = 2 << 20
)

// thpEnabled is where the kernel says when it gives transparent huge
// pages (Documentation/admin-guide/mm/transhuge.rst).
const thpEnabled = "/sys/kernel/mm/transparent_hugepage/enabled"

// setUpHeap is what startupGC runs to place the heap: hugeHeap (a
// variable for the tests).
var setUpHeap = func() { hugeHeap() }

// hugeHeap advises the heap's next hugeHeapSize bytes MADV_HUGEPAGE when
// the kernel gives huge pages only where advised, and returns the range
// advised (0, 0: none).
func hugeHeap() (lo, hi uintptr) {
	mode, err := os.ReadFile(thpEnabled)
	if err != nil || !bytes.Contains(mode, []byte("[madvise]")) {
		return 0, 0 // "always" needs no advice, "never" ignores it
	}
	b := make([]byte, hugeHeapSize)
	base := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	off := (hugePage - base%hugePage) % hugePage
	n := (uintptr(len(b)) - off) &^ (hugePage - 1)
	if err := unix.Madvise(unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), off)), n), unix.MADV_HUGEPAGE); err != nil {
		return 0, 0
	}
	b = nil
	runtime.GC()
	return base + off, base + off + n
}
