package launcher

import (
	"sync/atomic"

	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"rtrace/internal/perfcomm"
	"rtrace/internal/trace"
	"rtrace/internal/uftrace"
	"rtrace/internal/wire"
	"rtrace/postproc"
	"rtrace/tracer"
)

// funcStream is the function-trace half of a session, the tracer's
// FuncSink. Each tracing window (the whole run, or from a toggle on to a
// toggle off) goes through its own pipeline into its own uftrace.data
// directory: in process by default, or, when a `rtrace toggle` listens,
// as a wire stream over its named pipe. Between windows it keeps what a
// new window must start with: the sessions and their maps, the tasks
// alive, the function and event names.
type funcStream struct {
	dir     string               // the uftrace.data directory ("": raw stream only)
	rawDir  string               // where the raw stream goes ("": none)
	filters postproc.FuncOptions // what the trace keeps
	// listen: a window may go to a listening `rtrace toggle`.
	listen bool
	on     bool // tracing is on from the start: the first window opens then
	warn   io.Writer
	marks  *marks
	info   uftrace.Info // the recorder's info at the start

	root     int // the pid traced (its first session)
	process  string
	sessions map[string]*trace.Session // latest maps of each
	procs    []*funcProc               // in order of appearance
	tasks    map[int]*trace.Task       // threads alive, by tid
	symbols  map[string][]trace.Func   // by session
	events   []trace.EventName

	win      trace.Writer  // the open window, nil when tracing is off
	winOut   io.Closer     // a listener's pipe
	listener listenerWatch // the listener's death closes its window
	chain    *funcChain    // an in-process window's pipeline
	started  time.Time     // of the open window
	outs     []string      // directories, raw files and listener windows written
	dirs     []string      // the uftrace.data directories written
	errs     []error
	records  uint64
	// removed is closed once the trace moved aside before is deleted.
	removed <-chan struct{}
	// perf records the task name changes (-E linux:task-name), written
	// into each window's directory as it closes; set once the program
	// runs (session.started).
	perf atomic.Pointer[perfcomm.Recorder]
}

// funcProc is a traced process: its session, and its parent when forked.
type funcProc struct {
	pid, ppid int
	sid       string
	time      uint64 // of its start or its exec
	exec      bool   // its session is its own (the target, or an exec)
	alive     bool
	task      bool // its main thread's TASK came (a session's comes after it)
}

func newFuncStream(c *config, m *marks, info uftrace.Info) *funcStream {
	return &funcStream{dir: c.funcDir, rawDir: c.rawDir, filters: c.funcs, listen: !c.Manage && len(c.mods) == 0, on: c.onAtStart(),
		warn: c.Stderr, marks: m, info: info, sessions: map[string]*trace.Session{}, tasks: map[int]*trace.Task{},
		symbols: map[string][]trace.Func{}}
}

// proc returns the process pid, nil when unknown.
func (s *funcStream) proc(pid int) *funcProc {
	for i := len(s.procs) - 1; i >= 0; i-- {
		if s.procs[i].pid == pid && s.procs[i].alive {
			return s.procs[i]
		}
	}
	return nil
}

// write hands an item to the open window. A window whose pipeline fails
// is closed: the error is reported at the end, the target goes on.
func (s *funcStream) write(it trace.Item) error {
	if s.win == nil {
		return nil
	}
	if err := s.win.Write(it); err != nil {
		if s.winOut == nil || !readerGone(err) {
			s.errs = append(s.errs, fmt.Errorf("function trace: %w", err))
		} else {
			fmt.Fprintln(s.warn, goneLine)
		}
		s.closeWindow(nil)
		return tracer.ErrStreamClosed
	}
	return nil
}

