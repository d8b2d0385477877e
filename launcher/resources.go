package launcher

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
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
	stdout   io.Writer // the output when outDir is StdoutDir
	postOpts string
	post     func(io.Reader, io.Writer) error // nil: raw files
	manage   bool                             // --manage-preproc: never wait for a listener
	start    bool                             // tracing is on from the start: the first window opens then
	marks    *marks

	mu  sync.Mutex
	pid int // the first process
	// procs: the live processes, each with its image; order: their pids
	// as they appeared (a fork's child after its parent); threads: the
	// process of each thread that is not its process's leader. A window
	// starts with them, so that the pre-processor gives each process its
	// own file (preproc.RunFrom).
	procs   map[int]*resProc
	order   []int
	threads map[int]int
	// w is the window's writer: the wire stream into a listener's pipe
	// (out), or the pre-processor itself in the process (split).
	w        itemWriter
	out      io.WriteCloser
	split    *preproc.Splitter
	files    []string // raw or text files written
	errs     []error
	broken   bool          // the window's output failed: tell the tracer once
	listener listenerWatch // the listener's death closes its window
	listened int           // windows listeners took
	warn     io.Writer
	quiet    bool // -q: no word of the windows it writes
	calls    uint64
	lost     uint64 // calls dropped in the process (a full ring)
	// killed: rtrace killed the target (Ctrl-C): its end is no leak point.
	killed atomic.Bool
}

// resProc is a traced process as the resource stream knows it: its image
// (session id, executable, latest maps) and the process that forked it.
type resProc struct {
	sid, exe string
	maps     []byte
	ppid     int
}

func newResStream(c *config, m *marks) *resStream {
	return &resStream{mods: c.mods, depth: c.Backtrace, outDir: c.OutDir, postOpts: c.PostOpts, post: c.post, manage: c.Manage, start: c.onAtStart(), marks: m,
		procs: map[int]*resProc{}, threads: map[int]int{}, warn: c.Stderr, quiet: c.Quiet, stdout: c.Stdout}
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
			s.out = f
			s.listened++
			s.listener.watch(f, pid)
			s.marks.on(pid, s.pid)
			return s.begin()
		}
	}
	// In the process, the pre-processor takes the items as they are: no
	// stream to encode and decode again.
	o := preproc.Options{Dir: s.outDir, Post: s.post}
	if s.outDir == StdoutDir {
		o.Out = s.stdout
	}
	s.split = preproc.NewSplitter(o)
	s.marks.on(pid, s.pid)
	return s.begin()
}

