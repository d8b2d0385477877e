package e2e_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"rtrace/internal/testutil"
)

// TestPipelineStreamEqualsInProcess: one recording, written twice. The
// in-process hand-off (tracer → preproc → postproc → resolver → writer,
// batches passed as they are) writes -d A; the pre-processor also stores
// the stream (-o raw), which `rtrace preproc -d B` later runs through the
// same stages decoded from the wire. uftrace shows both the same, record
// for record and nanosecond for nanosecond: the stream carries everything
// (sessions, forks, threads, names, payloads, the filters).
func TestPipelineStreamEqualsInProcess(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	for _, c := range []struct {
		name, src string
		opts      []string
		args      []string
	}{
		{"fib", "fib.c", []string{"--srcline"}, []string{"7"}},
		{"filters", "fib.c", []string{"-F", "fib", "-D", "3", "-t", "100ns"}, []string{"7"}},
		{"args", "args.c", argSpecs, nil},
		{"threads", "threads.c", nil, nil},
		{"fork", "fork.c", []string{"-N", "leaf"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			prog := testutil.BuildC(t, c.src, "-O0", "-g")
			tmp := t.TempDir()
			args := append(append(append([]string{"record", "-q", "-d", "A", "-o", "raw"}, c.opts...), "--", prog), c.args...)
			if r := runCmd(t, tmp, rtraceBin, args...); r.code != 0 {
				t.Fatalf("record: %+v", r)
			}
			raws, _ := filepath.Glob(filepath.Join(tmp, "raw", "*.rtrace"))
			if len(raws) != 1 {
				t.Fatalf("raw streams %v, want one", raws)
			}
			if r := runCmd(t, tmp, rtraceBin, "preproc", "-i", raws[0], "-d", "B"); r.code != 0 {
				t.Fatalf("preproc: %+v", r)
			}
			for _, view := range [][]string{
				{"replay", "-f", "+tid,addr"}, {"report", "-s", "call,total"}, {"replay", "--srcline"},
				{"graph"}, {"info"},
			} {
				a := testutil.Run(t, tmp, uft, append([]string{view[0], "--no-pager", "-d", "A"}, view[1:]...)...)
				b := testutil.Run(t, tmp, uft, append([]string{view[0], "--no-pager", "-d", "B"}, view[1:]...)...)
				if view[0] == "info" {
					// The directory's own name, the machine's memory and
					// load at the time each was written.
					norm := regexp.MustCompile(`(?m)^(# (data directory|memory info|system load) *: ).*$`)
					a, b = norm.ReplaceAllString(a, "$1"), norm.ReplaceAllString(b, "$1")
				}
				if a != b {
					t.Errorf("uftrace %v differs:\nin process:\n%s\nthrough the stream:\n%s", view, a, b)
				}
				if view[0] == "replay" && strings.Count(a, "\n") < 3 {
					t.Errorf("uftrace %v shows almost nothing:\n%s", view, a)
				}
			}
		})
	}
}

// stepper drives a program of the attachee kind: it reads "N" lines on
// stdin and prints one line per step.
type stepper struct {
	t   *testing.T
	cmd *exec.Cmd
	in  io.WriteCloser
	out *lineLog
	n   int // steps run
}

// startStepped runs rtrace with args in dir (env added to the
// environment when not nil) on a stepper fixture (attachee.c), whose
// steps it returns with rtrace's stderr, once the program said its pid
// (0: it said none). rtrace is killed at the end of the test.
func startStepped(t *testing.T, dir string, env []string, args ...string) (*stepper, *lineLog, int) {
	t.Helper()
	cmd := exec.Command(rtraceBin, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	in, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	s := &stepper{t: t, cmd: cmd, in: in, out: newLineLog(stdout)}
	errs := newLineLog(stderr)
	pid, _ := strconv.Atoi(strings.TrimPrefix(s.out.waitFor("pid "), "pid "))
	return s, errs, pid
}

// steps runs n more steps and waits until the program printed them.
func (s *stepper) steps(n int) {
	s.t.Helper()
	if _, err := io.WriteString(s.in, strconv.Itoa(n)+"\n"); err != nil {
		s.t.Fatal(err)
	}
	for range n {
		line := s.out.waitFor(" ")
		if !strings.HasPrefix(line, strconv.Itoa(s.n)+" ") {
			s.t.Fatalf("step %d printed %q\n%s", s.n, line, s.out.String())
		}
		s.n++
	}
}

// stepIndexes lists the step(N) calls uftrace replays from dir, in order.
func stepIndexes(t *testing.T, dir string) []int {
	t.Helper()
	out := testutil.Run(t, "", testutil.RequireTool(t, "uftrace"), "replay", "--no-pager", "-f", "none", "-d", dir)
	var got []int
	for _, m := range regexp.MustCompile(`step\((\d+)\)`).FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[1])
		got = append(got, n)
	}
	return got
}

