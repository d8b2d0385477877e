package e2e_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"rtrace/internal/testutil"
)

// The faults of docs/RELIABILITY.md: whatever happens to rtrace, the
// process it traced goes on as it would have untraced.

// tightProc is a running tight.c: eight threads calling work() in a loop.
type tightProc struct {
	t   *testing.T
	cmd *exec.Cmd
	in  io.WriteCloser
	out *lineLog
	pid int
}

// startTight starts prog (tight.c built) and waits until it says its pid.
func startTight(t *testing.T, prog string) *tightProc {
	t.Helper()
	cmd := exec.Command(prog)
	in, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	p := &tightProc{t: t, cmd: cmd, in: in, out: newLineLog(stdout)}
	pid, err := strconv.Atoi(strings.TrimPrefix(p.out.waitFor("pid "), "pid "))
	if err != nil {
		t.Fatalf("the fixture did not start:\n%s", p.out.String())
	}
	p.pid = pid
	return p
}

// calls asks the program how many calls its threads made.
func (p *tightProc) calls() uint64 {
	p.t.Helper()
	if _, err := io.WriteString(p.in, "p\n"); err != nil {
		p.t.Fatal(err)
	}
	n, err := strconv.ParseUint(strings.TrimPrefix(p.out.waitFor("calls "), "calls "), 10, 64)
	if err != nil {
		p.t.Fatalf("no count of calls:\n%s", p.out.String())
	}
	return n
}

// running returns once the threads made more calls.
func (p *tightProc) running() {
	p.t.Helper()
	for first := p.calls(); p.calls() == first; {
	}
}

// finish ends the program and fails the test unless it ended as an
// untraced run does: every sum right, its code equal to its files.
func (p *tightProc) finish(what string) {
	p.t.Helper()
	p.running()
	p.in.Close()
	p.out.drain()
	if err := p.cmd.Wait(); err != nil || !strings.Contains(p.out.String(), "sums ok\ntext intact\n") {
		p.t.Errorf("%s: the program: %v\n%s", what, err, clipLines(p.out.String(), 8))
	}
}

// needAttach skips where Yama's ptrace_scope refuses rtrace an attach to
// its sibling (a capability, not the code under test).
func needAttach(t *testing.T) {
	if b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope"); err == nil && strings.TrimSpace(string(b)) != "0" && os.Geteuid() != 0 {
		testutil.RequireCapability(t, "kernel.yama.ptrace_scope = %s: attaching to a non-child needs root", strings.TrimSpace(string(b)))
	}
}

// exitCode is how cmd ended: its exit status, -1 when a signal killed it.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -2
	}
	return 0
}

// Two Ctrl-Cs back to back (as `timeout` sends, or an impatient user):
// the first asks for the detach, the second cuts the trace short, and
// rtrace still restores every byte and detaches before it exits: the
// process goes on untraced (issue 31, item 1: it used to die of SIGTRAP).
func TestAttachInterruptedTwice(t *testing.T) {
	needAttach(t)
	prog := testutil.BuildC(t, "tight.c", "-O2", "-g", "-pthread")
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			p := startTight(t, prog)
			maps := mapsOf(t, p.pid)
			for round := range 3 {
				tmp := t.TempDir()
				at := exec.Command(rtraceBin, "attach", "--engine", engine, "-d", "F", strconv.Itoa(p.pid))
				at.Dir = tmp
				stderr, _ := at.StderrPipe()
				if err := at.Start(); err != nil {
					t.Fatal(err)
				}
				errs := newLineLog(stderr)
				errs.waitFor("attached to pid")
				p.running()
				at.Process.Signal(syscall.SIGINT)
				at.Process.Signal(syscall.SIGINT)
				errs.drain()
				err := at.Wait()
				if code := exitCode(err); code != 130 && code != 0 {
					t.Errorf("round %d: rtrace attach ended with %v, want 130 (or 0: the detach was done before the second)\n%s", round, err, errs.String())
				}
				if exitCode(err) == 130 && !strings.Contains(errs.String(), "detached, its code restored") {
					t.Errorf("round %d: an abort that does not say the process was restored:\n%s", round, errs.String())
				}
				if strings.Contains(errs.String(), "panic") {
					t.Fatalf("round %d: rtrace panicked:\n%s", round, errs.String())
				}
				if after := mapsOf(t, p.pid); after != maps {
					t.Fatalf("round %d: the maps after the abort differ from before the attach:\nbefore:\n%s\nafter:\n%s\nrtrace said:\n%s", round, maps, after, errs.String())
				}
			}
			p.finish("after three aborted attaches")
		})
	}
}

