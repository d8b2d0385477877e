// Package timeline prints when rtrace reaches each phase of a run, for
// finding where a short run's time goes (RTRACE_TIMELINE=1): the CPU
// profile cannot show waiting, and a 20 ms run gives it two samples.
package timeline

import (
	"fmt"
	"os"
	"sync"
	"time"
)

var (
	on    = os.Getenv("RTRACE_TIMELINE") != ""
	start = time.Now()
	mu    sync.Mutex
)

// Mark prints the time since rtrace started and what it has just done.
func Mark(format string, args ...any) {
	if !on {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	fmt.Fprintf(os.Stderr, "rtrace: %8.3f ms  %s\n", float64(time.Since(start).Microseconds())/1000, fmt.Sprintf(format, args...))
}
