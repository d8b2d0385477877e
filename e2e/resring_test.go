package e2e_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"rtrace/internal/testutil"
	"rtrace/tracer/fast"
)

// flood is rtrace recording testdata/resflood.c's allocations, which come
// between two lines of input, for the tests that stop rtrace meanwhile.
type flood struct {
	t      *testing.T
	dir    string // the record's directory is dir/D
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr strings.Builder
}

// startFlood starts rtrace on resflood with args and waits for its "ready".
func startFlood(t *testing.T, args ...string) *flood {
	t.Helper()
	prog := testutil.BuildC(t, "resflood.c", "-O2")
	f := &flood{t: t, dir: t.TempDir()}
	f.cmd = exec.Command(rtraceBin, append([]string{"record", "--engine=fast", "--module", "memory", "--start", "-o", filepath.Join(f.dir, "D"), "--", prog}, args...)...)
	f.in, _ = f.cmd.StdinPipe()
	outPipe, _ := f.cmd.StdoutPipe()
	f.cmd.Stderr = &f.stderr
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.cmd.Process.Kill() })
	f.out = bufio.NewReader(outPipe)
	f.expect("ready")
	return f
}

// expect reads the program's next line, which must start with prefix.
func (f *flood) expect(prefix string) {
	f.t.Helper()
	if line, err := f.out.ReadString('\n'); err != nil || !strings.HasPrefix(line, prefix) {
		f.t.Fatalf("fixture printed %q (%v), want %q...\n%s", line, err, prefix, f.stderr.String())
	}
}

// stop stops rtrace (every thread) and lets the program allocate: nothing
// drains its ring meanwhile.
func (f *flood) stop() {
	f.t.Helper()
	if err := f.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		f.t.Fatal(err)
	}
	for !allStopped(f.cmd.Process.Pid) {
		runtime.Gosched()
	}
	io.WriteString(f.in, "go\n")
}

// cont lets rtrace go on.
func (f *flood) cont() {
	f.t.Helper()
	if err := f.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		f.t.Fatal(err)
	}
}

// finish ends the program and rtrace, and returns the calls and losses
// rtrace's summary counts.
func (f *flood) finish() (calls, lost int) {
	f.t.Helper()
	io.WriteString(f.in, "end\n")
	f.in.Close()
	if err := f.cmd.Wait(); err != nil {
		f.t.Fatalf("rtrace: %v\n%s", err, f.stderr.String())
	}
	for _, l := range strings.Split(f.stderr.String(), "\n") {
		if n, _ := fmt.Sscanf(l, "rtrace: %d resource calls, %d lost", &calls, &lost); n == 2 {
			break
		}
	}
	return calls, lost
}

// TestResourceRingWait: a resource call that finds its ring full waits for
// the drain (rtrace stopped meanwhile) and is recorded once there is room:
// none is lost when rtrace comes back before the wait's deadline, whether
// the ring fills at a malloc's return or at a free's entry (a pair takes 4
// slots, each call 2: one or two mallocs first shift where it fills by
// 2). A free that waited was dropped when the stubs checked room against
// a tail they had not read again (CTAIL).
func TestResourceRingWait(t *testing.T) {
	for _, first := range []string{"1", "2"} {
		t.Run(first, func(t *testing.T) {
			// Four records a pair: 50,000 pairs fill the 65,536-record
			// ring three times over.
			const pairs = 50000
			f := startFlood(t, strconv.Itoa(pairs), first)
			target := childOf(t, f.cmd.Process.Pid)
			f.stop()
			// The program fills its ring and sleeps on it (a futex wait,
			// 1 ms at a time, for about a second at most): rtrace goes on
			// then.
			for !inFutex(target) {
				runtime.Gosched()
			}
			f.cont()
			f.expect(fmt.Sprintf("done %d", pairs))
			if calls, lost := f.finish(); lost != 0 || calls < 2*pairs {
				t.Errorf("rtrace says %d resource calls, %d lost; want all %d, none lost (ring: %d records)\n%s", calls, lost, 2*pairs, fast.RingCap, f.stderr.String())
			}
		})
	}
}

// childOf returns the first child of process pid.
func childOf(t *testing.T, pid int) int {
	t.Helper()
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		if fs := strings.Fields(string(b)); len(fs) > 0 {
			if c, err := strconv.Atoi(fs[0]); err == nil {
				return c
			}
		}
	}
	t.Fatalf("process %d has no child", pid)
	return 0
}

// inFutex reports whether process pid's thread is in a futex system call.
func inFutex(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", pid))
	return err == nil && strings.HasPrefix(string(b), strconv.Itoa(syscall.SYS_FUTEX)+" ")
}
