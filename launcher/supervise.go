package launcher

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// supervisorEnv names, in the environment of the tracer process of
// `rtrace attach`, the pid of the rtrace command that started it.
const supervisorEnv = "RTRACE_SUPERVISOR"

// supervisedSignals are the signals the rtrace command passes on to its
// tracer: those that end a session, and the toggle signal when tracing
// can be toggled (any other signal ends the command with its default
// action, and the tracer detaches).
func supervisedSignals(o Options) []os.Signal {
	sigs := []os.Signal{unix.SIGINT, unix.SIGTERM, unix.SIGHUP}
	if len(o.Modules) > 0 || len(o.Audit) > 0 || o.Disable || o.Agent {
		sigs = append(sigs, cmp.Or(o.ToggleSignal, unix.SIGUSR1))
	}
	return sigs
}

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
func supervise(o Options) (int, error) {
	// The death signal follows the thread that forked the child, not the
	// process (prctl(2)): this one stays until the end.
	runtime.LockOSThread()
	// This very executable, even if its file was replaced or removed.
	cmd := exec.Command("/proc/self/exe", os.Args[1:]...)
	cmd.Args[0] = os.Args[0]
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, supervisorEnv+"=") {
			env = append(env, e)
		}
	}
	cmd.Env = append(env, supervisorEnv+"="+strconv.Itoa(os.Getpid()))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGHUP}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, supervisedSignals(o)...) // before the start: none is lost
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
	err := cmd.Wait()
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
// (0: none), which `rtrace toggle` may be given for the session's. The
// variable counts only from the parent: one inherited from elsewhere
// does not stop a command from supervising.
func supervisorPid() int {
	pid, _ := strconv.Atoi(os.Getenv(supervisorEnv))
	if pid <= 0 || pid != os.Getppid() {
		return 0
	}
	return pid
}

// Supervising reports whether this process is the command of `rtrace
// attach` that will start a tracer (args: rtrace's arguments), so that
// what only the tracer should do (write RTRACE_CPUPROFILE's profile) is
// left to it.
func Supervising(args []string) bool {
	return len(args) > 1 && args[1] == "attach" && supervisorPid() == 0
}
