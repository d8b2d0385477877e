// Package tty is rtrace's one view of a terminal: whether a writer is
// one, which device it is, and a transient line (the live status line,
// the batch progress bar) that other output never mixes with.
package tty

import (
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// file returns the open file behind w, when there is one.
func file(w io.Writer) (*os.File, bool) {
	f, ok := w.(*os.File)
	return f, ok && f != nil
}

// IsTerminal says whether w writes to a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := file(w)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Width is the number of columns of the terminal w writes to, 0 when w
// is not a terminal or does not say.
func Width(w io.Writer) int {
	f, ok := file(w)
	if !ok {
		return 0
	}
	cols, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return cols
}

// Device is the device number of the terminal w writes to.
func Device(w io.Writer) (uint64, bool) {
	f, ok := file(w)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return 0, false
	}
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return 0, false
	}
	return st.Rdev, true
}

// Background says whether the calling process is in the background of
// the terminal w writes to (started with `&` from a shell): tcgetpgrp(3)
// names another process group.
func Background(w io.Writer) bool {
	f, ok := file(w)
	if !ok {
		return false
	}
	fg, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
	return err == nil && fg != unix.Getpgrp()
}

// WritesTo says whether process pid has its standard output or error on
// the terminal device dev (from /proc/PID/fd, see proc(5)).
func WritesTo(pid int, dev uint64) bool {
	for _, fd := range []int{1, 2} {
		var st unix.Stat_t
		if unix.Stat(fmt.Sprintf("/proc/%d/fd/%d", pid, fd), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == dev {
			return true
		}
	}
	return false
}

// clearLine returns the cursor to the start of the line and erases it
// (carriage return, then ECMA-48 EL "erase in line").
const clearLine = "\r\033[K"

// Line is a writer whose last line may be transient: Show draws it, and
// anything written through Write first erases it, so the two never share
// a line. On a writer that is not a terminal Show does nothing. Its
// methods are safe for concurrent use.
type Line struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	width int
	shown bool
}

// NewLine wraps w.
func NewLine(w io.Writer) *Line {
	return &Line{w: w, tty: IsTerminal(w), width: Width(w)}
}

// Terminal says whether Show draws anything.
func (l *Line) Terminal() bool { return l.tty }

// Write erases the transient line, then writes p.
func (l *Line) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clear()
	return l.w.Write(p)
}

// Show replaces the transient line with s, cut to the terminal's width
// so that it never wraps (a wrapped line cannot be erased in place).
func (l *Line) Show(s string) {
	if !l.tty {
		return
	}
	if l.width > 1 && len(s) >= l.width {
		s = s[:l.width-1]
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprint(l.w, clearLine+s)
	l.shown = true
}

// Clear erases the transient line.
func (l *Line) Clear() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clear()
}

func (l *Line) clear() {
	if l.shown {
		fmt.Fprint(l.w, clearLine)
		l.shown = false
	}
}
