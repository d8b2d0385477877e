package launcher

import (
	"math"
	"os"
	"runtime/debug"
	"sync"
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

// startupGC turns the collector off and returns the function that turns
// it back on (idempotent). A user's GOGC or GOMEMLIMIT is theirs: left
// as it is.
func startupGC() (ready func()) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	gogc := debug.SetGCPercent(-1)
	debug.SetMemoryLimit(startupLimit)
	var once sync.Once
	return func() {
		once.Do(func() {
			debug.SetMemoryLimit(math.MaxInt64)
			debug.SetGCPercent(max(gogc, runGOGC))
		})
	}
}
