package launcher

import (
	"math"
	"runtime/debug"
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
	ready := startupGC()
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
}