// runGuarded runs rtrace with args in dir, stdin from in, and fails the
// test when it has not ended after hangGuard: what it guards against is a
// hang (a read of a FIFO with no writer), not a slow run (these take
// milliseconds).
func runGuarded(t *testing.T, dir string, in io.Reader, args ...string) run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, rtraceBin, args...)
	cmd.Dir, cmd.Stdin = dir, in
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("rtrace %v hung (killed after %v)\n%s", args, hangGuard, se.String())
	}
	return run{so.String(), se.String(), exitCode(err)}
}

const hangGuard = 2 * time.Minute

// A trace that names a FIFO where a file is expected (a module's path, a
// uftrace directory's .dat) is reported and skipped: resolve and postproc
// never open it for reading, which would wait for a writer forever
// (issue 31, item 8).
func TestTraceNamesFIFO(t *testing.T) {
	prog := testutil.BuildC(t, "leaky.c", "-O0", "-g")
	tmp := t.TempDir()
	raw, _ := recordLeaky(t, tmp, prog)
	fifo := filepath.Join(tmp, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// The leak report, its module the FIFO.
	text := runGuarded(t, tmp, nil, "postproc", "-l", "-c", "-i", raw)
	if text.code != 0 || !strings.Contains(text.stdout, prog) {
		t.Fatalf("postproc: exit %d, the report does not name %s\n%s", text.code, prog, text.stderr)
	}
	named := strings.ReplaceAll(text.stdout, prog, fifo)
	r := runGuarded(t, tmp, strings.NewReader(named), "resolve")
	if r.code != 0 || !strings.Contains(r.stdout, fifo) {
		t.Errorf("resolve of a report naming a FIFO: exit %d\n%s", r.code, r.stderr)
	}
	r = runGuarded(t, tmp, strings.NewReader(named), "postproc", "-r")
	if r.code != 0 {
		t.Errorf("postproc -r of a report naming a FIFO: exit %d\n%s", r.code, r.stderr)
	}

	// A uftrace directory whose task's .dat is a FIFO.
	slow := testutil.BuildC(t, "slow.c", "-O0", "-g")
	if r := runCmd(t, tmp, rtraceBin, "record", "-d", "full", "--", slow); r.code != 0 {
		t.Fatalf("record: exit %d\n%s", r.code, r.stderr)
	}
	dats, _ := filepath.Glob(filepath.Join(tmp, "full", "*.dat"))
	if len(dats) == 0 {
		t.Fatal("record wrote no .dat file")
	}
	os.Remove(dats[0])
	if err := unix.Mkfifo(dats[0], 0o600); err != nil {
		t.Fatal(err)
	}
	r = runGuarded(t, tmp, nil, "resolve", "-i", "full", "-o", "copy")
	if r.code == 0 || !strings.Contains(r.stderr, filepath.Base(dats[0])) || !strings.Contains(r.stderr, "FIFO") {
		t.Errorf("resolve of a directory whose %s is a FIFO: exit %d, want an error naming it\n%s", filepath.Base(dats[0]), r.code, r.stderr)
	}
}

// A state file left by an rtrace that was killed (here <pid>.on, planted
// for the target's pid while a new rtrace traces it, stamped with a gone
// process) is taken for what it is: `rtrace toggle` turns tracing on, not
// "off", and removes it (issue 31, item 6).
func TestToggleStaleState(t *testing.T) {
	prog := testutil.BuildC(t, "attachee.c", "-O0", "-g")
	tmp := t.TempDir()
	s, errs, pid := startStepped(t, tmp, nil, "record", "--disable", "-d", "W", "--", prog)
	rec, in := s.cmd, s.in
	if errs.waitFor("tracing pid") == "" || pid == 0 {
		t.Fatalf("rtrace did not announce the pid:\n%s", errs.String())
	}
	// A process that is gone: its pid, and a start time it never had.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(os.TempDir(), "rtrace-"+strconv.Itoa(os.Getuid()), strconv.Itoa(pid)+".on")
	if err := os.WriteFile(stale, []byte(strconv.Itoa(gone.Process.Pid)+" 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	listener := exec.Command(rtraceBin, "toggle", strconv.Itoa(pid))
	listener.Dir = tmp
	lerr, _ := listener.StderrPipe()
	if err := listener.Start(); err != nil {
		t.Fatal(err)
	}
	ll := newLineLog(lerr)
	if line := ll.waitFor("turned"); !strings.Contains(line, "turned on") {
		t.Fatalf("toggle with a stale state file: %q, want \"turned on\"\n%s", line, ll.String())
	}
	s.steps(2)
	if r := runCmd(t, tmp, rtraceBin, "toggle", strconv.Itoa(pid)); r.code != 0 || !strings.Contains(r.stderr, "turned off") {
		t.Fatalf("toggle off: %+v", r)
	}
	ll.drain()
	if err := listener.Wait(); err != nil {
		t.Fatalf("listener: %v\n%s", err, ll.String())
	}
	in.Close()
	s.out.drain()
	errs.drain()
	if err := rec.Wait(); err != nil {
		t.Fatalf("record: %v\n%s", err, errs.String())
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("%s outlived the session (%v)", stale, err)
	}
}

// Without a usable state directory (here one another hand made with mode
// 0755), `rtrace record --disable` says at once that toggling cannot
// reach it, and `rtrace toggle` names that cause, not "without toggling"
// (issue 31, item 10).
func TestToggleNoStateDir(t *testing.T) {
	prog := testutil.BuildC(t, "attachee.c", "-O0", "-g")
	tmp := t.TempDir()
	tmpdir := filepath.Join(tmp, "tmp")
	state := filepath.Join(tmpdir, "rtrace-"+strconv.Itoa(os.Getuid()))
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(state, 0o755) // whatever the umask
	// The program runs once it said its pid: rtrace has said what it had
	// to of toggling, before it started it.
	s, errs, pid := startStepped(t, tmp, []string{"TMPDIR=" + tmpdir}, "record", "--disable", "-d", "W", "--", prog)
	rec, in := s.cmd, s.in
	tg := exec.Command(rtraceBin, "toggle", strconv.Itoa(pid))
	tg.Dir, tg.Env = tmp, append(os.Environ(), "TMPDIR="+tmpdir)
	out, err := tg.CombinedOutput()
	if err == nil || !strings.Contains(string(out), state) || strings.Contains(string(out), "without toggling") {
		t.Errorf("toggle: %v\n%s\nwant an error naming %s", err, out, state)
	}
	in.Close()
	s.out.drain()
	errs.drain()
	rec.Wait()
	if !strings.Contains(errs.String(), "warning: 'rtrace toggle "+strconv.Itoa(pid)+"' cannot reach") || !strings.Contains(errs.String(), state) {
		t.Errorf("record --disable with an unusable %s said no warning naming it:\n%s", state, errs.String())
	}
}

// killRounds is how many SIGKILLs TestAttachKilled deals each mode:
// RTRACE_KILL_ROUNDS (make stress: 50), else 3.
func killRounds() int {
	if n, err := strconv.Atoi(os.Getenv("RTRACE_KILL_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 3
}

// tracerOf is the pid of the tracer process that the `rtrace attach`
// command sup started (its child), 0 when it has none (yet, or any more).
func tracerOf(sup int) int {
	if kids := childPids(sup); len(kids) > 0 {
		n, _ := strconv.Atoi(kids[0])
		return n
	}
	return 0
}

// SIGKILL of `rtrace attach` during a busy four-thread process's run, at
// a moment that moves from round to round: at once (rtrace still setting
// up, the tracer maybe not started), once the tracer process runs (setting
// up, attaching), once it has attached, and after 1 to 3 of the program's
// reports. Two ways (issue 31, item 2: the
// process died of SIGTRAP):
//   - the command the user started (kill -9 PID): its tracer, a child
//     process, detaches as at a Ctrl-C. The process goes on, its code
//     equal to its files, with either engine;
//   - the command and its tracer at once (pkill -9 rtrace): nothing
//     detaches. The fast engine's code stays in the process and runs
//     without recording (docs/RELIABILITY.md); its results stay right.
//     The int3 engine's process dies: not tested.
func TestAttachKilled(t *testing.T) {
	needAttach(t)
	prog := testutil.BuildC(t, "tight.c", "-O2", "-g", "-pthread")
	for _, c := range []struct {
		name, engine string
		args         []string
		tracer       bool // the tracer is killed too
	}{
		{"command/fast/functions", "fast", []string{"-d", "F", "-t", "1ms"}, false}, // -t: the trace stays small
		{"command/fast/memory", "fast", []string{"-e", "memory", "-o", "D"}, false},
		{"command/int3/functions", "int3", []string{"-d", "F", "-t", "1ms"}, false},
		{"command/int3/memory", "int3", []string{"-e", "memory", "-o", "D"}, false},
		{"tracer/fast/functions", "fast", []string{"-d", "F", "-t", "1ms"}, true},
		{"tracer/fast/memory", "fast", []string{"-e", "memory", "-o", "D"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			for round := range killRounds() {
				p := startTight(t, prog)
				tmp := t.TempDir()
				at := exec.Command(rtraceBin, append(append([]string{"attach", "--engine", c.engine}, c.args...), strconv.Itoa(p.pid))...)
				at.Dir = tmp
				stderr, _ := at.StderrPipe()
				if err := at.Start(); err != nil {
					t.Fatal(err)
				}
				errs := newLineLog(stderr)
				moment := round % 6
				if c.tracer {
					moment = 3 + round%3 // the tracer running in the process
				}
				switch moment {
				case 0: // at once
				case 1: // the tracer started: setting up, attaching
					waitFor(t, "the tracer process", func() bool { return tracerOf(at.Process.Pid) != 0 })
				default:
					errs.waitFor("attached to pid")
					for range moment - 2 {
						p.calls()
					}
				}
				tracer := 0
				if c.tracer {
					tracer = tracerOf(at.Process.Pid)
					if tracer == 0 {
						t.Fatalf("round %d: no tracer process under rtrace attach (pid %d)", round, at.Process.Pid)
					}
					unix.Kill(tracer, unix.SIGKILL)
				}
				at.Process.Kill()
				// Wait closes the pipe of rtrace's standard error: the
				// tracer, still detaching, writes into a pipe that no one
				// reads, which must not kill it (SIGPIPE). Then the test
				// waits for it to end: nothing runs in tmp any more.
				at.Wait()
				errs.drain()
				waitFor(t, "the tracer's end", func() bool { return !runsIn(tmp) })
				if _, err := io.WriteString(p.in, "p\n"); err != nil {
					p.out.drain()
					t.Fatalf("round %d (moment %d): the program is gone after rtrace was killed: %v\n%s\nrtrace said:\n%s", round, moment, p.cmd.Wait(), clipLines(p.out.String(), 8), errs.String())
				}
				// The kernel lets a dead tracer's tracees go once it has
				// exited, after it closed its files (the pipe).
				waitFor(t, "the program untraced", func() bool { return procStatus(t, p.pid, "TracerPid:") == "0" })
				t.Logf("round %d (moment %d): rtrace said:\n%s", round, moment, errs.String())
				p.running()
				p.in.Close()
				p.out.drain()
				// Its exit status counts wrong sums and mappings that differ
				// from their files: rtrace's code is still in it after a
				// killed tracer, and never after a detach.
				err := p.cmd.Wait()
				out := p.out.String()
				differs := strings.Count(out, "text differs: ")
				if !strings.Contains(out, "sums ok\n") || exitCode(err) != differs || !c.tracer && differs != 0 {
					t.Fatalf("round %d (moment %d): after rtrace was killed the program ended with %v:\n%s\nrtrace said:\n%s", round, moment, err, clipLines(out, 12), errs.String())
				}
			}
		})
	}
}

// runsIn reports whether a process has dir as its working directory.
func runsIn(dir string) bool {
	cwds, _ := filepath.Glob("/proc/[0-9]*/cwd")
	for _, c := range cwds {
		if d, err := os.Readlink(c); err == nil && d == dir {
			return true
		}
	}
	return false
}

// procStatus is the value of a field of /proc/PID/status.
func procStatus(t *testing.T, pid int, field string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, field)
	return ""
}

// SIGKILL of `rtrace record` kills the program it launched, at once and
// whole (PTRACE_O_EXITKILL; docs/RELIABILITY.md says why): nothing is left
// running with rtrace's code in it, or stopped (issue 31, item 3). The
// test is the orphans' subreaper (prctl(2)): the program, reparented to
// it when rtrace dies, is its to wait for, and says how it ended.
func TestRecordKilled(t *testing.T) {
	prog := testutil.BuildC(t, "tight.c", "-O2", "-g", "-pthread")
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			tmp := t.TempDir()
			rec := exec.Command(rtraceBin, "record", "--engine", engine, "-t", "1ms", "-d", "F", "--", prog)
			rec.Dir = tmp
			in, _ := rec.StdinPipe()
			stdout, _ := rec.StdoutPipe()
			if err := rec.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rec.Process.Kill(); rec.Wait() })
			p := &tightProc{t: t, cmd: rec, in: in, out: newLineLog(stdout)}
			pid, err := strconv.Atoi(strings.TrimPrefix(p.out.waitFor("pid "), "pid "))
			if err != nil {
				t.Fatalf("the program did not start:\n%s", p.out.String())
			}
			p.running()
			rec.Process.Kill()
			rec.Wait()
			// Its end of input: a program that outlived rtrace ends now,
			// after its report.
			in.Close()
			var ws unix.WaitStatus
			for {
				if _, err := unix.Wait4(pid, &ws, 0, nil); err != unix.EINTR {
					if err != nil {
						t.Fatalf("waiting for the program (pid %d): %v", pid, err)
					}
					break
				}
			}
			p.out.drain()
			if !ws.Signaled() || ws.Signal() != unix.SIGKILL {
				t.Errorf("the program ended with status %#x, want killed by SIGKILL with rtrace:\n%s", int(ws), clipLines(p.out.String(), 8))
			}
		})
	}
}

