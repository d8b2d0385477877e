package launcher

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rtrace/tracer/fast"
)

func TestWindowDir(t *testing.T) {
	base := filepath.Join(t.TempDir(), "out.data")
	for _, want := range []string{base, base + ".1", base + ".2"} {
		got, err := windowDir(base)
		if err != nil || got != want {
			t.Fatalf("windowDir = %q, %v; want %q", got, err, want)
		}
	}
	// A free name below a taken one is used: nothing is overwritten.
	os.Remove(base + ".1")
	if got, _ := windowDir(base); got != base+".1" {
		t.Errorf("windowDir = %q, want %q", got, base+".1")
	}
}

func TestCheckRunnable(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		path string
		want string // "" for runnable
	}{
		{write("script", "#!/bin/sh -e\necho hi\n", 0o755), "a script for /bin/sh -e"},
		{write("empty", "", 0o755), "empty file"},
		{write("noexec", "\x7fELF", 0o644), "permission denied"},
		{dir, "is a directory"},
		{write("elf", "\x7fELF....", 0o755), ""},
	} {
		err := checkRunnable("P", c.path)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.path, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || exitCode(err) != 126):
			t.Errorf("%s: %v (exit %d), want %q and 126", c.path, err, exitCode(err), c.want)
		}
	}
}

func TestStatusField(t *testing.T) {
	st := []byte("Name:\tx\nTgid:\t42\nPid:\t43\nTracerPid:\t7\n")
	if tracerPid(st) != 7 || statusField(st, "Tgid:") != 42 || statusField(st, "Nope:") != 0 {
		t.Errorf("fields of %q", st)
	}
}

func FuzzStatusField(f *testing.F) {
	f.Add([]byte("TracerPid:\t12\n"), "TracerPid:")
	f.Add([]byte("TracerPid:"), "TracerPid:")
	f.Fuzz(func(t *testing.T, status []byte, key string) { statusField(status, key) })
}

func TestChooseEngine(t *testing.T) {
	fastHere := "fast"
	if fast.CheckTSC() != nil {
		fastHere = "int3" // the default falls back; the test still checks the rest
	}
	for _, c := range []struct {
		engine, def string
		notFast     []string
		want, err   string
	}{
		{"", "", nil, fastHere, ""},
		{"", "fast", nil, fastHere, ""},
		{"", "int3", nil, "int3", ""},
		{"int3", "fast", nil, "int3", ""},
		{"", "", []string{"-e"}, "int3", ""},
		{"fast", "", []string{"-e"}, "", "--engine=fast does not support -e"},
		{"", "bogus", nil, "", `$RTRACE_ENGINE "bogus"`},
		{"bogus", "int3", nil, "", `--engine "bogus"`},
	} {
		got, err := chooseEngine(Options{Engine: c.engine, DefaultEngine: c.def}, c.notFast)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("--engine %q, $RTRACE_ENGINE %q, not fast %v: error %v, want %q", c.engine, c.def, c.notFast, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("--engine %q, $RTRACE_ENGINE %q, not fast %v: %q, %v; want %q", c.engine, c.def, c.notFast, got, err, c.want)
		}
	}
}
