package launcher

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"rtrace/internal/elfx"
	"rtrace/internal/trace"
	"rtrace/internal/wire"
	"rtrace/preproc"
	"rtrace/tracer"
)

// resStream is the resource half of a recording: the wire stream of one
// tracing window (from --start or a toggle on, to the end or a toggle
// off), written into an in-process pre-processor or the named pipe of a
// listening `rtrace toggle`.
type resStream struct {
	mods     []*tracer.ResModule
	depth    int
	outDir   string
	postOpts string
	post     func(io.Reader, io.Writer) error // nil: raw files
	manage   bool                             // --manage-preproc: never wait for a listener
	start    bool                             // --start: the first window opens at the start

	mu      sync.Mutex
	pid     int
	process string
	maps    []byte // the target's latest maps
	w       *wire.Writer
	out     io.WriteCloser
	done    chan error // the in-process pre-processor's result
	files   []string   // raw or text files written
	errs    []error
	broken  bool     // the window's output failed: tell the tracer once
	markers []string // the state files of the open window
}

// open starts a window: the pipe of a listener when one waits (the
// FIFO rtrace toggle made), else an in-process pre-processor.
func (s *resStream) open(pid int) error {
	for _, p := range []int{pid, s.pid} {
		fifo := FIFOPath(p)
		if s.manage {
			break
		}
		if fi, err := os.Lstat(fifo); err == nil && fi.Mode()&os.ModeNamedPipe != 0 {
			f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
			if err != nil {
				return fmt.Errorf("opening the listener's pipe %s: %w", fifo, err)
			}
			// Blocking writes from here on: the listener reads at its pace.
			if err := unix.SetNonblock(int(f.Fd()), false); err != nil {
				f.Close()
				return err
			}
			s.out, s.done = f, nil
			s.mark(pid)
			return s.begin()
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		path, err := preproc.Run(r, preproc.Options{Dir: s.outDir, Post: s.post})
		io.Copy(io.Discard, r) // never block the tracer on a failed stage
		r.Close()
		s.mu.Lock()
		if path != "" {
			s.files = append(s.files, path)
		}
		s.mu.Unlock()
		done <- err
	}()
	s.out, s.done = w, done
	s.mark(pid)
	return s.begin()
}

// mark records that a window is open for pid and the root, in the files
// `rtrace toggle` reads to know whether tracing is on.
func (s *resStream) mark(pid int) {
	if privateDir(FIFODir()) != nil {
		return
	}
	for _, p := range []int{pid, s.pid} {
		m := StatePath(p)
		if f, err := os.OpenFile(m, os.O_CREATE|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600); err == nil {
			f.Close()
			s.markers = append(s.markers, m)
		}
	}
}

// StatePath is the file that exists while tracing of pid is on.
func StatePath(pid int) string { return FIFOPath(pid) + ".on" }

// begin writes the initial state: header, modules, resources, the mappings
// known and a NLIB "*" for the pre-processor to rescan.
func (s *resStream) begin() error {
	s.w = wire.NewWriter(s.out)
	items := []trace.Item{&trace.Header{Version: "3.0", Arch: "x86_64", Time: time.Now(), Process: s.process, Pid: s.pid,
		Depth: s.depth, Origin: "rtrace", OutDir: s.outDir, PostOpts: s.postOpts},
		&trace.Module{ID: 0, Name: "main", Major: 1}}
	id := 0
	for i, m := range s.mods {
		items = append(items, &trace.Module{ID: 1 << i, Name: m.Name, Major: 1})
		for _, r := range m.Resources {
			id++
			items = append(items, &trace.Resource{ID: id, Name: r.Name, Desc: r.Desc, Refcount: r.Refcount})
		}
	}
	for _, m := range preproc.ExecMappings(s.maps) {
		items = append(items, &m)
	}
	items = append(items, &trace.Library{Name: "*"})
	for _, it := range items {
		if err := s.w.Write(it); err != nil {
			return s.fail(err)
		}
	}
	return s.fail(s.w.Flush())
}

// fail drops a window whose output broke (a listener gone): the target
// goes on untraced rather than blocked.
func (s *resStream) fail(err error) error {
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("resource stream: %w", err))
		s.closeOut()
		s.broken = true
	}
	return err
}