// A listening `rtrace toggle` killed while its window is open: rtrace
// notices at once (the pipe's reader is gone), closes the window and turns
// tracing off by itself, so that the next `rtrace toggle` opens a new
// window instead of taking tracing for on; the run ends with the
// program's status, no "broken pipe" error, and its last line counts the
// windows written (issue 31, item 5: the next toggle failed after 10 s,
// the run ended with exit 1, and the resource path said tracing was never
// turned on).
func TestToggleListenerKilled(t *testing.T) {
	prog := testutil.BuildC(t, "attachee.c", "-O0", "-g", "-fno-inline")
	for _, mode := range []struct {
		name             string
		record, listener []string
	}{
		{"functions", []string{"record", "--disable", "-A", "step@arg1/i32", "-d", "W"}, nil},
		{"memory", []string{"sp-rtrace", "-e", "memory", "-o", "D"}, []string{"-o", "D"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			tmp := t.TempDir()
			s, errs, pid := startStepped(t, tmp, nil, append(mode.record, "--", prog)...)
			rec, in := s.cmd, s.in
			listen := func() (*exec.Cmd, *lineLog) {
				l := exec.Command(rtraceBin, append(append([]string{"toggle"}, mode.listener...), strconv.Itoa(pid))...)
				l.Dir = tmp
				lerr, _ := l.StderrPipe()
				if err := l.Start(); err != nil {
					t.Fatal(err)
				}
				ll := newLineLog(lerr)
				if line := ll.waitFor("turned"); !strings.Contains(line, "turned on") {
					t.Fatalf("the listener did not turn tracing on: %q\n%s", line, ll.String())
				}
				return l, ll
			}
			s.steps(2)
			first, _ := listen()
			s.steps(3)
			first.Process.Kill()
			first.Wait()
			// Without the watcher this waits until a write fails, or
			// forever with no write: go test's -timeout then fails the run.
			if line := errs.waitFor("went away"); line == "" {
				t.Fatalf("rtrace did not notice the listener's death:\n%s", errs.String())
			}
			second, ll := listen()
			s.steps(4)
			if r := runCmd(t, tmp, rtraceBin, "toggle", strconv.Itoa(pid)); r.code != 0 || !strings.Contains(r.stderr, "turned off") {
				t.Fatalf("toggle off: %+v", r)
			}
			ll.drain()
			if err := second.Wait(); err != nil {
				t.Fatalf("the second listener: %v\n%s", err, ll.String())
			}
			in.Close()
			s.out.drain()
			errs.drain()
			if err := rec.Wait(); err != nil {
				t.Errorf("rtrace ended with %v, want the program's status 0:\n%s", err, errs.String())
			}
			if strings.Contains(errs.String(), "broken pipe") {
				t.Errorf("the listener's death reported as an error:\n%s", errs.String())
			}
			switch mode.name {
			case "functions":
				// The second window, the one that closed as it should: the
				// last directory (the first listener may have made W before
				// it died, or not).
				last := "W"
				if _, err := os.Stat(filepath.Join(tmp, "W.1")); err == nil {
					last = "W.1"
				}
				if got := stepIndexes(t, filepath.Join(tmp, last)); !slices.Equal(got, span(5, 9)) {
					t.Errorf("the second window (%s) holds steps %v, want %v", last, got, span(5, 9))
				}
			case "memory":
				if !strings.Contains(errs.String(), "2 windows 'rtrace toggle' wrote") {
					t.Errorf("the last line does not count the two windows:\n%s", errs.String())
				}
				// The second window's file is the last one: <pid>-1, or
				// <pid>-0 when the first listener died before it made its
				// file (the first free name is taken; the first window's is
				// cut where its listener died).
				raws := rawFiles(t, filepath.Join(tmp, "D"), ".rtrace")
				if len(raws) == 0 || len(raws) > 2 {
					t.Fatalf("raw files %v, want one per listener that made one", raws)
				}
				raw := raws[len(raws)-1]
				if n := len(readCalls(t, raw)); n != 8 {
					t.Errorf("the second window holds %d calls, want 8 (4 steps, a malloc and a free each)", n)
				}
			}
		})
	}
}

