package e2e_test

import (
	"bufio"
	"io"
	"strings"
	"sync"
)

// lineLog collects what a process writes to a pipe, line by line, and
// lets a test wait for a line: synchronisation on what the process says,
// never on time.
type lineLog struct {
	mu    sync.Mutex
	text  strings.Builder
	lines chan string // every line, in order; closed at the end
	done  chan struct{}
}

// newLineLog starts reading r.
func newLineLog(r io.Reader) *lineLog {
	l := &lineLog{lines: make(chan string, 1<<16), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			l.mu.Lock()
			l.text.WriteString(sc.Text() + "\n")
			l.mu.Unlock()
			l.lines <- sc.Text()
		}
		close(l.lines)
		close(l.done)
	}()
	return l
}

// waitFor blocks until a line holding substr arrives and returns it; ""
// when the writer closed the pipe first.
func (l *lineLog) waitFor(substr string) string {
	for line := range l.lines {
		if strings.Contains(line, substr) {
			return line
		}
	}
	return ""
}

// String is everything read so far.
func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.text.String()
}

// drain waits until the writer closed the pipe and every line is read:
// exec.Cmd.Wait closes the pipe, so a test reads to the end before it
// waits, or loses the last lines (those that say what went wrong).
func (l *lineLog) drain() { <-l.done }
