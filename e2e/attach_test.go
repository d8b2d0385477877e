package e2e_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"rtrace/internal/testutil"
)

// startAttachee starts the attachee fixture, which runs the steps it is
// asked for on stdin, and waits until it says its pid.
func startAttachee(t *testing.T, prog string) (*stepper, int) {
	t.Helper()
	cmd := exec.Command(prog, "check")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	s := &stepper{t: t, cmd: cmd, in: in, out: newLineLog(out)}
	line := s.out.waitFor("pid ")
	pid, err := strconv.Atoi(strings.TrimPrefix(line, "pid "))
	if err != nil {
		t.Fatalf("the fixture did not start: %q", line)
	}
	return s, pid
}

// mapsOf is /proc/PID/maps of a process waiting between steps.
func mapsOf(t *testing.T, pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// cpusAllowed is the CPU list a process may run on.
func cpusAllowed(t *testing.T, pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no Cpus_allowed_list for pid %d", pid)
	return ""
}

// waitCreated blocks until dir/name exists (inotify: no polling).
func waitCreated(t *testing.T, dir, name string) {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return
		}
		if _, err := unix.Read(fd, buf); err != nil && err != unix.EINTR {
			t.Fatal(err)
		}
	}
}

// TestAttach: attach to a running fixture between two of its steps, trace
// exactly the steps it is then asked for, detach at Ctrl-C: it goes on
// computing the same results, and its code in memory equals its files
// (every byte rtrace patched in it and in libc is back).
func TestAttach(t *testing.T) {
	needAttach(t)
	prog := testutil.BuildC(t, "attachee.c", "-O2", "-g")
	// The untraced run of the same steps.
	ref, _ := startAttachee(t, prog)
	ref.steps(28)
	ref.in.Close()
	ref.out.drain()
	if err := ref.cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []struct {
		name  string
		args  []string
		quiet bool
	}{
		{"memory", []string{"-e", "memory", "-o", "D"}, false},
		{"functions", []string{"-d", "F", "-A", "step@arg1/i32"}, false},
		// record's options, with the same meaning.
		{"quiet-depth-time", []string{"-q", "-D", "2", "-t", "1us", "-d", "F"}, true},
	} {
		t.Run(mode.name, func(t *testing.T) {
			tmp := t.TempDir()
			s, pid := startAttachee(t, prog)
			s.steps(3)
			cpus := cpusAllowed(t, pid)
			maps := mapsOf(t, pid)
			at := exec.Command(rtraceBin, append(append([]string{"attach"}, mode.args...), strconv.Itoa(pid))...)
			at.Dir = tmp
			stderr, _ := at.StderrPipe()
			if err := at.Start(); err != nil {
				t.Fatal(err)
			}
			errs := newLineLog(stderr)
			if mode.quiet {
				waitCreated(t, tmp, "F") // made once the breakpoints are in
			} else if line := errs.waitFor("attached to pid"); line == "" {
				t.Fatalf("rtrace attach ended before attaching:\n%s", errs.String())
			}
			s.steps(20) // steps 3..22, traced
			// Pinned like a recorded program (not with --no-pin), and its
			// own CPU mask again after the detach.
			if during := cpusAllowed(t, pid); runtime.NumCPU() > 1 && strings.ContainsAny(during, ",-") {
				t.Errorf("attached: the process may run on CPUs %s, want one (pinned with the tracer)", during)
			}
			at.Process.Signal(syscall.SIGINT)
			errs.drain()
			if err := at.Wait(); err != nil {
				t.Fatalf("attach: %v\n%s", err, errs.String())
			}
			if after := cpusAllowed(t, pid); after != cpus {
				t.Errorf("after the detach the process may run on CPUs %s, before on %s", after, cpus)
			}
			if after := mapsOf(t, pid); after != maps {
				t.Errorf("after the detach the process's maps differ from before the attach:\nbefore:\n%s\nafter:\n%s", maps, after)
			}
			s.steps(5)
			s.in.Close()
			s.out.drain() // Wait closes the pipe: read it to its end first
			if err := s.cmd.Wait(); err != nil {
				t.Fatalf("the fixture failed after the detach: %v\n%s", err, s.out.String())
			}
			got, want := s.out.String(), ref.out.String()
			_, gotBody, _ := strings.Cut(got, "\n")
			_, wantBody, _ := strings.Cut(want, "\n")
			if gotBody != wantBody {
				t.Errorf("output after attach/detach differs from an untraced run:\n%s", clipLines(got, 5))
			}
			if !strings.Contains(got, "text intact") {
				t.Errorf("code differs from the files after the detach:\n%s", got[strings.LastIndex(got[:len(got)-1], "\n")+1:])
			}
			if mode.quiet && errs.String() != "" {
				t.Errorf("-q: rtrace said:\n%s", errs.String())
			}
			switch mode.name {
			case "memory":
				raw := rawFiles(t, filepath.Join(tmp, "D"), ".rtrace")
				if len(raw) != 1 {
					t.Fatalf("raw files %v", raw)
				}
				allocs, frees := 0, 0
				for _, c := range readCalls(t, raw[0]) {
					switch {
					case c.Alloc && c.Size == 512:
						allocs++
					case c.Alloc:
						t.Errorf("allocation of %d bytes, the fixture makes 512", c.Size)
					default:
						frees++
					}
				}
				if allocs != 20 || frees != 20 {
					t.Errorf("%d allocations and %d frees traced, the 20 steps traced make 20 of each", allocs, frees)
				}
			case "functions":
				if got := stepIndexes(t, filepath.Join(tmp, "F")); !slices.Equal(got, span(3, 23)) {
					t.Errorf("steps traced %v, want %v", got, span(3, 23))
				}
			default:
				entries, exits := testutil.CountRecords(t, filepath.Join(tmp, "F"))
				if entries == 0 || entries != exits {
					t.Errorf("%d entries, %d exits", entries, exits)
				}
				depth := testutil.Run(t, "", testutil.RequireTool(t, "uftrace"), "replay", "--no-pager", "-f", "none", "-d", filepath.Join(tmp, "F"))
				for _, l := range strings.Split(depth, "\n") {
					if strings.HasPrefix(l, "    ") {
						t.Errorf("-D 2: a call at depth 2 or deeper: %q", l)
						break
					}
				}
			}
		})
	}
}