// privileged copies the program src builds into a directory of its own,
// made setuid (owned by the tests' user, or by nobody, 65534: another
// user) or given file capabilities, and returns its path. What needs
// privileges the tests lack is skipped: .ci/run may run them as a user.
func privileged(t *testing.T, src, kind string) string {
	t.Helper()
	prog := filepath.Join(t.TempDir(), "priv")
	b, err := os.ReadFile(testutil.BuildC(t, src, "-O0", "-g"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prog, b, 0o755); err != nil {
		t.Fatal(err)
	}
	switch kind {
	case "setcap":
		// vfs_cap_data, revision 2 (linux/capability.h): effective, and
		// CAP_NET_BIND_SERVICE (10) permitted.
		c := make([]byte, 20)
		binary.LittleEndian.PutUint32(c, 0x02000000|1)
		binary.LittleEndian.PutUint32(c[4:], 1<<10)
		if err := unix.Setxattr(prog, "security.capability", c, 0); err != nil {
			t.Skipf("setting file capabilities needs CAP_SETFCAP: %v", err)
		}
		return prog
	case "setuid-other":
		if err := os.Chown(prog, 65534, 65534); err != nil {
			t.Skipf("a program of another user needs CAP_CHOWN: %v", err)
		}
	}
	if err := os.Chmod(prog, 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	return prog
}

// hasCapSysPtrace reports whether the tests hold CAP_SYS_PTRACE.
func hasCapSysPtrace() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	return unix.Capget(&hdr, &data[0]) == nil && data[0].Effective&(1<<unix.CAP_SYS_PTRACE) != 0
}

// A setuid program, or one with file capabilities, would run without its
// privileges under a tracer that lacks CAP_SYS_PTRACE: refused before it
// runs, with the reason and the remedy, exit 126. Setuid to the tests'
// own user (refused by its mode), to another user (which a root without
// the capability may not even inspect), setcap. Where the tests hold the
// capability, rtrace runs without it: setpriv drops it from the bounding
// set.
func TestRecordRefusesPrivileged(t *testing.T) {
	for _, c := range []struct{ kind, said string }{
		{"setuid-own", "setuid"}, {"setuid-other", "setuid"}, {"setcap", "file capabilities"},
	} {
		t.Run(c.kind, func(t *testing.T) {
			prog := privileged(t, "euid.c", c.kind)
			tmp := t.TempDir()
			cmd := []string{rtraceBin}
			if hasCapSysPtrace() {
				cmd = []string{testutil.RequireTool(t, "setpriv"), "--bounding-set", "-sys_ptrace", rtraceBin}
			}
			r := runCmd(t, tmp, cmd[0], append(cmd[1:], "record", "-d", "R", "--", prog)...)
			if r.code != 126 || !strings.Contains(r.stderr, c.said) || !strings.Contains(r.stderr, "CAP_SYS_PTRACE") || r.stdout != "" {
				t.Errorf("%s program, rtrace without CAP_SYS_PTRACE: %+v, want exit 126 and a refusal before it runs", c.kind, r)
			}
		})
	}
}

// With CAP_SYS_PTRACE (root), the kernel runs a setuid program rtrace
// traces with its privileges: it runs as untraced (its owner's euid), and
// is traced, on both engines.
func TestRecordPrivilegedTraced(t *testing.T) {
	if !hasCapSysPtrace() {
		t.Skip("tracing a setuid program with its privileges needs CAP_SYS_PTRACE (root)")
	}
	uft := testutil.RequireTool(t, "uftrace")
	prog := privileged(t, "euid.c", "setuid-other")
	tmp := t.TempDir()
	want := runCmd(t, tmp, prog)
	if want.stdout != "euid 65534\n" {
		t.Fatalf("the setuid program untraced: %+v", want)
	}
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			dir := "R-" + engine
			r := runCmd(t, tmp, rtraceBin, "record", "--engine", engine, "-d", dir, "--", prog)
			if r.code != 0 || r.stdout != want.stdout {
				t.Fatalf("under rtrace: %+v, want %q and exit 0", r, want.stdout)
			}
			if out := testutil.Run(t, tmp, uft, "replay", "-d", dir); !strings.Contains(out, "who() {") {
				t.Errorf("the trace has no call of who():\n%s", out)
			}
		})
	}
}

