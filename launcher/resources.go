package launcher

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"rtrace/internal/trace"
	"rtrace/internal/uftrace"
	"rtrace/internal/wire"
	"rtrace/preproc"
	"rtrace/tracer"
)

// resStream is the resource half of a session, the tracer's ResSink: the
// wire stream of each tracing window (from --start or a toggle on, to the
// end or a toggle off), written into an in-process pre-processor or the
// named pipe of a listening `rtrace toggle`.
type resStream struct {
	mods     []*tracer.ResModule
	depth    int
	outDir   string
	postOpts string
	post     func(io.Reader, io.Writer) error // nil: raw files
	manage   bool                             // --manage-preproc: never wait for a listener
	start    bool                             // tracing is on from the start: the first window opens then
	marks    *marks

	mu      sync.Mutex
	pid     int
	process string
	maps    []byte // the target's latest maps
	w       *wire.Writer
	out     io.WriteCloser
	done    chan error // the in-process pre-processor's result
	files   []string   // raw or text files written
	errs    []error
	broken  bool // the window's output failed: tell the tracer once
	calls   uint64
	// killed: rtrace killed the target (Ctrl-C): its end is no leak point.
	killed atomic.Bool
}

func newResStream(c *config, m *marks) *resStream {
	return &resStream{mods: c.mods, depth: c.Backtrace, outDir: c.OutDir, postOpts: c.PostOpts, post: c.post, manage: c.Manage, start: c.onAtStart(), marks: m}
}

// open starts a window: the pipe of a listener when one waits (the
// FIFO rtrace toggle made), else an in-process pre-processor.
func (s *resStream) open(pid int) error {
	if !s.manage {
		f, err := openListener(pid, s.pid)
		if err != nil {
			return err
		}
		if f != nil {
			s.out, s.done = f, nil
			s.marks.on(pid, s.pid)
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
	s.marks.on(pid, s.pid)
	return s.begin()
}

// begin writes the initial state: header, modules, resources, the mappings
// known and a NLIB "*" for the pre-processor to rescan.
func (s *resStream) begin() error {
	s.w = wire.NewWriter(s.out)
	items := []trace.Item{&trace.Header{Version: wire.Version, Arch: "x86_64", Time: time.Now(), Process: s.process, Pid: s.pid,
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
	if s.out == nil {
		return
	}
	s.marks.off()
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

func (s *resStream) Call(c *trace.Call) error {
	if s.broken {
		s.broken = false
		return tracer.ErrStreamClosed
	}
	if s.w == nil {
		return nil
	}
	s.calls++
	if err := s.w.Write(c); err != nil {
		s.fail(err)
	}
	return nil
}

func (s *resStream) Toggle(on bool, pid int) error {
	if on {
		return s.open(pid)
	}
	s.closeOut()
	return nil
}

// Session: the first is the target's start.
func (s *resStream) Session(ss tracer.Session) error {
	first := s.pid == 0
	if first {
		s.pid, s.process = ss.Pid, ss.Exe
	}
	s.maps = ss.Maps
	if first && s.start {
		return s.open(s.pid)
	}
	return nil
}

func (s *resStream) Maps(sid string, maps []byte) error {
	s.maps = maps
	if s.w != nil {
		for _, m := range preproc.ExecMappings(maps) {
			s.w.Write(&m)
		}
	}
	return nil
}

func (s *resStream) Dlopen(uint64, int, string, uint64, string) error { return nil }
func (s *resStream) Task(uint64, int, int) error                      { return nil }
func (s *resStream) Fork(uint64, int, int) error                      { return nil }

// Exit records, in an open window, that the process ended on its own:
// what is still allocated then was never released (the pprof encoder's
// leak_* values need this).
func (s *resStream) Exit(ts uint64, tid int) error {
	if s.w == nil || tid != s.pid || s.killed.Load() {
		return nil
	}
	if err := s.w.Write(&trace.Task{Time: ts, Tid: tid, Pid: tid, Exit: true}); err != nil {
		s.fail(err)
	}
	return nil
}

// finish ends the recording; it returns the files written and what failed.
func (s *resStream) finish() ([]string, error) {
	s.closeOut()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.files, errors.Join(s.errs...)
}

// globQuote escapes what path.Match and fnmatch(3) read as glob syntax.
var globQuote = strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`)

// resSpecs are the uftrace argument and return-value specs of the
// selected modules' functions, so `uftrace replay` shows malloc(100) =
// 0x55d0c2a0 in a -d recording; each names one function exactly, in the
// pattern kind of --match.
func resSpecs(mods []*tracer.ResModule, kind string) (args, rets []string) {
	for _, m := range mods {
		for _, f := range m.Funcs {
			pat := "^" + regexp.QuoteMeta(f.Display()) + "$"
			if kind == uftrace.PatternGlob { // --match=glob: the name, its glob characters escaped
				pat = globQuote.Replace(f.Display())
			}
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
