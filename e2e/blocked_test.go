package e2e_test

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"rtrace/internal/testutil"
)

// inSyscall reports whether a task of pid, or of a child process of pid,
// is inside system call nr (/proc/TID/syscall, proc(5)).
func inSyscall(pid, nr int) bool {
	for _, p := range append([]string{strconv.Itoa(pid)}, childPids(pid)...) {
		files, _ := filepath.Glob("/proc/" + p + "/task/*/syscall")
		for _, f := range files {
			b, _ := os.ReadFile(f)
			if fields := strings.Fields(string(b)); len(fields) > 0 && fields[0] == strconv.Itoa(nr) {
				return true
			}
		}
	}
	return false
}

// blocked is a running blockedopen.c, reading the FIFO fifo.
type blocked struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *lineLog
	pid  int
	fifo string
}

// startBlocked makes a FIFO in dir and starts prog (blockedopen.c built)
// on it, once it has said its pid.
func startBlocked(t *testing.T, prog, dir string) *blocked {
	t.Helper()
	b := &blocked{fifo: filepath.Join(dir, "ff")}
	if err := syscall.Mkfifo(b.fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	b.cmd = exec.Command(prog, b.fifo)
	// A group of its own: its clone(CLONE_VM) and vfork children, which a
	// failed test can leave blocked on the FIFO after its parent is
	// killed (the FIFO gone with the test's directory), go with it.
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	b.in, _ = b.cmd.StdinPipe()
	stdout, _ := b.cmd.StdoutPipe()
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL); b.cmd.Wait() })
	b.out = newLineLog(stdout)
	var err error
	if b.pid, err = strconv.Atoi(strings.TrimPrefix(b.out.waitFor("pid "), "pid ")); err != nil {
		t.Fatalf("the fixture did not start:\n%s", b.out.String())
	}
	return b
}

// A detach while the program is blocked inside a function rtrace hooked:
// open (a resource call whose return rtrace took), pthread_join, open in a
// child made with clone(CLONE_VM) (which shares the memory: the fast
// engine stops recording there), and open in a vfork child, whose parent
// waits inside vfork where no tracer can stop it. The blocked call returns
// what it would have, later calls of the same functions run untraced, and
// the program's output and exit status are the untraced run's. The
// detach does not wait for the vfork child: its parent, which no tracer
// can stop inside vfork, goes when rtrace exits (docs/RELIABILITY.md).
// When no thread is outside a system call to unmap rtrace's code, it
// stays, neutral, and rtrace says so: then, and only then, the maps may
// differ. Both engines.
func TestDetachWhileBlockedInside(t *testing.T) {
	needAttach(t)
	prog := testutil.BuildC(t, "blockedopen.c", "-O2", "-g", "-pthread")
	for _, engine := range engines {
		for _, c := range []struct {
			cmd  string
			said []string // what the program says once the blocked open returns
		}{
			{"open", []string{"read hello"}},
			{"join", []string{"read hello", "joined"}},
			{"clone", []string{"read hello", "waited"}},
			{"vfork", []string{"vforked 0"}},
		} {
			t.Run(engine+"/"+c.cmd, func(t *testing.T) {
				tmp := t.TempDir()
				b := startBlocked(t, prog, tmp)
				p, in, out, pid, fifo := b.cmd, b.in, b.out, b.pid, b.fifo
				maps := mapsOf(t, pid)
				at := exec.Command(rtraceBin, "attach", "--engine", engine, "-e", "file", "-e", "thread", "-o", "D", strconv.Itoa(pid))
				at.Dir = tmp
				stderr, _ := at.StderrPipe()
				if err := at.Start(); err != nil {
					t.Fatal(err)
				}
				errs := newLineLog(stderr)
				if errs.waitFor("attached to pid") == "" {
					t.Fatalf("rtrace attach ended before attaching:\n%s", errs.String())
				}
				fmt.Fprintln(in, c.cmd)
				waitFor(t, "the program blocked in open(2) of the FIFO", func() bool { return inSyscall(pid, int(syscall.SYS_OPENAT)) })
				at.Process.Signal(syscall.SIGINT)
				// The blocked open returns; then one more open runs after
				// the detach, through whatever rtrace left in the function.
				// Each line is read, and the FIFO closed, before the next
				// writer opens it: else one read takes both.
				send := func(s string) {
					f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
					if err != nil {
						t.Fatal(err)
					}
					fmt.Fprintln(f, s)
					f.Close()
				}
				errs.drain()
				if err := at.Wait(); err != nil {
					t.Fatalf("rtrace attach: %v\n%s", err, errs.String())
				}
				send("hello")
				for _, line := range c.said {
					if out.waitFor(line) == "" {
						t.Fatalf("the program did not say %q:\n%s", line, out.String())
					}
				}
				// A thread stopped in rtrace's code, spinning where a stub
				// waits, keeps it mapped too (and rtrace says so).
				kept := strings.Contains(errs.String(), "rtrace's memory stays mapped")
				if !kept {
					// Nothing of rtrace is left (a thread's stack may be,
					// with pthread_join's: glibc caches it).
					if after := mapsOf(t, pid); after != maps && c.cmd != "join" {
						t.Errorf("maps after the detach differ from before the attach:\nbefore:\n%s\nafter:\n%s", maps, after)
					}
				}
				fmt.Fprintln(in, "open")
				send("again")
				in.Close()
				out.drain()
				if err := p.Wait(); err != nil {
					t.Fatalf("the program failed after the detach: %v\n%s", err, out.String())
				}
				want := "pid " + strconv.Itoa(pid) + "\n" + strings.Join(c.said, "\n") + "\nread again\ndone\n"
				if got := out.String(); got != want {
					t.Errorf("the program printed:\n%s\nwant (untraced):\n%s\nrtrace said:\n%s", got, want, errs.String())
				}
			})
		}
	}
}

