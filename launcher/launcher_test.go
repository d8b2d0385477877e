package launcher

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"rtrace/internal/uftrace"
	"rtrace/tracer"
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
		{write("script", "#!/bin/sh -e\necho hi\n", 0o755), ""},
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
		{"", "", []string{"-W cpu on a CPU without rdtscp"}, "int3", ""},
		{"fast", "", []string{"-W cpu on a CPU without rdtscp"}, "", "--engine=fast does not support -W cpu on a CPU without rdtscp"},
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

// A script's interpreters are what the kernel runs (#! line) and what
// #!/usr/bin/env runs, found in PATH; a missing one is refused with exit
// 126, and a program without #! has none.
func TestInterpreters(t *testing.T) {
	dir := t.TempDir()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh in PATH")
	}
	for _, c := range []struct {
		text string
		want []string
		err  string
	}{
		{"#!/bin/sh -e\necho hi\n", []string{"/bin/sh"}, ""},
		{"#! /bin/sh\n", []string{"/bin/sh"}, ""},
		{"#!/usr/bin/env sh\n", []string{"/usr/bin/env", sh}, ""},
		{"#!/usr/bin/env -S sh -e\n", []string{"/usr/bin/env"}, ""},
		{"#!/nonexistent/sh\n", nil, "its interpreter /nonexistent/sh: no such file or directory"},
		{"#!\n", nil, "names no interpreter"},
		{"\x7fELF", nil, ""},
	} {
		p := filepath.Join(dir, "s")
		if err := os.WriteFile(p, []byte(c.text), 0o755); err != nil {
			t.Fatal(err)
		}
		got, err := interpreters("s", p)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%q: %v", c.text, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || exitCode(err) != 126):
			t.Errorf("%q: %v (exit %d), want %q and 126", c.text, err, exitCode(err), c.err)
		case strings.Join(got, " ") != strings.Join(c.want, " "):
			t.Errorf("%q: %q, want %q", c.text, got, c.want)
		}
	}
}

func TestSignalTriggers(t *testing.T) {
	got, err := signalTriggers([]string{"SIGUSR1@trace_off", "usr2@Trace-On", "12@trace_on,finish", "SIGINT@traceoff,traceon", "SIGHUP@finish", "HUP@trace_on"})
	if err != nil {
		t.Fatal(err)
	}
	// Within one trigger finish beats trace_off beats trace_on; a later
	// trigger of a signal replaces an earlier one.
	want := map[unix.Signal]tracer.SignalAction{unix.SIGUSR1: tracer.TraceOff, unix.SIGUSR2: tracer.Finish, unix.SIGINT: tracer.TraceOff, unix.SIGHUP: tracer.TraceOn}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"SIGUSR1", "SIGUSR1@", "SIGNOPE@finish", "SIGKILL@finish", "SIGUSR1@depth=1"} {
		if _, err := signalTriggers([]string{bad}); err == nil || exitCode(err) != 2 {
			t.Errorf("%q: %v (exit %d), want a usage error", bad, err, exitCode(err))
		}
	}
}

// -T actions go where rtrace applies them: recover has nothing to do (the
// callers' return addresses are the real ones), what rtrace cannot do yet
// is refused.
func TestTriggerActions(t *testing.T) {
	var rec trigRecord
	tr, err := trigger("a@depth=2,recover,arg1/s,read=page-fault", "", &rec)
	if err != nil || tr == nil || !tr.HasDepth || tr.Recover || len(rec.args) != 1 {
		t.Errorf("a@depth=2,recover,arg1/s: %+v %+v %v", tr, rec, err)
	}
	if tr, err := trigger("b@recover,read=proc/statm", "", &rec); err != nil || tr != nil {
		t.Errorf("b@recover: %+v %v", tr, err)
	}
	c := &config{readTrigs: rec.reads}
	if r := c.reads(); r == nil || r("a") != uftrace.ReadPageFault || r("b") != uftrace.ReadProcStatm || r("c") != 0 {
		t.Errorf("read= triggers: %+v", rec.reads)
	}
	for _, bad := range []string{"a@read=pmu-cycle", "a@read=nothing", "a@kernel", "a@libc.so.6,read=page-fault"} {
		if _, err := trigger(bad, "", &trigRecord{}); err == nil || exitCode(err) != 2 {
			t.Errorf("-T %s: %v, want a usage error", bad, err)
		}
	}
}

// TestMarksClearStale: a state file left for a pid by an rtrace that was
// killed is removed when a new target gets that pid, but not while a
// window of this rtrace's is open (the file is its own then).
func TestMarksClearStale(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	if err := privateDir(FIFODir()); err != nil {
		t.Fatal(err)
	}
	const pid = 4242
	for _, f := range []string{StatePath(pid), TargetPath(pid)} {
		if err := os.WriteFile(f, []byte("1\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var m marks
	// Attached: pid may be a live rtrace, whose target file stays.
	m.clearStale(pid, false)
	if _, err := os.Stat(TargetPath(pid)); err != nil {
		t.Fatalf("an attached pid's %s was removed: %v", TargetPath(pid), err)
	}
	m.clearStale(pid, true)
	for _, f := range []string{StatePath(pid), TargetPath(pid)} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Fatalf("the stale %s is still there (%v)", f, err)
		}
	}
	m.on(pid)
	m.clearStale(pid, true)
	if _, err := os.Stat(StatePath(pid)); err != nil {
		t.Fatalf("an open window's %s was removed: %v", StatePath(pid), err)
	}
	m.off()
	if _, err := os.Stat(StatePath(pid)); !os.IsNotExist(err) {
		t.Fatalf("%s outlived its window (%v)", StatePath(pid), err)
	}
}
