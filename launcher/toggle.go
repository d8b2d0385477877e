package launcher

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"rtrace/internal/trace"
	"rtrace/internal/wire"
	"rtrace/postproc"
	"rtrace/preproc"
)

// ToggleOptions are the options of `rtrace toggle`.
type ToggleOptions struct {
	Pid      int         // the target, or the rtrace tracing it
	Signal   unix.Signal // the toggle signal (0: the one the session uses)
	Follow   bool        // -f: the traced children too
	OutDir   string      // where a resource trace's raw file goes (default: the current directory)
	PostOpts string      // -P: post-process a resource trace into text
	Manage   bool        // -m: only signal; the recording writes the trace (sp-rtrace's managed mode)
	// Inherit: without OutDir and PostOpts, write where the recording's
	// own -o and -P say, as sp-rtrace's listener does (sp-rtrace -t).
	Inherit bool
	Timeout time.Duration
	Stderr  io.Writer
}

// Toggle flips tracing of a process running under `rtrace record` with
// -e or --disable (or attached). When tracing is off it makes the named
// pipe, sends the toggle signal and writes what the tracer streams until
// tracing is turned off again: a resource trace into a raw file, a
// function trace into a new window of its uftrace.data directory. When
// tracing is on it sends the signal, and the listening toggle finishes its
// output.
//
// One recording streams the whole traced process tree (each event carries
// its thread id), so toggling the process rtrace started toggles its
// children too: Follow (-f) needs no second signal.
func Toggle(o ToggleOptions) error {
	pid, sig, err := toggleTarget(o.Pid)
	if err != nil {
		return err
	}
	if o.Signal == 0 {
		o.Signal = sig
	}
	o.Pid = pid
	dir := FIFODir()
	if err := privateDir(dir); err != nil {
		return err
	}
	timeout := o.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	fifo := FIFOPath(o.Pid)
	_, on := readState(StatePath(o.Pid))
	if o.Manage {
		// sp-rtrace -m -t: no listener; the recording pre-processes the
		// window itself (as when none listens) and says where it wrote.
		if o.OutDir != "" || o.PostOpts != "" {
			fmt.Fprintf(o.Stderr, "rtrace: -m: the recording writes the trace with its own -o and -P; this toggle's are not used\n")
		}
		if err := unix.Kill(o.Pid, o.Signal); err != nil {
			return fmt.Errorf("signalling pid %d: %w", o.Pid, err)
		}
		if err := waitState(o.Pid, !on, timeout); err != nil {
			if on && unix.Kill(o.Pid, 0) == nil {
				// Off, and the recording still writing the window (a long
				// -P pass): it says where when done.
				fmt.Fprintf(o.Stderr, "rtrace: pid %d signalled to turn tracing off; its recording has not closed the window within %v (still writing its trace?): it says where when done\n", o.Pid, timeout)
				return nil
			}
			return err
		}
		fmt.Fprintf(o.Stderr, "rtrace: tracing of pid %d turned %s\n", o.Pid, onOff(!on))
		return nil
	}
	if on {
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
		return fmt.Errorf("pid %d did not start streaming within %v: is it running under rtrace with this toggle signal?", o.Pid, timeout)
	}
	hold.Close()
	defer in.Close()
	fmt.Fprintf(o.Stderr, "rtrace: tracing of pid %d turned on; run 'rtrace toggle %d' again to turn it off\n", o.Pid, o.Pid)
	paths, err := preprocStream(in, o.OutDir, nil, o.PostOpts, "", o.Stderr, o.Inherit)
	if len(paths) > 0 {
		fmt.Fprintf(o.Stderr, "rtrace: trace written to %s\n", strings.Join(paths, ", "))
	}
	return err
}

// toggleTarget finds the process to toggle from the pid given: a target
// of rtrace, or an rtrace tracing one; and the toggle signal it answers.
// It refuses a pid no rtrace traces, or one traced without toggling: the
// toggle signal would go to the program (SIGUSR1's default action kills).
func toggleTarget(pid int) (int, unix.Signal, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("pid %d: no such process", pid)
	}
	if f, ok := readState(TargetPath(pid)); ok && len(f) == 1 {
		// rtrace's own pid: toggle the program it traces.
		if target, err := strconv.Atoi(f[0]); err == nil && target > 0 {
			pid = target
			if status, err = os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err != nil {
				return 0, 0, fmt.Errorf("pid %d: no such process", pid)
			}
		}
	}
	tracer := tracerPid(status)
	if tracer == 0 {
		return 0, 0, fmt.Errorf("pid %d is not traced: start it with 'rtrace record --disable -- PROG' (or -g), or 'rtrace sp-rtrace -e MODULES -- PROG' (the toggle signal would kill it)", pid)
	}
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", tracer))
	ctl, ok := readState(ControlPath(pid))
	if !ok {
		if !strings.HasPrefix(filepath.Base(exe), "rtrace") {
			return 0, 0, fmt.Errorf("pid %d is traced by pid %d (%s), not by rtrace", pid, tracer, exe)
		}
		if err := privateDir(FIFODir()); err != nil {
			return 0, 0, fmt.Errorf("pid %d is traced by rtrace, which could not say how to toggle it: %w", pid, err)
		}
		return 0, 0, fmt.Errorf("pid %d is traced by rtrace without toggling: start it with --disable or -g (function tracing) or -e MODULES (resource tracing)", pid)
	}
	n := 0
	if len(ctl) == 1 {
		n, _ = strconv.Atoi(ctl[0])
	}
	if n <= 0 || n > 64 {
		return 0, 0, fmt.Errorf("%s: not a signal number", ControlPath(pid))
	}
	return pid, unix.Signal(n), nil
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