// span is the steps from lo up to hi, excluded.
func span(lo, hi int) []int {
	var s []int
	for i := lo; i < hi; i++ {
		s = append(s, i)
	}
	return s
}

// TestToggleFunctions: a program started with --disable runs untraced;
// `rtrace toggle` (given rtrace's pid the first time, the program's the
// second) opens a window and a second toggle closes it. Each window is its
// own uftrace.data directory holding exactly the steps run inside it: the
// test runs the steps itself, between the toggles.
func TestToggleFunctions(t *testing.T) {
	prog := testutil.BuildC(t, "attachee.c", "-O0", "-g")
	tmp := t.TempDir()
	s, errs, pid := startStepped(t, tmp, nil, "record", "--disable", "-A", "step@arg1/i32", "-d", "W", "--", prog)
	rec, in := s.cmd, s.in
	// rtrace says which pid to toggle, as tracing starts off.
	if line := errs.waitFor("tracing pid"); !strings.Contains(line, "tracing pid "+strconv.Itoa(pid)+" (off)") {
		t.Fatalf("rtrace did not announce pid %d: %q", pid, line)
	}
	window := func(who int, n int) {
		t.Helper()
		listener := exec.Command(rtraceBin, "toggle", strconv.Itoa(who))
		listener.Dir = tmp
		lerr, _ := listener.StderrPipe()
		if err := listener.Start(); err != nil {
			t.Fatal(err)
		}
		ll := newLineLog(lerr)
		if ll.waitFor("turned on") == "" {
			t.Fatalf("the listener ended without turning tracing on:\n%s", ll.String())
		}
		s.steps(n)
		if r := runCmd(t, tmp, rtraceBin, "toggle", strconv.Itoa(pid)); r.code != 0 || !strings.Contains(r.stderr, "turned off") {
			t.Fatalf("toggle off: %+v", r)
		}
		if ll.waitFor("trace written to") == "" {
			t.Errorf("the listener did not say where the window went:\n%s", ll.String())
		}
		if err := listener.Wait(); err != nil {
			t.Fatalf("listener: %v\n%s", err, ll.String())
		}
	}
	s.steps(3)
	window(rec.Process.Pid, 5) // steps 3..7, toggled through rtrace's pid
	s.steps(2)
	window(pid, 4) // steps 10..13
	s.steps(1)
	in.Close()
	s.out.drain()
	errs.drain()
	if err := rec.Wait(); err != nil {
		t.Fatalf("record: %v\n%s", err, errs.String())
	}
	for _, w := range []struct {
		dir  string
		want []int
	}{{"W", span(3, 8)}, {"W.1", span(10, 14)}} {
		if got := stepIndexes(t, filepath.Join(tmp, w.dir)); !slices.Equal(got, w.want) {
			t.Errorf("%s holds steps %v, want %v", w.dir, got, w.want)
		}
	}
	if _, err := os.Stat(filepath.Join(tmp, "W.2")); err == nil {
		t.Error("a third window directory was written")
	}
}

// A pattern that matches no traced function gets a warning naming it;
// tracing that was never turned on says so at the end.
func TestRecordWarnings(t *testing.T) {
	prog := testutil.BuildC(t, "fib.c", "-O0")
	tmp := t.TempDir()
	r := runCmd(t, tmp, rtraceBin, "record", "-d", "R", "-F", "fib", "-F", "fbi", "-N", "nosuch", "-A", "fib@arg1", "-R", "^zz@retval", "--", prog, "3")
	if r.code != 0 {
		t.Fatalf("record: %+v", r)
	}
	for _, w := range []string{`-F "fbi" matches no traced function`, `-N "nosuch" matches no traced function`, `-R "^zz" matches no traced function`} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("no warning %q in:\n%s", w, r.stderr)
		}
	}
	if strings.Contains(r.stderr, `"fib" matches no`) {
		t.Errorf("a warning for a pattern that matched:\n%s", r.stderr)
	}
	for _, c := range []struct {
		args []string
		why  string
	}{
		{[]string{"sp-rtrace", "-e", "memory", "-o", "D"}, "no --start, no toggle"},
		{[]string{"record", "--disable", "-d", "W"}, "started with --disable, no toggle"},
	} {
		args := c.args
		r := runCmd(t, tmp, rtraceBin, append(slices.Clip(args), "--", prog, "3")...)
		if r.code != 0 || !strings.Contains(r.stderr, "; nothing saved: tracing was never turned on ("+c.why+")\n") {
			t.Errorf("record %v: %+v", args, r)
		}
		if ents, _ := os.ReadDir(filepath.Join(tmp, args[len(args)-1])); len(ents) > 0 {
			t.Errorf("record %v wrote %v", args, ents)
		}
	}
}