func (s *funcStream) Session(ss tracer.Session) error {
	item := &trace.Session{Time: ss.Time, Pid: ss.Pid, SID: ss.SID, Exe: ss.Exe, Maps: slices.Clone(ss.Maps)}
	first := s.root == 0
	if first {
		s.root, s.process = ss.Pid, ss.Exe
	}
	if p := s.proc(ss.Pid); p != nil {
		p.alive = false // an exec: the process goes on in a new session
		for tid, t := range s.tasks {
			if t.Pid == ss.Pid {
				delete(s.tasks, tid) // the exec ended its other threads
			}
		}
	}
	s.sessions[ss.SID] = item
	s.procs = append(s.procs, &funcProc{pid: ss.Pid, sid: ss.SID, time: ss.Time, exec: true, alive: true})
	if !first {
		return s.write(item)
	}
	// The target runs: an older trace of the directory moves aside, as
	// uftrace record does, and the first window opens if tracing is on.
	if s.dir != "" {
		var err error
		if s.removed, err = moveAside(s.dir); err != nil {
			return fmt.Errorf("moving the old trace aside: %w", err)
		}
	}
	if s.on {
		return s.openWindow(ss.Pid)
	}
	return nil
}

func (s *funcStream) Maps(sid string, maps []byte) error {
	if ss := s.sessions[sid]; ss != nil {
		ss.Maps = slices.Clone(maps)
	}
	return s.write(&trace.Maps{SID: sid, Maps: maps})
}

func (s *funcStream) Dlopen(ts uint64, tid int, sid string, base uint64, path string) error {
	return s.write(&trace.Dlopen{Time: ts, Tid: tid, SID: sid, Base: base, Path: path})
}

func (s *funcStream) Task(ts uint64, tid, pid int) error {
	t := &trace.Task{Time: ts, Tid: tid, Pid: pid}
	if tid != pid {
		s.tasks[tid] = t
	} else if p := s.proc(pid); p != nil {
		p.task = true
	}
	return s.write(t)
}

func (s *funcStream) Fork(ts uint64, pid, ppid int) error {
	sid := ""
	if p := s.proc(ppid); p != nil {
		sid = p.sid
	}
	s.procs = append(s.procs, &funcProc{pid: pid, ppid: ppid, sid: sid, time: ts, alive: true})
	return s.write(&trace.Task{Time: ts, Tid: pid, Pid: pid, PPid: ppid})
}

func (s *funcStream) Exit(ts uint64, tid int) error {
	delete(s.tasks, tid)
	if p := s.proc(tid); p != nil {
		p.alive = false
	}
	return nil // task.txt has no exit lines
}

func (s *funcStream) Symbols(sid string, funcs []trace.Func) error {
	s.symbols[sid] = append(s.symbols[sid], funcs...)
	return s.write(&trace.Symbols{SID: sid, Funcs: funcs})
}

func (s *funcStream) Event(id uint64, name string) error {
	e := trace.EventName{ID: id, Name: name}
	s.events = append(s.events, e)
	return s.write(&e)
}

func (s *funcStream) Probe(ts uint64, tid int, name string, args []string) error {
	return s.write(&trace.Probe{Time: ts, Tid: tid, Name: name, Args: args})
}

func (s *funcStream) Records(tid int, recs []tracer.Rec) error {
	s.records += uint64(len(recs))
	return s.write(&trace.Records{Tid: tid, Recs: recs})
}

// Toggle opens a window (on) or closes the open one.
func (s *funcStream) Toggle(on bool, pid int) error {
	if !on {
		s.closeWindow(nil)
		return nil
	}
	return s.openWindow(pid)
}

// openWindow starts a window: the pipe of a listening `rtrace toggle`
// when one waits for pid or the root, else an in-process pipeline; then
// the header and the state the window starts with.
func (s *funcStream) openWindow(pid int) error {
	if s.win != nil {
		return nil
	}
	var out *os.File
	if s.listen {
		var err error
		if out, err = openListener(pid, s.root); err != nil {
			return err
		}
	}
	hdr := &trace.Header{Version: wire.Version, Arch: "x86_64", Time: time.Now(), Process: s.process, Pid: s.root,
		Origin: "rtrace", OutDir: s.dir, PostOpts: s.filters.String(), Functions: true}
	if out != nil {
		w := wire.NewWriter(out)
		s.win, s.winOut = w, pipeCloser{w, out}
		s.outs = append(s.outs, "a window 'rtrace toggle' wrote")
		s.listener.watch(out, pid)
	} else {
		c, err := newFuncChain(s.dir, s.rawDir, s.filters, s.warn)
		if err != nil {
			return err
		}
		s.win, s.chain = c, c
	}
	s.started = time.Now()
	s.marks.on(pid, s.root)
	info := s.info
	for _, it := range s.state(hdr, &trace.Info{Info: info}) {
		if err := s.write(it); err != nil {
			return fmt.Errorf("starting a window: %w", errors.Join(s.errs...))
		}
	}
	return nil
}

