package launcher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"rtrace/tracer"
)

// keepPidEnv names, in the environment of the tracer process of --keep-pid,
// the pid it adopts: the rtrace command's, which becomes the program.
const keepPidEnv = "RTRACE_KEEP_PID"

// --keep-pid (uftrace record's): the program keeps the pid of the rtrace
// command, as a daemon's pid file or a shell's $! expect. The command
// starts a second rtrace, the tracer, with the same arguments and
// keepPidEnv; lets it trace the command (PR_SET_PTRACER, for Yama's
// ptrace_scope 1); waits until it has seized the command's thread; and
// execs the program, which the tracer follows from its exec on. The
// program's parent sees its status; the tracer writes the trace when it
// ends, and may still be at it when a shell prints its next prompt (as
// uftrace's recorder, a child of the program too). Two pipes order the
// steps: the command's go-ahead (fd 3 of the tracer) and the tracer's
// "seized" (fd 4).

// keepPid is the command's side: check o, start the tracer, exec the
// program. It returns only on an error.
func keepPid(o Options) (int, error) {
	runtime.LockOSThread()
	if unix.Gettid() != os.Getpid() {
		// The tracer seizes the thread group's leader, which must be
		// the one that execs (cmd/rtrace locks it in init).
		return 1, errors.New("--keep-pid: rtrace is not on its main thread: cannot keep its pid")
	}
	v := o
	v.checkOnly = true
	c, err := check(context.Background(), v)
	if err != nil {
		return exitCode(err), err
	}
	goR, goW, err := os.Pipe()
	if err != nil {
		return 1, err
	}
	seizedR, seizedW, err := os.Pipe()
	if err != nil {
		return 1, err
	}
	self, err := os.Executable()
	if err != nil {
		return 1, fmt.Errorf("--keep-pid: finding rtrace's executable: %w", err)
	}
	tr := exec.Command(self, os.Args[1:]...)
	tr.Env = append(os.Environ(), keepPidEnv+"="+strconv.Itoa(os.Getpid()))
	tr.Stdout, tr.Stderr = c.Stdout, c.Stderr // the tracer's messages; its stdin is /dev/null
	tr.ExtraFiles = []*os.File{goR, seizedW}
	if err := tr.Start(); err != nil {
		return 1, fmt.Errorf("--keep-pid: starting the tracer: %w", err)
	}
	goR.Close()
	seizedW.Close()
	unix.Prctl(unix.PR_SET_PTRACER, uintptr(tr.Process.Pid), 0, 0, 0) // EINVAL without Yama: nothing to allow
	goW.Write([]byte{1})
	goW.Close()
	if n, _ := seizedR.Read(make([]byte, 1)); n != 1 {
		// The tracer failed and said why.
		tr.Wait()
		return max(tr.ProcessState.ExitCode(), 1), errors.New("--keep-pid: the tracer did not start")
	}
	seizedR.Close()
	if c.NoRandomize {
		if _, err := tracer.NoRandomize(); err != nil {
			return 1, fmt.Errorf("--no-randomize-addr: %w", err)
		}
	}
	env := c.env()
	if env == nil {
		env = os.Environ()
	}
	err = syscall.Exec(c.prog, c.Args, env)
	// The tracer sees this process end before an exec, and says nothing.
	return 127, fmt.Errorf("%s: %w", c.Args[0], err)
}

// adoptedPid is the pid the tracer process of --keep-pid adopts (0: this
// is not one), and waits for the command's go-ahead to seize it.
func adoptedPid() (int, error) {
	v := os.Getenv(keepPidEnv)
	if v == "" {
		return 0, nil
	}
	os.Unsetenv(keepPidEnv) // the program does not inherit it
	pid, err := strconv.Atoi(v)
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s=%q: not a pid", keepPidEnv, v)
	}
	goR := os.NewFile(3, "keep-pid go-ahead")
	defer goR.Close()
	if n, _ := goR.Read(make([]byte, 1)); n != 1 {
		return 0, errors.New("--keep-pid: the rtrace command ended before its program started")
	}
	return pid, nil
}

// adopt is the tracer's side: trace the command once it has said to, and
// tell it when it may exec.
func (s *session) adopt() (*tracer.Result, error) {
	seized := os.NewFile(4, "keep-pid seized")
	defer seized.Close()
	pid, err := adoptedPid()
	if err != nil {
		return nil, err
	}
	return s.tr.Adopt(pid, func() {
		seized.Write([]byte{1})
		seized.Close()
	})
}
