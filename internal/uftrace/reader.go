package uftrace

import (
	"bufio"
	"bytes"
	"container/heap"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"rtrace/internal/regular"
)

// Item is one record read from a directory, with what the Reader knows of it.
type Item struct {
	Tid int
	Record
	Payload []byte  // raw argument/return payload (nil when More is false)
	Args    []Value // decoded payload, one value per spec in Specs
	Specs   []ArgSpec
	Func    string // symbol of Addr for Entry/Exit, "" when unknown
	Where   Where  // the module of Func, for FUNC@MODULE patterns
	Session string // the session (SID) of the record's task at its time
}

// Session is one SESS of task.txt with its map and modules.
type Session struct {
	TaskEvent
	Maps    []Mapping
	Modules []*Module
}

// Reader streams the records of a uftrace.data directory, written by rtrace
// or by the real uftrace, merged by time across tasks.
type Reader struct {
	Dir        string
	Info       *Info
	TaskEvents []TaskEvent // task.txt, in file order
	Sessions   []*Session  // in file order
	Events     map[uint64]string

	pids    map[int]int // tid -> pid
	parents map[int]int // forked pid -> parent pid
	specs   *specTable
	streams streamHeap
	done    bool
}

// FileError is an error in one file of the directory; Offset is -1 when
// the position does not apply.
type FileError struct {
	File   string
	Offset int64
	Err    error
}

