package launcher

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"rtrace/internal/uftrace"
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

// startStatus shows a live status line (records, records/s, bytes) a few
// times a second while tracing, when stderr is a terminal, -q is not set,
// and the traced program does not write to that terminal. A program that
// shares it would have its output erased by the line's redraw, or joined
// to the line: `rtrace record` starts the program with rtrace's own
// stderr, so it never shows one (the summary at the end says it all); an
// attached process usually has its own terminal or none. It returns a
// function that stops the line and clears it.
func (s *session) startStatus() func() {
	f, ok := s.c.Stderr.(*os.File)
	if s.c.Quiet || s.c.Pid == 0 || !ok || !term.IsTerminal(int(f.Fd())) {
		return func() {}
	}
	var tty unix.Stat_t
	if unix.Fstat(int(f.Fd()), &tty) != nil || sharesTerminal(s.c.Pid, tty.Rdev) {
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
				s.con.mu.Lock()
				s.con.clear()
				s.con.mu.Unlock()
				return
			case <-tick.C:
				n := s.tr.Events()
				rate := float64(n) / time.Since(s.start).Seconds()
				// Each event is one 16-byte record in the trace.
				s.con.status(fmt.Sprintf("rtrace: %d records, %.0f records/s, %s", n, rate, human(int64(n)*uftrace.RecordSize)))
			}
		}
	}()
	return func() { close(stop); <-done }
}

// sharesTerminal says whether process pid has its standard output or
// error on the terminal device dev.
func sharesTerminal(pid int, dev uint64) bool {
	for _, fd := range []int{1, 2} {
		var st unix.Stat_t
		if unix.Stat(fmt.Sprintf("/proc/%d/fd/%d", pid, fd), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == dev {
			return true
		}
	}
	return false
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