// An attach to a process already waiting inside vfork (its child blocked
// before exec) says what it waits for, attaches once the child exits, and
// detaches as usual: the program ends as untraced. Both engines.
func TestAttachDuringVfork(t *testing.T) {
	needAttach(t)
	prog := testutil.BuildC(t, "blockedopen.c", "-O2", "-g", "-pthread")
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			tmp := t.TempDir()
			b := startBlocked(t, prog, tmp)
			p, in, out, pid, fifo := b.cmd, b.in, b.out, b.pid, b.fifo
			fmt.Fprintln(in, "vfork")
			waitFor(t, "the vfork child blocked in open(2)", func() bool { return inSyscall(pid, int(syscall.SYS_OPENAT)) })
			at := exec.Command(rtraceBin, "attach", "--engine", engine, "-e", "file", "-o", "D", strconv.Itoa(pid))
			at.Dir = tmp
			stderr, _ := at.StderrPipe()
			if err := at.Start(); err != nil {
				t.Fatal(err)
			}
			errs := newLineLog(stderr)
			if errs.waitFor("waits inside vfork for its child") == "" {
				t.Fatalf("rtrace attach did not say what it waits for:\n%s", errs.String())
			}
			f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(f, "hello")
			f.Close()
			if errs.waitFor("attached to pid") == "" {
				t.Fatalf("rtrace attach ended before attaching:\n%s", errs.String())
			}
			if out.waitFor("vforked 0") == "" {
				t.Fatalf("the program did not go on:\n%s", out.String())
			}
			at.Process.Signal(syscall.SIGINT)
			errs.drain()
			if err := at.Wait(); err != nil {
				t.Fatalf("rtrace attach: %v\n%s", err, errs.String())
			}
			in.Close()
			out.drain()
			if err := p.Wait(); err != nil || out.String() != "pid "+strconv.Itoa(pid)+"\nvforked 0\ndone\n" {
				t.Errorf("the program: %v\n%s\nrtrace said:\n%s", err, out.String(), errs.String())
			}
		})
	}
}
