package launcher

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"rtrace/internal/uftrace"
	"rtrace/tracer"
)

// console is rtrace's stderr while tracing: messages written to it clear
// the status line first (the next tick redraws it), so the two never mix.
type console struct {
	mu    sync.Mutex
	w     io.Writer
	shown bool // a status line is on screen
}

func (c *console) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clear()
	return c.w.Write(p)
}

func (c *console) clear() {
	if c.shown {
		fmt.Fprint(c.w, "\r\033[K")
		c.shown = false
	}
}

func (c *console) status(line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprint(c.w, "\r\033[K"+line)
	c.shown = true
}

// startStatus shows a status line (events, events/s, bytes) on the console
// a few times a second while tracing, when stderr is a terminal and -q is
// not set. It returns a function that stops it and clears the line.
func startStatus(o Options, con *console, tr *tracer.Tracer) func() {
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
				con.mu.Lock()
				con.clear()
				con.mu.Unlock()
				return
			case <-tick.C:
				n := tr.Events()
				rate := float64(n) / time.Since(start).Seconds()
				// Each event is one 16-byte record in the trace.
				con.status(fmt.Sprintf("rtrace: %d events, %.0f events/s, %s", n, rate, human(int64(n)*uftrace.RecordSize)))
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