// state is what a new window starts with: the header, the recorder's
// info, every live process's session (or fork) with its latest maps, the
// threads alive, and the names known.
func (s *funcStream) state(hdr *trace.Header, info *trace.Info) []trace.Item {
	items := []trace.Item{hdr, info}
	sids := map[string]bool{}
	for _, p := range s.procs {
		if !p.alive {
			continue
		}
		if p.exec {
			items = append(items, s.sessions[p.sid])
		} else {
			items = append(items, &trace.Task{Time: p.time, Tid: p.pid, Pid: p.pid, PPid: p.ppid})
		}
		if p.exec && p.task { // else it is still to come: the window opened at the session
			items = append(items, &trace.Task{Time: p.time + 1, Tid: p.pid, Pid: p.pid})
		}
		sids[p.sid] = true
	}
	tids := make([]int, 0, len(s.tasks))
	for tid := range s.tasks {
		tids = append(tids, tid)
	}
	slices.Sort(tids)
	for _, tid := range tids {
		items = append(items, s.tasks[tid])
	}
	for sid := range sids {
		if f := s.symbols[sid]; len(f) > 0 {
			items = append(items, &trace.Symbols{SID: sid, Funcs: f})
		}
	}
	for i := range s.events {
		items = append(items, &s.events[i])
	}
	return items
}

// closeWindow ends the open window: the recorder's info at the end (the
// program's status when it ended, res non-nil), then every stage.
func (s *funcStream) closeWindow(res *tracer.Result) {
	if s.win == nil {
		return
	}
	end := uftrace.Info{RecordDate: s.started.Format("Mon Jan _2 15:04:05 2006")}
	elapsed := time.Since(s.started)
	end.Elapsed = fmt.Sprintf("%d.%09d sec", elapsed/time.Second, elapsed%time.Second)
	if res != nil {
		st := int(res.Status)
		end.ExitStatus = &st
		end.Usage = uftrace.UsageFromRusage(&res.Rusage)
	}
	s.listener.stop()
	listener := s.winOut != nil
	if err := s.win.Write(&trace.Info{Info: end}); err != nil && !(listener && readerGone(err)) {
		s.errs = append(s.errs, fmt.Errorf("function trace: %w", err))
	}
	s.marks.off()
	var err error
	if s.chain != nil {
		err = s.chain.Close()
		dir, raw := s.chain.outputs()
		if p := s.perf.Load(); p != nil && dir != "" && err == nil {
			var lost uint64 // linux:task-name: uftrace's perf-cpuN.dat
			if lost, err = p.WriteTo(dir); lost > 0 {
				fmt.Fprintf(s.warn, "rtrace: warning: -E linux:task-name: the kernel dropped %d task records (perf's ring was full)\n", lost)
			}
		}
		if dir != "" {
			s.dirs = append(s.dirs, dir)
		}
		for _, o := range []string{dir, raw} {
			if o != "" {
				s.outs = append(s.outs, display(o))
			}
		}
	} else {
		err = s.winOut.Close()
	}
	if err != nil && !(listener && readerGone(err)) {
		s.errs = append(s.errs, fmt.Errorf("function trace: %w", err))
	}
	s.win, s.winOut, s.chain = nil, nil, nil
}

// finish closes the open window with the program's end (res, nil when
// tracing failed) and returns what was written and what failed.
func (s *funcStream) finish(res *tracer.Result) ([]string, error) {
	s.closeWindow(res)
	s.perf.Load().Close()
	if s.removed != nil {
		<-s.removed
	}
	return s.outs, errors.Join(s.errs...)
}

// pipeCloser flushes a listener's stream, then closes its pipe.
type pipeCloser struct {
	w *wire.Writer
	f *os.File
}

func (p pipeCloser) Close() error { return errors.Join(p.w.Close(), p.f.Close()) }
