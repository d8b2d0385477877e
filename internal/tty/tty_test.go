package tty

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"rtrace/internal/testutil"
)

// On a pseudo-terminal the line is drawn, cut to the width, and erased
// before other output; elsewhere it is never drawn.
func TestLine(t *testing.T) {
	m, s := testutil.OpenPty(t)
	defer m.Close()
	defer s.Close()
	if err := unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 10}); err != nil {
		t.Fatal(err)
	}
	if !IsTerminal(s) || Width(s) != 10 {
		t.Fatalf("pty: IsTerminal %v, Width %d; want true, 10", IsTerminal(s), Width(s))
	}
	if _, ok := Device(s); !ok {
		t.Error("Device: no device for a pty")
	}
	var buf bytes.Buffer
	l := NewLine(s)
	l.Show("0123456789abc")
	l.Write([]byte("warning\n"))
	l.Clear() // nothing shown: writes nothing
	l.Show("x")
	l.Clear()
	s.Close()
	got := readAll(t, m)
	want := "\r\x1b[K012345678\r\x1b[Kwarning\r\n\r\x1b[Kx\r\x1b[K"
	if got != want {
		t.Errorf("terminal got %q, want %q", got, want)
	}

	l = NewLine(&buf)
	l.Show("status")
	l.Write([]byte("warning\n"))
	l.Clear()
	if buf.String() != "warning\n" || l.Terminal() || IsTerminal(&buf) || Width(&buf) != 0 {
		t.Errorf("not a terminal: wrote %q, Terminal %v", buf.String(), l.Terminal())
	}
}

func readAll(t *testing.T, m *os.File) string {
	var sb strings.Builder
	b := make([]byte, 4096)
	for {
		n, err := m.Read(b)
		sb.Write(b[:n])
		if err != nil { // EIO once the slave is closed
			return sb.String()
		}
	}
}