func (e *FileError) Error() string {
	if e.Offset >= 0 {
		return fmt.Sprintf("%s at offset %d: %v", e.File, e.Offset, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.File, e.Err)
}

func (e *FileError) Unwrap() error { return e.Err }

// Open reads the metadata of the directory and opens every task's data.
func Open(dir string) (*Reader, error) {
	r := &Reader{Dir: dir, Events: map[uint64]string{}, pids: map[int]int{}, parents: map[int]int{}}
	fail := func(file string, err error) (*Reader, error) {
		r.Close()
		return nil, &FileError{File: filepath.Join(dir, file), Offset: -1, Err: err}
	}
	data, err := regular.ReadFile(r.path("info"))
	if err != nil {
		return fail("info", err)
	}
	if r.Info, err = ParseInfo(data); err != nil {
		return fail("info", err)
	}
	if r.Info.Features&FeatKernel != 0 {
		return fail("info", errors.New("kernel trace data is not supported"))
	}
	if err := r.readTasks(); err != nil {
		return fail("task.txt", err)
	}
	for _, s := range r.Sessions {
		name := "sid-" + s.SID + ".map"
		if err := r.readSession(s); err != nil {
			return fail(name, err)
		}
	}
	if err := r.readEvents(); err != nil {
		return fail("events.txt", err)
	}
	if r.specs, err = r.loadSpecs(); err != nil {
		return fail("info", err)
	}
	for _, tid := range r.Info.TaskIDs {
		if err := r.openStream(tid); err != nil {
			r.Close()
			return nil, err
		}
	}
	heap.Init(&r.streams)
	return r, nil
}

func (r *Reader) path(name string) string { return filepath.Join(r.Dir, name) }

// Parent returns the pid of the process that forked the process whose main
// thread is tid (task.txt's FORK lines), 0 for any other task.
func (r *Reader) Parent(tid int) int { return r.parents[tid] }

func (r *Reader) readTasks() error {
	f, err := regular.Open(r.path("task.txt"))
	if err != nil {
		return err
	}
	defer f.Close()
	if r.TaskEvents, err = ParseTaskFile(f); err != nil {
		return err
	}
	for _, e := range r.TaskEvents {
		switch e.Kind {
		case KindSess:
			r.Sessions = append(r.Sessions, &Session{TaskEvent: e})
		case KindTask:
			r.pids[e.Tid] = e.Pid
		case KindFork:
			r.pids[e.Pid] = e.Pid
			r.parents[e.Pid] = e.PPid
		}
	}
	if len(r.Sessions) == 0 {
		return errors.New("no SESS line")
	}
	return nil
}

func (r *Reader) readSession(s *Session) error {
	data, err := regular.ReadFile(r.path("sid-" + s.SID + ".map"))
	if err != nil {
		return err
	}
	if s.Maps, err = ParseMaps(bytes.NewReader(data)); err != nil {
		return err
	}
	s.Modules = Modules(s.Maps)
	// Libraries opened with dlopen after the map was taken.
	for _, e := range r.TaskEvents {
		if e.Kind == KindDlop && e.SID == s.SID && !hasModule(s.Modules, e.Exename) {
			s.Modules = append(s.Modules, &Module{Path: e.Exename, Base: e.Base})
		}
	}
	for _, m := range s.Modules {
		if err := r.loadModule(m); err != nil {
			return err
		}
	}
	return nil
}

func hasModule(ms []*Module, path string) bool {
	for _, m := range ms {
		if m.Path == path {
			return true
		}
	}
	return false
}

// loadModule reads the .sym and .dbg files of m when the directory has them.
func (r *Reader) loadModule(m *Module) error {
	base := filepath.Base(m.Path)
	for _, name := range r.symCandidates(base) {
		f, err := regular.Open(r.path(name + ".sym"))
		if err != nil {
			continue
		}
		t, err := ParseSyms(f)
		f.Close()
		if err != nil {
			return &FileError{File: r.path(name + ".sym"), Offset: -1, Err: err}
		}
		if t.Path != "" && t.Path != m.Path {
			continue // the .sym of another module with this basename
		}
		m.SymFile, m.Syms = name, t
		break
	}
	if m.SymFile == "" {
		return nil
	}
	f, err := regular.Open(r.path(m.SymFile + ".dbg"))
	if err != nil {
		return nil
	}
	defer f.Close()
	if m.debugFuncs, err = ParseDebug(f); err != nil {
		return &FileError{File: r.path(m.SymFile + ".dbg"), Offset: -1, Err: err}
	}
	m.dbgBuildID = debugBuildID(f)
	return nil
}

// debugBuildID returns the build id in the header comments of the .dbg
// file f ("" for none). The comments are read line by line from the
// start, however long a path in them is.
func debugBuildID(f *os.File) string {
	br := bufio.NewReader(io.NewSectionReader(f, 0, 1<<20))
	for {
		line, err := br.ReadString('\n')
		if !strings.HasPrefix(line, "#") {
			return ""
		}
		if id, ok := strings.CutPrefix(line, "# build-id: "); ok {
			return strings.TrimSpace(id)
		}
		if err != nil {
			return ""
		}
	}
}

// symCandidates lists the .sym basenames that may belong to a module called base.
func (r *Reader) symCandidates(base string) []string {
	out := []string{base}
	matches, _ := filepath.Glob(filepath.Join(r.Dir, globEscape(base)+"-????.sym"))
	for _, m := range matches {
		out = append(out, strings.TrimSuffix(filepath.Base(m), ".sym"))
	}
	return out
}

func globEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func (r *Reader) readEvents() error {
	data, err := regular.ReadFile(r.path("events.txt"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for n, line := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var id uint64
		var name string
		if _, err := fmt.Sscanf(line, "EVENT: %d %s", &id, &name); err != nil {
			return fmt.Errorf("line %d: want \"EVENT: <id> <provider:name>\", got %q", n+1, truncate(line, 60))
		}
		r.Events[id] = name
	}
	return nil
}

// SessionAt returns the session of task tid at time t: the latest session of
// its process started at or before t, or of its parent for a forked child.
func (r *Reader) SessionAt(tid int, t uint64) *Session {
	pid, ok := r.pids[tid]
	if !ok {
		pid = tid
	}
	for seen := 0; seen < 64; seen++ {
		var best *Session
		for _, s := range r.Sessions {
			if s.Pid == pid && s.Time <= t {
				best = s
			}
		}
		if best != nil {
			return best
		}
		parent, ok := r.parents[pid]
		if !ok {
			break
		}
		pid = parent
	}
	// A task with no session of its own (e.g. its SESS came late): use the first.
	if len(r.Sessions) > 0 && r.Sessions[0].Time <= t {
		return r.Sessions[0]
	}
	return nil
}

// Resolve returns the function symbol containing addr in session s.
func (s *Session) Resolve(addr uint64) (Symbol, *Module, bool) {
	for _, m := range s.Modules {
		if addr < m.Base || (m.End != 0 && addr >= m.End) || m.Syms == nil {
			continue
		}
		if sym, ok := m.Syms.Lookup(addr - m.Base); ok {
			return sym, m, true
		}
	}
	return Symbol{}, nil, false
}

// Size returns the size of the function at addr (SymTable.Size), 0 when
// no module's symbols hold it.
func (s *Session) Size(addr uint64) uint64 {
	if _, m, ok := s.Resolve(addr); ok {
		return m.Syms.Size(addr - m.Base)
	}
	return 0
}

// Where says where sym of module m of the session is, for FUNC@MODULE
// patterns: the executable's P symbols are its calls into libraries (a
// library's own are --nest-libcall's: not @PLT).
func (s *Session) Where(m *Module, sym Symbol) Where {
	return Where{Module: m.Path, PLT: sym.Type == 'P' && len(s.Modules) > 0 && m == s.Modules[0]}
}

// Next returns the next record in time order across all tasks, or io.EOF.
func (r *Reader) Next() (*Item, error) {
	if r.done || r.streams.Len() == 0 {
		return nil, io.EOF
	}
	st := r.streams[0]
	it := st.cur
	if err := r.advance(st); err != nil {
		r.done = true
		return nil, err
	}
	if st.eof {
		heap.Pop(&r.streams)
		st.f.Close()
	} else {
		heap.Fix(&r.streams, 0)
	}
	return it, nil
}

// Close closes every open data file.
func (r *Reader) Close() error {
	for _, st := range r.streams {
		st.f.Close()
	}
	r.streams = nil
	return nil
}

type stream struct {
	tid  int
	name string
	f    *os.File
	br   *bufio.Reader
	off  int64
	cur  *Item
	eof  bool
}

func (r *Reader) openStream(tid int) error {
	name := fmt.Sprintf("%d.dat", tid)
	f, err := regular.Open(r.path(name))
	if err != nil {
		return &FileError{File: r.path(name), Offset: -1, Err: err}
	}
	st := &stream{tid: tid, name: r.path(name), f: f, br: bufio.NewReaderSize(f, 64<<10)}
	if err := r.advance(st); err != nil {
		f.Close()
		return err
	}
	if st.eof {
		f.Close()
		return nil
	}
	r.streams = append(r.streams, st)
	return nil
}

// advance reads the next record of st into st.cur, or sets st.eof.
func (r *Reader) advance(st *stream) error {
	var hdr [RecordSize]byte
	n, err := io.ReadFull(st.br, hdr[:])
	if err == io.EOF {
		st.eof, st.cur = true, nil
		return nil
	}
	if err != nil {
		return &FileError{File: st.name, Offset: st.off, Err: fmt.Errorf("partial record: %d of %d bytes", n, RecordSize)}
	}
	rec, err := DecodeRecord(hdr[:])
	if err != nil {
		return &FileError{File: st.name, Offset: st.off, Err: err}
	}
	it := &Item{Tid: st.tid, Record: rec}
	start := st.off
	st.off += RecordSize
	if rec.Type == Entry || rec.Type == Exit {
		if s := r.SessionAt(st.tid, rec.Time); s != nil {
			it.Session = s.SID
			if sym, m, ok := s.Resolve(rec.Addr); ok {
				it.Func = sym.Name
				it.Where = s.Where(m, sym)
			}
		}
	}
	if rec.More {
		if err := r.readPayload(st, it); err != nil {
			return &FileError{File: st.name, Offset: start, Err: err}
		}
	}
	st.cur = it
	return nil
}

func (r *Reader) readPayload(st *stream, it *Item) error {
	if it.Type == Event {
		// Data of a builtin event (read=): its size, then the data.
		peek, _ := st.br.Peek(2)
		n, err := eventPayloadSize(peek)
		if err != nil {
			return err
		}
		it.Payload = make([]byte, n)
		if _, err := io.ReadFull(st.br, it.Payload); err != nil {
			return fmt.Errorf("event payload of %d bytes: %w", n, err)
		}
		st.off += int64(n)
		return nil
	}
	if it.Type != Entry && it.Type != Exit {
		return fmt.Errorf("%s record with a payload is not supported", it.Type)
	}
	if it.Func == "" {
		return fmt.Errorf("payload of a record at %#x, which resolves to no symbol", it.Addr)
	}
	args, rets := r.specs.lookup(it.Func, r.SessionAt(st.tid, it.Time), it.Addr)
	it.Specs = args
	if it.Type == Exit {
		it.Specs = rets
	}
	if len(it.Specs) == 0 {
		return fmt.Errorf("record missing argument info for %s", it.Func)
	}
	// Peek the most the specs can take (or what is left) and decode it.
	peek, _ := st.br.Peek(min(maxPayload(it.Specs), st.br.Size()))
	vals, n, err := DecodePayload(peek, it.Specs)
	if err != nil {
		return fmt.Errorf("%s of %s: %w", map[bool]string{true: "return value", false: "arguments"}[it.Type == Exit], it.Func, err)
	}
	it.Args = vals
	it.Payload = make([]byte, n)
	if _, err := io.ReadFull(st.br, it.Payload); err != nil {
		return err
	}
	st.off += int64(n)
	return nil
}

// maxPayload is the largest payload specs can describe.
func maxPayload(specs []ArgSpec) int {
	n := 8
	for _, a := range specs {
		if a.isString() {
			n += 2 + 65535 + 3
		} else {
			n += a.storedSize()
		}
	}
	return n
}

// streamHeap orders task streams by the time of their current record.
type streamHeap []*stream

func (h streamHeap) Len() int { return len(h) }
func (h streamHeap) Less(i, j int) bool {
	if h[i].cur.Time != h[j].cur.Time {
		return h[i].cur.Time < h[j].cur.Time
	}
	return h[i].tid < h[j].tid
}
func (h streamHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *streamHeap) Push(x any)   { *h = append(*h, x.(*stream)) }
func (h *streamHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
