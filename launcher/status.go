package launcher

import (
	"fmt"
	"time"

	"rtrace/internal/tty"
	"rtrace/internal/uftrace"
)

// startStatus shows a live status line (records, records/s, bytes) a few
// times a second while tracing, when stderr is a terminal, -q is not set,
// and the traced program does not write to that terminal. A program that
// shares it would have its output erased by the line's redraw, or joined
// to the line: `rtrace record` starts the program with rtrace's own
// stderr, so it never shows one (the summary at the end says it all); an
// attached process usually has its own terminal or none. It returns a
// function that stops the line and clears it.
func (s *session) startStatus() func() {
	dev, ok := tty.Device(s.c.Stderr)
	if s.c.Quiet || s.c.Pid == 0 || !ok || tty.WritesTo(s.c.Pid, dev) {
		return func() {}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				s.con.Clear()
				return
			case <-tick.C:
				n := s.tr.Events()
				rate := float64(n) / time.Since(s.start).Seconds()
				// Each event is one 16-byte record in the trace.
				s.con.Show(fmt.Sprintf("rtrace: %d records, %.0f records/s, %s", n, rate, human(int64(n)*uftrace.RecordSize)))
			}
		}
	}()
	return func() { close(stop); <-done }
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
