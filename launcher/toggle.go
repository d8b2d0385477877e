package launcher

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"rtrace/preproc"
)

// ToggleOptions are the options of `rtrace toggle`.
type ToggleOptions struct {
	Pid      int
	Signal   unix.Signal // the target's toggle signal (SIGUSR1)
	Follow   bool        // -f: the traced children too
	OutDir   string      // where the raw file goes (default: the current directory)
	PostOpts string      // -P: post-process into text
	Timeout  time.Duration
	Stderr   io.Writer
}

// Toggle flips resource tracing of a process running under `rtrace record
// -e`. When tracing is off it makes the named pipe, sends the toggle
// signal and writes what the tracer streams into a raw file until tracing
// is turned off again; when it is on (the pipe exists) it sends the
// signal, and the listening toggle finishes its file.
//
// One recording streams the calls of the whole traced process tree (each
// call carries its thread id), so toggling the process rtrace started
// toggles its children too: Follow (-f) needs no second signal.
func Toggle(o ToggleOptions) error { return toggleOne(o) }

func toggleOne(o ToggleOptions) error {
	if err := checkTraced(o.Pid); err != nil {
		return err
	}
	dir := FIFODir()
	if err := privateDir(dir); err != nil {
		return err
	}
	fifo := FIFOPath(o.Pid)
	if _, err := os.Lstat(StatePath(o.Pid)); err == nil {
		// Tracing is on (rtrace keeps this file while a window is open):
		// turn it off; a listening toggle then sees the end of its stream.
		if err := unix.Kill(o.Pid, o.Signal); err != nil {
			return fmt.Errorf("signalling pid %d: %w", o.Pid, err)
		}
		fmt.Fprintf(o.Stderr, "rtrace: tracing of pid %d turned off\n", o.Pid)
		return nil
	}
	if fi, err := os.Lstat(fifo); err == nil {
		if fi.Mode()&os.ModeNamedPipe == 0 {
			return fmt.Errorf("%s exists and is not a named pipe: remove it", fifo)
		}
		os.Remove(fifo) // stale: its listener is gone
	}
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		return fmt.Errorf("creating the named pipe %s: %w", fifo, err)
	}
	defer os.Remove(fifo)
	// Hold a reader before the signal, so the tracer's non-blocking open
	// finds one; then a blocking open returns once the tracer has opened.
	hold, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("opening the named pipe %s: %w", fifo, err)
	}
	if err := unix.Kill(o.Pid, o.Signal); err != nil {
		hold.Close()
		return fmt.Errorf("signalling pid %d: %w", o.Pid, err)
	}
	opened := make(chan *os.File, 1)
	go func() {
		f, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			f = nil
		}
		opened <- f
	}()
	timeout := o.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	var in *os.File
	select {
	case in = <-opened:
	case <-time.After(timeout):
	}
	if in == nil {
		// Unblock the opener before giving up.
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		hold.Close()
		return fmt.Errorf("pid %d did not start streaming within %v: is it running under 'rtrace record -e' with this toggle signal?", o.Pid, timeout)
	}
	hold.Close()
	defer in.Close()
	fmt.Fprintf(o.Stderr, "rtrace: tracing of pid %d turned on; run 'rtrace toggle %d' again to turn it off\n", o.Pid, o.Pid)
	po := preproc.Options{Dir: o.OutDir}
	if o.PostOpts != "" {
		if po.Post, err = postFunc(o.PostOpts); err != nil {
			return fmt.Errorf("-P %q: %w", o.PostOpts, err)
		}
	}
	path, err := preproc.Run(in, po)
	if path != "" {
		fmt.Fprintf(o.Stderr, "rtrace: resource trace written to %s\n", path)
	}
	return err
}

// privateDir makes dir (mode 0700) or checks that the one there is a real
// directory of ours that nobody else can enter: the pipes in it carry the
// target's data and must not be planted by another user.
func privateDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("checking %s: %w", dir, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Getuid() || st.Mode&0o077 != 0 {
		return fmt.Errorf("%s must be a directory owned by you with mode 0700 (it is not): remove it", dir)
	}
	return nil
}

// checkTraced refuses a pid that no rtrace traces: the toggle signal
// would kill it (SIGUSR1's default action).
func checkTraced(pid int) error {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return fmt.Errorf("pid %d: no such process", pid)
	}
	tracer := 0
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "TracerPid:"); ok {
			tracer, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if tracer == 0 {
		return fmt.Errorf("pid %d is not traced: start it with 'rtrace record -e MODULES -- PROG' (the toggle signal would kill it)", pid)
	}
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", tracer))
	if !strings.HasPrefix(filepath.Base(exe), "rtrace") {
		return fmt.Errorf("pid %d is traced by pid %d (%s), not by rtrace", pid, tracer, exe)
	}
	return nil
}

// Preproc runs the pre-processor on one stream: into a file in dir, or
// into out when it is set; post-processed when postOpts is set.
func Preproc(in io.Reader, dir string, out io.Writer, postOpts string) (string, error) {
	o := preproc.Options{Dir: dir, Out: out}
	if postOpts != "" {
		var err error
		if o.Post, err = postFunc(postOpts); err != nil {
			return "", fmt.Errorf("-P %q: %w", postOpts, err)
		}
	}
	return preproc.Run(in, o)
}
