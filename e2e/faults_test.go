package e2e_test

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"rtrace/internal/testutil"
)

// The faults of docs/RELIABILITY.md: whatever happens to rtrace, the
// process it traced goes on as it would have untraced.

// tightProc is a running tight.c: four threads calling work() in a loop.
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
				at.Process.Signal(syscall.SIGINT) // a third one changes nothing
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