// A failed attach says why, writes nothing, and does not say a trace was
// saved: here the process is already traced (by rtrace record).
func TestAttachRefused(t *testing.T) {
	prog := testutil.BuildC(t, "attachee.c", "-O0")
	tmp := t.TempDir()
	rec := exec.Command(rtraceBin, "record", "--disable", "-d", "R", "--", prog)
	rec.Dir = tmp
	in, _ := rec.StdinPipe()
	out, _ := rec.StdoutPipe()
	if err := rec.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); rec.Wait() }()
	line := newLineLog(out).waitFor("pid ")
	pid, err := strconv.Atoi(strings.TrimPrefix(line, "pid "))
	if err != nil {
		t.Fatalf("the fixture did not start: %q", line)
	}
	for _, args := range [][]string{{"-d", "F"}, {"-e", "memory", "-o", "F"}} {
		r := runCmd(t, tmp, rtraceBin, append(append([]string{"attach"}, args...), strconv.Itoa(pid))...)
		want := fmt.Sprintf("pid %d is already traced by pid %d (rtrace)", pid, rec.Process.Pid)
		if r.code == 0 || !strings.Contains(r.stderr, want) || strings.Contains(r.stderr, "saved") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("attach %v: exit %d, stderr %q; want one line with %q", args, r.code, r.stderr, want)
		}
		if _, err := os.Stat(filepath.Join(tmp, "F")); err == nil {
			t.Errorf("attach %v: a failed attach left F behind", args)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a reader goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAttachStatusLine: an attached process that does not write to
// rtrace's terminal gets a live status line there; every message starts
// on a line of its own (the line is cleared first), and the line is gone
// at the end. -q shows nothing.
func TestAttachStatusLine(t *testing.T) {
	needAttach(t)
	prog := testutil.BuildC(t, "attachee.c", "-O0")
	for _, quiet := range []bool{false, true} {
		t.Run(fmt.Sprintf("quiet=%v", quiet), func(t *testing.T) {
			tmp := t.TempDir()
			s, pid := startAttachee(t, prog)
			m, slave := testutil.OpenPty(t)
			defer m.Close()
			args := []string{"attach", "-d", "F"}
			if quiet {
				args = append(args, "-q")
			}
			at := exec.Command(rtraceBin, append(args, strconv.Itoa(pid))...)
			at.Dir, at.Stderr = tmp, slave
			if err := at.Start(); err != nil {
				t.Fatal(err)
			}
			slave.Close()
			var raw syncBuffer
			lines := newLineLog(io.TeeReader(m, &raw))
			if quiet {
				waitCreated(t, tmp, "F")
			} else if lines.waitFor("attached to pid") == "" {
				t.Fatalf("no attach message: %q", raw.String())
			}
			s.steps(50)
			at.Process.Signal(syscall.SIGINT)
			if err := at.Wait(); err != nil {
				t.Fatalf("attach: %v\n%q", err, raw.String())
			}
			for range lines.lines { // the rest, to EIO
			}
			got := raw.String()
			// Take the live line's redraws out: what is left is exactly the
			// messages, each a whole line.
			plain := regexp.MustCompile(`\r\x1b\[K(rtrace: \d+ records, \d+ records/s, [\d.]+ (B|KiB|MiB))?`).ReplaceAllString(got, "")
			want := regexp.MustCompile(fmt.Sprintf(`^rtrace: attached to pid %d; Ctrl-C detaches\r\nrtrace: detached from pid %d; \d+ records, 0 lost, in [\d.]+m?s; trace saved in F\r\n$`, pid, pid))
			switch {
			case quiet && got != "":
				t.Errorf("-q: the terminal shows %q", got)
			case !quiet && !want.MatchString(plain):
				t.Errorf("the terminal shows %q (%q without the status line)", got, plain)
			}
		})
	}
}

// Attaching to and detaching from four threads calling a function in a
// tight loop, three times over with each engine: every detach finds threads
// inside rtrace's code (a stub, the exit stub, a trampoline) and must move
// them out, put back every byte and return address, and unmap what it
// mapped. The program then computes what it computes untraced, its code
// equals its files, and its maps are as before the first attach.
func TestAttachDetachLoop(t *testing.T) {
	needAttach(t)
	prog := testutil.BuildC(t, "tight.c", "-O2", "-g", "-pthread")
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			p := startTight(t, prog)
			pid, cmd, out := p.pid, p.cmd, p.out
			maps := mapsOf(t, pid)
			var records int
			for round := range 3 {
				tmp := t.TempDir()
				at := exec.Command(rtraceBin, "attach", "--engine", engine, "-d", "F", strconv.Itoa(pid))
				at.Dir = tmp
				stderr, _ := at.StderrPipe()
				if err := at.Start(); err != nil {
					t.Fatal(err)
				}
				errs := newLineLog(stderr)
				errs.waitFor("attached to pid") // the code is in
				// The threads run traced: the count of calls grows.
				p.running()
				at.Process.Signal(syscall.SIGINT)
				errs.drain()
				if err := at.Wait(); err != nil {
					t.Fatalf("round %d: attach: %v\n%s", round, err, errs.String())
				}
				if after := mapsOf(t, pid); after != maps {
					t.Logf("rtrace said: %s", errs.String())
					if after == "" { // a zombie: how it ended says what went wrong
						t.Fatalf("round %d: the program ended at the detach: %v\n%s", round, cmd.Wait(), out.String())
					}
					t.Fatalf("round %d: the maps after the detach differ from before the first attach:\nbefore:\n%s\nafter:\n%s", round, maps, after)
				}
				if m := regexp.MustCompile(`; (\d+) records`).FindStringSubmatch(errs.String()); m != nil {
					n, _ := strconv.Atoi(m[1])
					records += n
				}
			}
			if records == 0 {
				t.Errorf("no records in three attaches")
			}
			p.finish("after the detaches") // untraced again: the count still grows
		})
	}
}
