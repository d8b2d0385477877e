package suite

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A run measures the command's time and fails with the command.
func TestRun(t *testing.T) {
	s, err := Run(Cmd{Argv: []string{"dd", "if=/dev/zero", "of=/dev/null", "bs=1M", "count=200"}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Wall <= 0 || s.CPU <= 0 {
		t.Errorf("sample %+v: want its time", s)
	}
	if _, err := Run(Cmd{Argv: []string{"false"}}); err == nil {
		t.Error("a failing command measured without error")
	}
}

// The tree of a process holds its children.
func TestProcessTree(t *testing.T) {
	if got := tree(os.Getpid()); len(got) < 1 || got[0] != os.Getpid() {
		t.Errorf("tree of self: %v", got)
	}
}

func TestSummarise(t *testing.T) {
	ms := time.Millisecond
	s := Summarise([]Sample{{Wall: 5 * ms, RSS: 10}, {Wall: 1 * ms, RSS: 30}, {Wall: 3 * ms, RSS: 20}, {Wall: 9 * ms, RSS: 40}})
	if s.Wall != 4*ms || s.WallMin != ms || s.WallMax != 9*ms || s.RSS != 25 || s.Runs != 4 {
		t.Errorf("got %+v", s)
	}
}

// A run over its time limit is stopped, with its children: here a child
// that blocks for ever, opening a FIFO no one writes.
func TestRunTimeout(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Run(Cmd{Argv: []string{"sh", "-c", "read x < " + fifo + " & wait"}, Timeout: 50 * time.Millisecond})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("got %v, want ErrTimeout", err)
	}
}