// streamDir is the output directory a stream names (OCFG): dir made
// absolute (the current directory when ""), as sp-rtrace's launcher names
// its own, so that a listening toggle started elsewhere without -o
// writes where the recording would.
func streamDir(dir string) string {
	if dir == StdoutDir {
		return dir
	}
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

// itemWriter is where a window's items go (wire.Writer, preproc.Splitter).
type itemWriter interface {
	Write(trace.Item) error
	Calls([]trace.Call) error // calls of one thread
	Flush() error
}

// begin writes the initial state: header, modules, resources, the
// mappings known and a NLIB "*" for the pre-processor to rescan, then the
// traced processes: each one's session, the forks that made the others
// and their threads (each process's calls go to a file of its own).
func (s *resStream) begin() error {
	if s.split != nil {
		s.w = s.split
	} else {
		s.w = wire.NewWriter(s.out)
	}
	root := s.pid
	if s.procs[root] == nil && len(s.order) > 0 {
		root = s.order[0] // the first process is gone: its oldest live descendant
	}
	var exe string
	var maps []byte
	if p := s.procs[root]; p != nil {
		exe, maps = p.exe, p.maps
	}
	items := []trace.Item{&trace.Header{Version: wire.Version, Arch: "x86_64", Time: time.Now(), Process: exe, Pid: root,
		Depth: s.depth, Origin: "rtrace", OutDir: streamDir(s.outDir), PostOpts: s.postOpts},
		&trace.Module{ID: 0, Name: "main", Major: 1}}
	id := 0
	for i, m := range s.mods {
		items = append(items, &trace.Module{ID: 1 << i, Name: m.Name, Major: 1})
		for _, r := range m.Resources {
			id++
			items = append(items, &trace.Resource{ID: id, Name: r.Name, Desc: r.Desc, Refcount: r.Refcount})
		}
	}
	for _, m := range preproc.ExecMappings(maps) {
		items = append(items, &m)
	}
	items = append(items, &trace.Library{Name: "*"})
	for _, pid := range s.order {
		p := s.procs[pid]
		if pid != root {
			items = append(items, &trace.Task{Time: tracer.Now(), Tid: pid, Pid: pid, PPid: max(p.ppid, 1)})
		}
		items = append(items, s.session(pid, p))
	}
	for tid, pid := range s.threads {
		items = append(items, &trace.Task{Time: tracer.Now(), Tid: tid, Pid: pid})
	}
	for _, it := range items {
		if err := s.w.Write(it); err != nil {
			return s.fail(err)
		}
	}
	return s.fail(s.w.Flush())
}

// session is the SESS item of process pid: its image and maps.
func (s *resStream) session(pid int, p *resProc) *trace.Session {
	return &trace.Session{Time: tracer.Now(), Pid: pid, SID: p.sid, Exe: p.exe, Maps: p.maps}
}

// fail drops a window whose output broke (a listener gone): the target
// goes on untraced rather than blocked.
func (s *resStream) fail(err error) error {
	if err != nil {
		if s.out == nil || !readerGone(err) {
			s.errs = append(s.errs, fmt.Errorf("resource stream: %w", err))
		} else if s.warn != nil {
			fmt.Fprintln(s.warn, goneLine)
		}
		s.closeOut()
		s.broken = true
	}
	return err
}

// closeOut ends the window: NLIB "*" (mappings at the end), flush, close,
// and the pre-processor's files finished.
func (s *resStream) closeOut() {
	if s.w == nil && s.split == nil && s.out == nil {
		return
	}
	s.listener.stop()
	if s.w != nil {
		s.w.Write(&trace.Library{Name: "*"})
	}
	if ww, ok := s.w.(*wire.Writer); ok {
		if err := ww.Close(); err != nil && !(s.out != nil && readerGone(err)) {
			s.errs = append(s.errs, err)
		}
	}
	if s.out != nil {
		s.out.Close()
	}
	if s.split != nil {
		paths, err := s.split.Close()
		if s.outDir == StdoutDir && !slices.Contains(s.files, "standard output") {
			paths = append(paths, "standard output") // sp-rtrace's -o stdout: no file
		}
		s.mu.Lock()
		s.files = append(s.files, paths...)
		s.mu.Unlock()
		if err != nil {
			s.errs = append(s.errs, err)
		}
	}
	s.out, s.w, s.split = nil, nil, nil
	s.marks.off() // last: a managed toggle waits for this, the trace written
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

// Calls writes cs, calls of one thread (the drain's), as Call writes each.
func (s *resStream) Calls(cs []trace.Call) error {
	if s.broken {
		s.broken = false
		return tracer.ErrStreamClosed
	}
	if s.w == nil {
		return nil
	}
	s.calls += uint64(len(cs))
	if err := s.w.Calls(cs); err != nil {
		s.fail(err)
	}
	return nil
}

// Lane is the writer of tid's calls in the open window (the drain's
// lane, tracer.ResLaneSink), nil when there is none or it broke: the
// drain then hands the calls to Call and Calls, which say so.
func (s *resStream) Lane(tid int) *wire.Writer {
	if s.broken {
		return nil
	}
	if s.split != nil {
		if s.w == nil {
			return nil
		}
		return s.split.Lane(tid)
	}
	w, _ := s.w.(*wire.Writer)
	return w
}

// Laned counts n calls the drain wrote to a lane, and drops the window
// when writing them failed, as Calls does.
func (s *resStream) Laned(n int, err error) error {
	s.calls += uint64(n)
	if err != nil {
		s.fail(err)
	}
	return nil
}

// Lost records in the open window that n calls were dropped (a full ring
// in the process): the reports say so.
func (s *resStream) Lost(tid int, n uint64) error {
	s.lost += n
	s.write(&trace.Lost{Count: n})
	return nil
}

func (s *resStream) Toggle(on bool, pid int) error {
	if on {
		return s.open(pid)
	}
	inProcess, before := s.split != nil, len(s.files)
	s.closeOut()
	if s.quiet || !inProcess {
		return nil
	}
	s.mu.Lock()
	paths := s.files[before:]
	s.mu.Unlock()
	if len(paths) > 0 && s.warn != nil {
		// A listening toggle says where it wrote; so does the recording
		// for a window it pre-processed (sp-rtrace -m, or no listener).
		fmt.Fprintf(s.warn, "rtrace: trace written to %s\n", strings.Join(paths, ", "))
	}
	return nil
}

// Session: the first is the target's start; another is an exec, whose
// image gets a file of its own.
func (s *resStream) Session(ss tracer.Session) error {
	first := s.pid == 0
	if first {
		s.pid = ss.Pid
	}
	p := s.procs[ss.Pid]
	if p == nil {
		p = &resProc{}
		s.procs[ss.Pid] = p
		s.order = append(s.order, ss.Pid)
	}
	p.sid, p.exe, p.maps = ss.SID, ss.Exe, ss.Maps
	if first && s.start {
		return s.open(s.pid)
	}
	s.write(s.session(ss.Pid, p))
	return nil
}

// Maps: the maps of every process of session sid (a fork's child shares
// its parent's until it execs).
func (s *resStream) Maps(sid string, maps []byte) error {
	for _, pid := range s.order {
		if p := s.procs[pid]; p.sid == sid {
			p.maps = maps
			s.write(s.session(pid, p))
		}
	}
	return nil
}

func (s *resStream) Dlopen(uint64, int, string, uint64, string) error { return nil }

// Task: a thread started; its calls go to its process's file.
func (s *resStream) Task(ts uint64, tid, pid int) error {
	if tid == pid {
		return nil
	}
	s.threads[tid] = pid
	s.write(&trace.Task{Time: ts, Tid: tid, Pid: pid})
	return nil
}

// Fork: process ppid forked pid, a copy of it with its own resources.
func (s *resStream) Fork(ts uint64, pid, ppid int) error {
	p := &resProc{ppid: ppid}
	if pp := s.procs[ppid]; pp != nil {
		p.sid, p.exe, p.maps = pp.sid, pp.exe, pp.maps
	}
	if s.procs[pid] == nil {
		s.order = append(s.order, pid)
	}
	s.procs[pid] = p
	s.write(&trace.Task{Time: ts, Tid: pid, Pid: pid, PPid: ppid})
	return nil
}

// write writes it into an open window.
func (s *resStream) write(it trace.Item) {
	if s.w == nil {
		return
	}
	if err := s.w.Write(it); err != nil {
		s.fail(err)
	}
}

// Usage records, in an open window, process pid's peak RSS at its end
// (tracer.UsageSink), before its Exit ends its file.
func (s *resStream) Usage(pid int, peakRSS uint64) error {
	if s.procs[pid] != nil {
		s.write(&trace.Usage{Pid: pid, PeakRSS: peakRSS})
	}
	return nil
}

// HeapScan records, in an open window, a process's memory scan at its
// end (tracer.ScanSink), before its Exit ends its file.
func (s *resStream) HeapScan(items []trace.Item) error {
	for _, it := range items {
		pid := 0
		switch v := it.(type) {
		case *trace.HeapRegions:
			pid = v.Pid
		case *trace.HeapWords:
			pid = v.Pid
		case *trace.PageMap:
			pid = v.Pid
		case *trace.PageFlags:
			pid = v.Pid
		}
		if s.procs[pid] == nil {
			return nil
		}
		s.write(it)
	}
	return nil
}

// Exit records, in an open window, that a thread or a process ended. A
// process that ended on its own ends its file: what is still allocated
// then was never released (the pprof encoder's leak_* values need this).
// One rtrace killed (Ctrl-C) gets no such mark: its end is no leak point.
func (s *resStream) Exit(ts uint64, tid int) error {
	if pid, ok := s.threads[tid]; ok {
		delete(s.threads, tid)
		s.write(&trace.Task{Time: ts, Tid: tid, Pid: pid, Exit: true})
		return nil
	}
	if s.procs[tid] == nil {
		return nil
	}
	delete(s.procs, tid)
	s.order = slices.DeleteFunc(s.order, func(pid int) bool { return pid == tid })
	for t, pid := range s.threads {
		if pid == tid {
			delete(s.threads, t)
		}
	}
	if !s.killed.Load() {
		s.write(&trace.Task{Time: ts, Tid: tid, Pid: tid, Exit: true})
	}
	return nil
}

// finish ends the recording; it returns the files written and what failed.
func (s *resStream) finish() ([]string, error) {
	s.closeOut()
	s.mu.Lock()
	defer s.mu.Unlock()
	files := s.files
	switch {
	case s.listened == 1:
		files = append(files, "a window 'rtrace toggle' wrote")
	case s.listened > 1:
		files = append(files, fmt.Sprintf("%d windows 'rtrace toggle' wrote", s.listened))
	}
	return files, errors.Join(s.errs...)
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

// The peak RSS reaches the resource reports' summary.
var _ tracer.UsageSink = (*resStream)(nil)
var _ tracer.ScanSink = (*resStream)(nil)