// closeOut ends the window: NLIB "*" (mappings at the end), flush, close,
// and wait for the in-process pre-processor to finish its file.
func (s *resStream) closeOut() {
	for _, m := range s.markers {
		os.Remove(m)
	}
	s.markers = nil
	if s.out == nil {
		return
	}
	if s.w != nil {
		s.w.Write(&trace.Library{Name: "*"})
		if err := s.w.Close(); err != nil {
			s.errs = append(s.errs, err)
		}
	}
	s.out.Close()
	if s.done != nil {
		if err := <-s.done; err != nil {
			s.errs = append(s.errs, err)
		}
	}
	s.out, s.w, s.done = nil, nil, nil
}

func (s *resStream) call(c *trace.Call) error {
	if s.broken {
		s.broken = false
		return tracer.ErrStreamClosed
	}
	if s.w == nil {
		return nil
	}
	if err := s.w.Write(c); err != nil {
		s.fail(err)
	}
	return nil
}

func (s *resStream) toggle(on bool, pid int) error {
	if on {
		return s.open(pid)
	}
	s.closeOut()
	return nil
}

// exited records, in an open window, that the process ended on its own:
// what is still allocated then was never released (the pprof encoder's
// leak_* values need this).
func (s *resStream) exited() {
	if s.w == nil {
		return
	}
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	if err := s.w.Write(&trace.Task{Time: uint64(ts.Nano()), Tid: s.pid, Pid: s.pid, Exit: true}); err != nil {
		s.fail(err)
	}
}

// close ends the recording; it returns the files written and what failed.
func (s *resStream) close() ([]string, error) {
	s.closeOut()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.files, errors.Join(s.errs...)
}

// FIFODir is the directory of the named pipes `rtrace toggle` listens on:
// one per user, mode 0700.
func FIFODir() string { return filepath.Join(os.TempDir(), "rtrace-"+strconv.Itoa(os.Getuid())) }

// FIFOPath is the named pipe for target pid.
func FIFOPath(pid int) string { return filepath.Join(FIFODir(), strconv.Itoa(pid)) }

// resSink adds the resource stream to another sink (the uftrace one, or
// nopSink for a resource-only recording).
type resSink struct {
	tracer.Sink
	res *resStream
}

// Session: the first is the target's start, where a --start window opens.
func (s resSink) Session(ss tracer.Session) error {
	first := s.res.pid == 0
	if first {
		s.res.pid, s.res.process = ss.Pid, ss.Exe
	}
	s.res.maps = ss.Maps
	if first && s.res.start {
		if err := s.res.open(s.res.pid); err != nil {
			return err
		}
	}
	return s.Sink.Session(ss)
}

func (s resSink) Maps(sid string, maps []byte) error {
	s.res.maps = maps
	if s.res.w != nil {
		for _, m := range preproc.ExecMappings(maps) {
			s.res.w.Write(&m)
		}
	}
	return s.Sink.Maps(sid, maps)
}

func (s resSink) Call(c *trace.Call) error      { return s.res.call(c) }
func (s resSink) Toggle(on bool, pid int) error { return s.res.toggle(on, pid) }

// nopSink records nothing: the function-trace half of a resource-only run.
type nopSink struct{}

func (nopSink) Session(tracer.Session) error                     { return nil }
func (nopSink) Maps(string, []byte) error                        { return nil }
func (nopSink) Module(string, string, *elfx.File) error          { return nil }
func (nopSink) Dlopen(uint64, int, string, uint64, string) error { return nil }
func (nopSink) Event(uint64, string) error                       { return nil }
func (nopSink) Probe(uint64, int, string, []string) error        { return nil }
func (nopSink) Task(uint64, int, int) error                      { return nil }
func (nopSink) Fork(uint64, int, int) error                      { return nil }
func (nopSink) Records(int, []tracer.Rec) error                  { return nil }
func (nopSink) Call(*trace.Call) error                           { return nil }
func (nopSink) Toggle(bool, int) error                           { return nil }

// resSpecs are the uftrace argument and return-value specs of the
// selected modules' functions, so `uftrace replay` shows malloc(100) =
// 0x55d0c2a0 in a -d recording.
func resSpecs(mods []*tracer.ResModule) (args, rets []string) {
	for _, m := range mods {
		for _, f := range m.Funcs {
			pat := "^" + regexp.QuoteMeta(f.Display()) + "$"
			if a := f.UftraceArgs(); len(a) > 0 {
				args = append(args, pat+"@"+strings.Join(a, ","))
			}
			if !f.Void() {
				rets = append(rets, pat+"@retval/x")
			}
		}
	}
	return args, rets
}

func tracerModules() []tracer.ResModule { return tracer.ResModules() }