// Preproc runs the pre-processor on one stream. A resource trace goes
// into a raw file in dir, or into out when it is set, post-processed when
// postOpts is set. A function trace goes into a uftrace.data directory:
// funcDir, or else the one its header names, a new window of it (never
// overwriting), kept as its header's filters say. It returns the files
// (a resource trace: one per process of the stream) or the directory
// written (none with out).
func Preproc(in io.Reader, dir string, out io.Writer, postOpts, funcDir string, warn io.Writer) ([]string, error) {
	return preprocStream(in, dir, out, postOpts, funcDir, warn, false)
}

// preprocStream is Preproc; with inherit (sp-rtrace -t listening), a
// resource stream's own output settings (OCFG: the recording's -o DIR and
// -P OPTS) apply where dir and postOpts are "", as sp-rtrace's listener
// takes them (src/rtrace/listener.c, SP_RTRACE_PROTO_OUTPUT_SETTINGS): a
// directory only when absolute (an older rtrace sent its -o as given,
// relative to where it ran).
func preprocStream(in io.Reader, dir string, out io.Writer, postOpts, funcDir string, warn io.Writer, inherit bool) ([]string, error) {
	br := bufio.NewReaderSize(in, 64<<10)
	rd, err := wire.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("reading the stream: %w", err)
	}
	first, err := rd.Next()
	if err != nil {
		return nil, fmt.Errorf("reading the stream: %w", err)
	}
	hdr, ok := first.(*trace.Header)
	if !ok {
		return nil, fmt.Errorf("reading the stream: starts with %T, not a header", first)
	}
	if hdr.Functions {
		if postOpts != "" {
			return nil, fmt.Errorf("-P post-processes resource traces; this is a function trace")
		}
		filters, err := postproc.ParseFuncOptionString(hdr.PostOpts)
		if err != nil {
			return nil, fmt.Errorf("the stream's filters: %w", err)
		}
		target := funcDir
		if target == "" {
			target = hdr.OutDir
		}
		if target == "" {
			return nil, fmt.Errorf("the stream names no uftrace.data directory: give one with -d")
		}
		path, err := funcStreamToDir(hdr, rd, target, filters, warn)
		if path == "" {
			return nil, err
		}
		return []string{path}, err
	}
	if funcDir != "" {
		return nil, fmt.Errorf("-d writes a function trace's uftrace.data directory; this is a resource trace")
	}
	if inherit {
		if dir == "" && filepath.IsAbs(hdr.OutDir) {
			dir = hdr.OutDir
		}
		if postOpts == "" {
			postOpts = hdr.PostOpts
		}
	}
	o := preproc.Options{Dir: dir, Out: out}
	if postOpts != "" {
		if o.Post, err = postFunc(postOpts); err != nil {
			return nil, fmt.Errorf("-P %q: %w", postOpts, err)
		}
	}
	return preproc.RunFrom(hdr, rd, o)
}

// Agent does what uftrace's agent client does to the recording of pid (a
// target of rtrace, or the rtrace tracing one), started with -g, --disable
// or -e: with state "on" or "off" it turns tracing on or off, unless it is
// so already, and returns once the recording did (a window is written by
// the recording itself). With "" it only checks that the recording
// answers. A recording just started may not have announced itself yet: it
// is waited for, and its answer, up to wait each.
func Agent(pid int, state string, wait time.Duration) error {
	if state != "" && state != "on" && state != "off" {
		return fmt.Errorf("--trace=%s: want on or off", state)
	}
	deadline := time.Now().Add(wait)
	var target int
	var sig unix.Signal
	for {
		var err error
		if target, sig, err = toggleTarget(pid); err == nil {
			break
		}
		if time.Now().After(deadline) || unix.Kill(pid, 0) != nil {
			return err
		}
		time.Sleep(20 * time.Millisecond) // polling the announcement
	}
	_, on := readState(StatePath(target))
	if state == "" || (state == "on") == on {
		return nil
	}
	if err := unix.Kill(target, sig); err != nil {
		return fmt.Errorf("signalling pid %d: %w", target, err)
	}
	// As uftrace's client waits for the agent's answer.
	return waitState(target, state == "on", wait)
}

// waitState waits until the recording of pid has turned tracing on (or
// off): the state file, which it makes when a window opens and removes
// when the window is closed and its trace written.
func waitState(pid int, on bool, wait time.Duration) error {
	for end := time.Now().Add(wait); ; {
		if _, now := readState(StatePath(pid)); now == on {
			return nil
		}
		if time.Now().After(end) || unix.Kill(pid, 0) != nil {
			return fmt.Errorf("the recording of pid %d did not turn tracing %s within %v", pid, onOff(on), wait)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// onOff is tracing's state as a word.
func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}
