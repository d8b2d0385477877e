package launcher

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"rtrace/internal/uftrace"
	"rtrace/tracer"
)

// startStatus shows a status line (events, events/s, bytes) on stderr a few
// times a second while tracing, when stderr is a terminal and -q is not set.
// It returns a function that stops it and clears the line.
func startStatus(o RecordOptions, tr *tracer.Tracer) func() {
	f, ok := o.Stderr.(*os.File)
	if o.Quiet || !ok || !isTerminal(f) {
		return func() {}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		start := time.Now()
		for {
			select {
			case <-stop:
				fmt.Fprint(f, "\r\033[K")
				return
			case <-tick.C:
				n := tr.Events()
				rate := float64(n) / time.Since(start).Seconds()
				// Each event is one 16-byte record in the trace.
				fmt.Fprintf(f, "\r\033[Krtrace: %d events, %.0f events/s, %s", n, rate, human(int64(n)*uftrace.RecordSize))
			}
		}
	}()
	return func() { close(stop); <-done }
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func human(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}
