package launcher

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// supervisorEnv names, in the environment of the tracer process of
// `rtrace attach`, the pid of the rtrace command that started it.
const supervisorEnv = "RTRACE_SUPERVISOR"

// supervisedSignals are the signals the rtrace command passes on to its
// tracer: those that end a session, and the toggle signals.
var supervisedSignals = []os.Signal{unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGUSR1, unix.SIGUSR2}

// `rtrace attach` runs the tracer in a child process of the command the
// user started. The command only passes on signals and waits; the child,
// the tracer, gets SIGHUP when the command dies (PR_SET_PDEATHSIG), even
// by SIGKILL, and then detaches as at a Ctrl-C: every byte restored, the
// trace finished. Not SIGINT: the death signal comes once for each of the
// command's threads the child is passed on to as they exit (prctl(2): the
// parent is a thread), and a second or third SIGINT would cut the trace
// or abandon the process; a repeated SIGHUP changes nothing. A tracer
// killed itself detaches nothing: the kernel lets its tracees go with
// rtrace's code in them (docs/RELIABILITY.md). The child has its own
// process group, so that a Ctrl-C at the terminal, or timeout(1)'s signal
// to its group, reaches it once, through the command.

// supervise is the command's side: start the tracer, pass signals on,
// and exit as it does.
func supervise() (int, error) {
	// The death signal follows the thread that forked the child, not the
	// process (prctl(2)): this one stays until the end.
	runtime.LockOSThread()
	self, err := os.Executable()
	if err != nil {
		return 1, fmt.Errorf("finding rtrace's executable: %w", err)
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Env = append(os.Environ(), supervisorEnv+"="+strconv.Itoa(os.Getpid()))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGHUP}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, supervisedSignals...) // before the start: none is lost
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 1, fmt.Errorf("starting the tracer: %w", err)
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case sig := <-sigs:
				cmd.Process.Signal(sig)
			case <-done:
				return
			}
		}
	}()
	err = cmd.Wait()
	close(done)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), fmt.Errorf("the tracer (pid %d) was killed by %v: the process may be left with rtrace's code in it (docs/RELIABILITY.md)", cmd.Process.Pid, ws.Signal())
		}
		return ee.ExitCode(), nil // the tracer said why
	}
	if err != nil {
		return 1, fmt.Errorf("the tracer: %w", err)
	}
	return 0, nil
}

// supervisorPid is the pid of the rtrace command that started this tracer
// (0: none), which `rtrace toggle` may be given for the session's.
func supervisorPid() int {
	pid, _ := strconv.Atoi(os.Getenv(supervisorEnv))
	return pid
}