// Writing the trace fails (a full disk: a 64 KiB tmpfs in a mount
// namespace of its own): rtrace says so in one line starting "rtrace:"
// (the first failure, the trace named incomplete), ends with the
// program's status, and leaves no half-written temporary file (issue 31,
// item 9: three lines, the first "stream closed", exit 1, and
// libc.so.6.sym.tmp left).
func TestWriteErrorKeepsStatus(t *testing.T) {
	unshare := testutil.RequireTool(t, "unshare")
	prog := testutil.BuildC(t, "busyexit.c", "-O0", "-g")
	mnt := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	// Inside the namespace: the run, its status, then what it left.
	script := `mount -t tmpfs -o size=64k tmpfs "$1" || exit 99
cd "$1" || exit 99
"$2" record -d W -- "$3" 300000 2>"$4"
code=$?
echo "status $code"
ls -a W
echo "-- rtrace said"
cat "$4"`
	errFile := filepath.Join(filepath.Dir(mnt), "err") // not on the full disk
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, unshare, "-m", "sh", "-c", script, "sh", mnt, rtraceBin, prog, errFile)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("rtrace hung on a full disk (killed after %v):\n%s", hangGuard, out.String())
	}
	if code := exitCode(err); code != 0 {
		t.Skipf("a tmpfs in a mount namespace needs CAP_SYS_ADMIN (unshare -m, mount): %v\n%s", err, out.String())
	}
	text := out.String()
	listing, said0, _ := strings.Cut(text, "-- rtrace said\n")
	if !strings.Contains(listing, "status 7\n") {
		t.Errorf("rtrace did not end with the program's status 7:\n%s", text)
	}
	if strings.Contains(listing, ".tmp") {
		t.Errorf("a half-written temporary file was left:\n%s", text)
	}
	var said []string
	for _, l := range strings.Split(said0, "\n") {
		if strings.HasPrefix(l, "rtrace:") || strings.Contains(l, "stream closed") || strings.Contains(l, "function trace:") {
			said = append(said, l)
		}
	}
	if len(said) != 1 || !strings.Contains(said[0], "no space left on device") || !strings.Contains(said[0], "incomplete") {
		t.Errorf("rtrace said %q, want one line naming the full disk and the trace incomplete:\n%s", said, text)
	}
}

