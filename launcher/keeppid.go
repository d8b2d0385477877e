package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
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
// keepPidSpawnEnv marks the process that starts the tracer and exits.
const (
	keepPidEnv      = "RTRACE_KEEP_PID"
	keepPidSpawnEnv = "RTRACE_KEEP_PID_SPAWN"
)

// --keep-pid (uftrace record's): the program keeps the pid of the rtrace
// command, as a daemon's pid file or a shell's $! expect. The command
// starts a second rtrace, the tracer, with the same arguments and
// keepPidEnv, through a third that exits at once (keepPidSpawnEnv): the
// tracer is not the program's child, which a wait for any child (a
// shell's `wait`) would wait for forever; uftrace's recorder is. The
// command lets the tracer trace it (PR_SET_PTRACER, for Yama's
// ptrace_scope 1), waits until it has seized the command's thread, and
// execs the program, which the tracer follows from its exec on. The
// program's parent sees its status; the tracer writes the trace when it
// ends, and may still be at it when a shell prints its next prompt. Pipes
// order the steps: the command's go-ahead (fd 3 of the tracer), the
// tracer's "seized" (fd 4), and the tracer's pid (fd 5 of the spawner).

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
	pidR, pidW, err := os.Pipe()
	if err != nil {
		return 1, err
	}
	sp, err := rtraceAgain()
	if err != nil {
		return 1, err
	}
	sp.Env = append(os.Environ(), keepPidEnv+"="+strconv.Itoa(os.Getpid()), keepPidSpawnEnv+"=1")
	sp.Stdout, sp.Stderr = c.Stdout, c.Stderr // the tracer's messages; its stdin is /dev/null
	sp.ExtraFiles = []*os.File{goR, seizedW, pidW}
	if err := sp.Start(); err != nil {
		return 1, fmt.Errorf("--keep-pid: starting the tracer: %w", err)
	}
	goR.Close()
	seizedW.Close()
	pidW.Close()
	sp.Wait()
	b, _ := io.ReadAll(pidR)
	pidR.Close()
	tracerPid, err := strconv.Atoi(string(b))
	if err != nil {
		return 1, errors.New("--keep-pid: the tracer did not start")
	}
	unix.Prctl(unix.PR_SET_PTRACER, uintptr(tracerPid), 0, 0, 0) // EINVAL without Yama: nothing to allow
	goW.Write([]byte{1})
	goW.Close()
	if n, _ := seizedR.Read(make([]byte, 1)); n != 1 {
		return 1, errors.New("--keep-pid: the tracer did not start") // and said why
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

// spawnTracer is the spawner's side: start the tracer, tell the command
// its pid, and end, leaving it to init (or the nearest subreaper).
func spawnTracer() (int, error) {
	os.Unsetenv(keepPidSpawnEnv)
	unix.CloseOnExec(5) // not the tracer's: the command reads the pid to the end
	pidW := os.NewFile(5, "keep-pid tracer pid")
	defer pidW.Close()
	tr, err := rtraceAgain()
	if err != nil {
		return 1, err
	}
	tr.Stdout, tr.Stderr = os.Stdout, os.Stderr
	tr.ExtraFiles = []*os.File{os.NewFile(3, "keep-pid go-ahead"), os.NewFile(4, "keep-pid seized")}
	if err := tr.Start(); err != nil {
		return 1, fmt.Errorf("--keep-pid: starting the tracer: %w", err)
	}
	fmt.Fprint(pidW, tr.Process.Pid)
	return 0, nil
}

// rtraceAgain is a command that runs this rtrace again, with its
// arguments.
func rtraceAgain() (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("--keep-pid: finding rtrace's executable: %w", err)
	}
	return exec.Command(self, os.Args[1:]...), nil
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
