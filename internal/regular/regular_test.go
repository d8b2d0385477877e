package regular

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A FIFO with no writer: Open, ReadFile and Check say what it is at once
// (a plain open would block forever); a regular file reads whole.
func TestFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "p")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(string) error{
		"Open":     func(p string) error { f, err := Open(p); f.Close(); return err },
		"ReadFile": func(p string) error { _, err := ReadFile(p); return err },
		"Check":    Check,
	} {
		err := f(fifo)
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), fifo) || !strings.Contains(err.Error(), "FIFO") {
			t.Errorf("%s(fifo) = %v, want an error naming it a FIFO", name, err)
		}
		if err := f(dir); !errors.Is(err, ErrNotRegular) {
			t.Errorf("%s(dir) = %v, want ErrNotRegular", name, err)
		}
		if err := f(filepath.Join(dir, "none")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s(missing) = %v, want ErrNotExist", name, err)
		}
	}
	reg := filepath.Join(dir, "r")
	os.WriteFile(reg, []byte("hello"), 0o600)
	os.Symlink(reg, filepath.Join(dir, "l"))
	for _, p := range []string{reg, filepath.Join(dir, "l")} {
		if b, err := ReadFile(p); err != nil || string(b) != "hello" {
			t.Errorf("ReadFile(%s) = %q, %v", p, b, err)
		}
		if err := Check(p); err != nil {
			t.Errorf("Check(%s) = %v", p, err)
		}
	}
}
