package launcher

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"rtrace/tracer"
)

// FIFODir is the directory of the named pipes `rtrace toggle` listens on:
// one per user, mode 0700.
func FIFODir() string { return filepath.Join(os.TempDir(), "rtrace-"+strconv.Itoa(os.Getuid())) }

// FIFOPath is the named pipe for target pid.
func FIFOPath(pid int) string { return filepath.Join(FIFODir(), strconv.Itoa(pid)) }

// StatePath is the file that exists while tracing of pid is on.
func StatePath(pid int) string { return FIFOPath(pid) + ".on" }

// TargetPath is the file naming, while `rtrace record` runs, the pid of the
// program it traces: `rtrace toggle` takes rtrace's pid too.
func TargetPath(rtracePid int) string { return FIFOPath(rtracePid) + ".target" }

// openListener opens the named pipe of a listening `rtrace toggle` for the
// first of pids that has one, nil when none waits.
func openListener(pids ...int) (*os.File, error) {
	for _, p := range pids {
		fifo := FIFOPath(p)
		fi, err := os.Lstat(fifo)
		if err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
			continue
		}
		// Non-blocking: a pipe nobody reads fails at once (ENXIO)
		// instead of blocking the tracer.
		f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err != nil {
			return nil, fmt.Errorf("opening the listener's pipe %s: %w", fifo, err)
		}
		// Blocking writes from here on: the listener reads at its pace.
		if err := unix.SetNonblock(int(f.Fd()), false); err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
	return nil, nil
}

// marks keeps the state files `rtrace toggle` reads to know whether
// tracing is on: they exist while a window of any stream is open.
type marks struct {
	mu    sync.Mutex
	open  int
	files []string
}

// on counts one stream's window open; the first creates the files of pids.
func (m *marks) on(pids ...int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.open++
	if m.open > 1 || privateDir(FIFODir()) != nil {
		return
	}
	for _, p := range pids {
		f := StatePath(p)
		if writeState(f) == nil {
			m.files = append(m.files, f)
		}
	}
}

// clearStale removes the state file of pid, a new target, unless a window
// is open: one that exists then was left by an rtrace that ended without
// removing it (killed), for an earlier process with the same pid, and
// `rtrace toggle` would take tracing for on and turn it off. So is a
// target file of pid (an rtrace's, naming its program) when rtrace
// launched pid: a new process is no rtrace yet, and toggle would signal
// that program. An attached pid may be a live rtrace: its file stays.
func (m *marks) clearStale(pid int, launched bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.open == 0 {
		os.Remove(StatePath(pid))
	}
	if launched {
		os.Remove(TargetPath(pid))
	}
}

// off counts one stream's window closed; the last removes the files.
func (m *marks) off() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.open == 0 {
		return
	}
	m.open--
	if m.open > 0 {
		return
	}
	for _, f := range m.files {
		os.Remove(f)
	}
	m.files = nil
}

// watchReader calls gone, once, when the reading end of the pipe f is
// closed (the listening `rtrace toggle` died: poll(2) reports POLLERR on
// a pipe's writing end then), until the function it returns is called;
// that function must be called before f is closed.
func watchReader(f *os.File, gone func()) (stop func()) {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return func() {}
	}
	raw, err := f.SyscallConn()
	if err != nil {
		unix.Close(efd)
		return func() {}
	}
	var fd int
	raw.Control(func(u uintptr) { fd = int(u) })
	done := make(chan struct{})
	go func() {
		defer close(done)
		pfd := []unix.PollFd{{Fd: int32(fd)}, {Fd: int32(efd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(pfd, -1); err == unix.EINTR {
				continue
			} else if err != nil {
				return
			}
			if pfd[1].Revents != 0 {
				return
			}
			if pfd[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0 {
				gone()
				return
			}
		}
	}()
	return func() {
		unix.Write(efd, []byte{1, 0, 0, 0, 0, 0, 0, 0})
		<-done
		unix.Close(efd)
	}
}

// listenerWatch watches the pipe of a listener's window: when its reader
// dies, gone (Tracer.CloseWindow) closes the window of process pid at
// once. The function and resource streams each have one.
type listenerWatch struct {
	gone    func(pid int)
	unwatch func()
}

// watch starts watching f, the window of process pid (nothing without
// gone).
func (w *listenerWatch) watch(f *os.File, pid int) {
	if w.gone != nil {
		w.unwatch = watchReader(f, func() { w.gone(pid) })
	}
}

// stop stops watching, before the window's pipe is closed.
func (w *listenerWatch) stop() {
	if w.unwatch != nil {
		w.unwatch()
		w.unwatch = nil
	}
}

// goneLine is what rtrace says when a listener's window ends because the
// listener is gone; the tracer says the same when it closes the window
// first (Tracer.CloseWindow).
const goneLine = tracer.WindowGoneLine

// readerGone reports whether err is a write to a pipe whose reader is
// gone: a listener's window ended by the listener, not a failure of the
// session (the tracer says so when it turns tracing off).
func readerGone(err error) bool { return errors.Is(err, unix.EPIPE) }
