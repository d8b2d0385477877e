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

// TestResourceRingWait: a resource call that finds its ring full waits for
// the drain (rtrace stopped meanwhile) and is recorded once there is room:
// none is lost when rtrace comes back before the wait's deadline, whether
// the ring fills at a malloc's return or at a free's entry (a pair takes 4
// slots, each call 2: one or two mallocs first shift where it fills by
// 2). A free that waited was dropped when the stubs checked room against
// a tail they had not read again (CTAIL).
func TestResourceRingWait(t *testing.T) {
	prog := testutil.BuildC(t, "resflood.c", "-O2")
	for _, first := range []string{"1", "2"} {
		t.Run(first, func(t *testing.T) { ringWait(t, prog, first) })
	}
}

func ringWait(t *testing.T, prog, first string) {
	// Four records a pair: 50,000 pairs fill the 65,536-record ring three
	// times over.
	const pairs = 50000
	dir := t.TempDir()
	cmd := exec.Command(rtraceBin, "record", "--engine=fast", "--module", "memory", "--start", "-o", filepath.Join(dir, "D"), "--", prog, strconv.Itoa(pairs), first)
	in, _ := cmd.StdinPipe()
	outPipe, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	out := bufio.NewReader(outPipe)
	expect := func(prefix string) {
		t.Helper()
		if line, err := out.ReadString('\n'); err != nil || !strings.HasPrefix(line, prefix) {
			t.Fatalf("fixture printed %q (%v), want %q...\n%s", line, err, prefix, stderr.String())
		}
	}
	expect("ready")
	target := childOf(t, cmd.Process.Pid)
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for !allStopped(cmd.Process.Pid) {
		runtime.Gosched()
	}
	io.WriteString(in, "go\n")
	// The program fills its ring and sleeps on it (a futex wait, 1 ms at
	// a time, for about a second at most): rtrace goes on then.
	for !inFutex(target) {
		runtime.Gosched()
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	expect(fmt.Sprintf("done %d", pairs))
	io.WriteString(in, "end\n")
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("rtrace: %v\n%s", err, stderr.String())
	}
	var calls, lost int
	for _, l := range strings.Split(stderr.String(), "\n") {
		if n, _ := fmt.Sscanf(l, "rtrace: %d resource calls, %d lost", &calls, &lost); n == 2 {
			break
		}
	}
	if lost != 0 || calls < 2*pairs {
		t.Errorf("rtrace says %d resource calls, %d lost; want all %d, none lost (ring: %d records)\n%s", calls, lost, 2*pairs, fast.RingCap, stderr.String())
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