// A program that switches contexts (makecontext/swapcontext: a coroutine
// on a stack of its own) runs under rtrace as untraced, on both engines,
// at -O0 and -O2, library calls nested or not, and its functions are in
// the trace. swapcontext's and setcontext's calls are not recorded (their
// returns come in another context, or never); getcontext's is (issue 31, item 4: the -O2 build looped
// forever, both engines).
func TestContextSwitch(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	for _, opt := range []string{"-O0", "-O2"} {
		prog := testutil.BuildC(t, "ucontext.c", opt, "-g")
		want, err := exec.Command(prog).Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, engine := range engines {
			for _, extra := range [][]string{nil, {"--nest-libcall"}} {
				t.Run(fmt.Sprintf("%s/%s/%v", opt, engine, extra), func(t *testing.T) {
					tmp := t.TempDir()
					args := append(append([]string{"record", "--engine", engine, "-d", "W"}, extra...), "--", prog)
					r := runGuarded(t, tmp, nil, args...)
					if r.code != 0 || r.stdout != string(want) {
						t.Fatalf("exit %d, output:\n%s\nwant:\n%s\n%s", r.code, clipLines(r.stdout, 12), want, r.stderr)
					}
					replay := testutil.Run(t, tmp, uft, "replay", "--no-pager", "-d", "W")
					if !strings.Contains(replay, "getcontext();") {
						t.Errorf("the trace lacks getcontext(), which uftrace records:\n%s", replay)
					}
					if n := strings.Count(replay, "work();"); n != 3 || !strings.Contains(replay, "coroutine() {") {
						t.Errorf("the trace shows work() %d times (want 3), coroutine: %v:\n%s", n, strings.Contains(replay, "coroutine() {"), replay)
					}
				})
			}
		}
	}
}
