package uftrace

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// taskBufSize is the per-task buffer; it is flushed only at record
// boundaries, so a <tid>.dat never ends in a partial record.
const taskBufSize = 64 << 10

// Writer produces a uftrace.data directory. Records are buffered per task;
// task.txt, maps, events and info are written as they become known, so the
// directory is readable up to the last flushed record at any time (also
// after the writing process is killed).
//
// A Writer is not safe for concurrent use.
type Writer struct {
	dir      string
	info     Info
	taskTxt  *os.File
	infoFile *os.File
	infoLen  int
	tasks    map[int]*taskFile
	// fileless: tasks opened whose data file is not made yet (it is at
	// their first flush, or at Close): info leaves them out until then.
	fileless map[int]bool
	eventTxt *os.File
	extern   *os.File
	events   map[uint64]bool
	modules  map[string]string // .sym basename -> module path that owns it
	maxDepth int
	closed   bool
}

type taskFile struct {
	f        *os.File // nil until its first flush (Writer.flushTask)
	buf      []byte   // nil until its first record
	lastTime uint64
}

// Create makes dir (which must not exist or be empty) and writes the
// initial info and task.txt. info's Features get BaseFeatures added, and
// PatternType defaults to "regex".
func Create(dir string, info Info) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating trace directory: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("creating trace directory: %w", err)
	}
	if len(ents) > 0 {
		return nil, fmt.Errorf("trace directory %s is not empty", dir)
	}
	info.Features |= BaseFeatures
	info.Features |= argFeatures(info.ArgSpecs)
	if info.PatternType == "" {
		info.PatternType = "regex"
	}
	info.TaskIDs = append([]int(nil), info.TaskIDs...)
	w := &Writer{
		dir:      dir,
		info:     info,
		tasks:    map[int]*taskFile{},
		fileless: map[int]bool{},
		events:   map[uint64]bool{},
		modules:  map[string]string{},
	}
	if w.taskTxt, err = os.OpenFile(w.path("task.txt"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return nil, fmt.Errorf("creating task.txt: %w", err)
	}
	if w.infoFile, err = os.OpenFile(w.path("info"), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644); err != nil {
		w.taskTxt.Close()
		return nil, fmt.Errorf("creating info: %w", err)
	}
	if err := w.writeInfo(); err != nil {
		w.taskTxt.Close()
		w.infoFile.Close()
		return nil, err
	}
	return w, nil
}

// argFeatures returns the feature bits the argspec lines call for.
func argFeatures(lines []ArgSpecLine) uint64 {
	var f uint64
	for _, l := range lines {
		switch l.Key {
		case "argspec":
			f |= FeatArgument
		case "retspec":
			f |= FeatRetval
		case "argauto":
			// As uftrace record: the reader takes the built-in table of
			// library functions (argauto, retauto) only with this bit.
			f |= FeatAutoArgs
		case "auto-args":
			f |= FeatAutoArgs | FeatArgument | FeatRetval
		}
	}
	return f
}

// Dir returns the directory the Writer writes.
func (w *Writer) Dir() string { return w.dir }

func (w *Writer) path(name string) string { return filepath.Join(w.dir, name) }

// writeInfo rewrites the info file in place, so that the directory is
// readable whenever rtrace stops: at each task's first data, each new
// feature and at the end. One pwrite of a page or so: a new file renamed over it, as
// writeFileAtomic does, cost 0.3 ms per task on ext4 here (allocating the
// inode), the most of a new thread's cost in a 4-thread fib(25).
func (w *Writer) writeInfo() error {
	info := w.info
	if len(w.fileless) > 0 {
		info.TaskIDs = slices.DeleteFunc(slices.Clone(info.TaskIDs), func(tid int) bool { return w.fileless[tid] })
	}
	b, err := info.MarshalBinary()
	if err != nil {
		return fmt.Errorf("encoding info: %w", err)
	}
	if _, err := w.infoFile.WriteAt(b, 0); err != nil {
		return fmt.Errorf("writing info: %w", err)
	}
	if len(b) < w.infoLen {
		if err := w.infoFile.Truncate(int64(len(b))); err != nil {
			return fmt.Errorf("writing info: %w", err)
		}
	}
	w.infoLen = len(b)
	return nil
}

// writeFileAtomic is WriteFileAtomic, its error naming the file.
func writeFileAtomic(path string, b []byte) error {
	if err := WriteFileAtomic(path, b); err != nil {
		return fmt.Errorf("writing %s: %w", filepath.Base(path), err)
	}
	return nil
}

// WriteFileAtomic replaces path with b, whole or not at all: written
// beside it (path.tmp), then renamed over it. A file half-written (a full
// disk) is removed.
func WriteFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	err := os.WriteFile(tmp, b, 0o644)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// UpdateInfo lets the caller change the info (exit status, usage, elapsed
// time...) and rewrites the file.
func (w *Writer) UpdateInfo(fn func(*Info)) error {
	fn(&w.info)
	w.info.Features |= BaseFeatures | argFeatures(w.info.ArgSpecs)
	return w.writeInfo()
}

func (w *Writer) taskLine(e TaskEvent) error {
	if _, err := w.taskTxt.WriteString(e.String() + "\n"); err != nil {
		return fmt.Errorf("writing task.txt: %w", err)
	}
	return nil
}

// Session starts a session (a process image: the start of the target or an
// exec): it writes sid-<sid>.map with maps, a copy of /proc/<pid>/maps, and
// the SESS line. The maps must include the [stack] line.
func (w *Writer) Session(e TaskEvent, maps []byte) error {
	e.Kind = KindSess
	if len(e.SID) != 16 || strings.ContainsAny(e.SID, "/ ") {
		return fmt.Errorf("session id %q: want 16 characters", e.SID)
	}
	ms, err := ParseMaps(bytes.NewReader(maps))
	if err != nil {
		return fmt.Errorf("maps of session %s: %w", e.SID, err)
	}
	if !HasStack(ms) {
		return fmt.Errorf("maps of session %s: no [stack] line (uftrace needs it to tell user from kernel addresses)", e.SID)
	}
	if err := os.WriteFile(w.path("sid-"+e.SID+".map"), maps, 0o644); err != nil {
		return fmt.Errorf("writing session map: %w", err)
	}
	return w.taskLine(e)
}

// UpdateMaps replaces the map of session sid (e.g. once the loader has
// mapped the libraries), atomically.
func (w *Writer) UpdateMaps(sid string, maps []byte) error {
	ms, err := ParseMaps(bytes.NewReader(maps))
	if err != nil {
		return fmt.Errorf("maps of session %s: %w", sid, err)
	}
	if !HasStack(ms) {
		return fmt.Errorf("maps of session %s: no [stack] line", sid)
	}
	return writeFileAtomic(w.path("sid-"+sid+".map"), maps)
}

// Task records a task (thread) of process pid, or the first task of a new
// session, and opens its data file. A tid seen before (exec keeps the pid)
// keeps its data file.
func (w *Writer) Task(time uint64, tid, pid int) error {
	if err := w.taskLine(TaskEvent{Kind: KindTask, Time: time, Tid: tid, Pid: pid}); err != nil {
		return err
	}
	return w.openTask(tid)
}

// Fork records a forked child process; the child inherits its parent's
// session, and its first record should be an Exit at the inherited depth.
func (w *Writer) Fork(time uint64, pid, ppid int) error {
	if err := w.taskLine(TaskEvent{Kind: KindFork, Time: time, Pid: pid, PPid: ppid}); err != nil {
		return err
	}
	return w.openTask(pid)
}

// Dlopen records a library loaded at run time at load bias base.
func (w *Writer) Dlopen(time uint64, tid int, sid string, base uint64, lib string) error {
	return w.taskLine(TaskEvent{Kind: KindDlop, Time: time, Tid: tid, SID: sid, Base: base, Exename: lib})
}

// openTask starts task tid. Its data file and its place in info wait for
// its first records (flushTask): a new task costs its tracer no file to
// make, no info to rewrite and no buffer to clear, which made a traced
// fork 0.1-0.3 ms slower (its tracer resumes it after the stages took it).
func (w *Writer) openTask(tid int) error {
	if _, ok := w.tasks[tid]; ok {
		return nil
	}
	w.tasks[tid] = &taskFile{}
	if !slices.Contains(w.info.TaskIDs, tid) {
		w.info.TaskIDs = append(w.info.TaskIDs, tid)
	}
	w.fileless[tid] = true
	return nil
}

// flushTask writes task tid's buffered records to its data file, making
// the file first (and naming it in info, before its data is there).
func (w *Writer) flushTask(tid int, t *taskFile) error {
	if t.f == nil {
		if err := w.createTask(tid, t); err != nil {
			return err
		}
		if err := w.writeInfo(); err != nil {
			return err
		}
	}
	if len(t.buf) == 0 {
		return nil
	}
	_, err := t.f.Write(t.buf)
	t.buf = t.buf[:0]
	if err != nil {
		return fmt.Errorf("writing data of task %d: %w", tid, err)
	}
	return nil
}

// createTask makes task tid's data file; info names it from its next
// rewrite on.
func (w *Writer) createTask(tid int, t *taskFile) error {
	f, err := os.OpenFile(w.path(fmt.Sprintf("%d.dat", tid)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("creating data file of task %d: %w", tid, err)
	}
	t.f = f
	delete(w.fileless, tid)
	return nil
}

// room makes room for n more bytes in task tid's buffer: its first
// allocation, or a flush of what it holds.
func (w *Writer) room(tid int, t *taskFile, n int) error {
	switch {
	case len(t.buf)+n <= cap(t.buf):
		return nil
	case t.buf == nil:
		t.buf = make([]byte, 0, taskBufSize)
		return nil
	}
	return w.flushTask(tid, t)
}

// Append adds a record, with its argument or return-value payload when
// r.More is set, to the data of task tid. Records of one task must come in
// time order.
func (w *Writer) Append(tid int, r Record, payload []byte) error {
	t, ok := w.tasks[tid]
	if !ok {
		return fmt.Errorf("record for unknown task %d (call Task or Fork first)", tid)
	}
	return w.append(tid, t, &r, payload)
}

// AppendRecs adds a batch of task tid's records, as Append does each.
func (w *Writer) AppendRecs(tid int, recs []Rec) error {
	t, ok := w.tasks[tid]
	if !ok {
		return fmt.Errorf("record for unknown task %d (call Task or Fork first)", tid)
	}
	for len(recs) > 0 {
		// A run of records without payload, in time order, of depths seen
		// already, is encoded at once (a drained ring is mostly that).
		n := 0
		if err := w.room(tid, t, RecordSize); err != nil {
			return err
		}
		room := (cap(t.buf) - len(t.buf)) / RecordSize
		last := t.lastTime
		for n < len(recs) && n < room {
			r := &recs[n].Record
			if r.More || len(recs[n].Payload) > 0 || r.Time < last || r.Depth > w.maxDepth || r.Depth < 0 {
				break
			}
			last = r.Time
			n++
		}
		if n > 0 {
			b := t.buf[len(t.buf) : len(t.buf)+n*RecordSize]
			for i := range n {
				putRecord(b[i*RecordSize:], &recs[i].Record)
			}
			t.buf = t.buf[:len(t.buf)+n*RecordSize]
			t.lastTime = last
			recs = recs[n:]
			continue
		}
		if err := w.append(tid, t, &recs[0].Record, recs[0].Payload); err != nil {
			return err
		}
		recs = recs[1:]
	}
	return nil
}

func (w *Writer) append(tid int, t *taskFile, r *Record, payload []byte) error {
	if r.Time < t.lastTime {
		return fmt.Errorf("task %d: record time %d before previous %d", tid, r.Time, t.lastTime)
	}
	if !r.More && len(payload) > 0 {
		return fmt.Errorf("task %d: More=%v with a payload of %d bytes", tid, r.More, len(payload))
	}
	if len(payload)%8 != 0 {
		return fmt.Errorf("task %d: payload of %d bytes is not padded to 8", tid, len(payload))
	}
	if r.Type == Event && r.More && !eventHasData(r.Addr) {
		return fmt.Errorf("event %d with data: uftrace v0.13 reads data of its builtin read= events only", r.Addr)
	}
	t.lastTime = r.Time
	if r.Depth > w.maxDepth && (r.Type == Entry || r.Type == Exit) {
		w.maxDepth = r.Depth
		if err := w.growStack(); err != nil {
			return err
		}
	}
	if err := w.room(tid, t, RecordSize+len(payload)); err != nil {
		return err
	}
	t.buf = AppendRecord(t.buf, *r)
	if len(payload) > 0 {
		t.buf = append(t.buf, payload...)
	}
	return nil
}

// growStack raises the reader's shadow-stack size (info max_stack) past the
// default 1024 when the trace nests deeper, so the reader tracks every frame,
// and writes "-D 1024" to default.opts: uftrace 0.13's graph and
// --flame-graph abort (double free, segfault) once the display depth passes
// 1024, and its own recorder never goes deeper by default. A user can still
// ask replay for more with an explicit -D.
func (w *Writer) growStack() error {
	need := w.maxDepth + 1
	if need <= DefaultMaxStack || need <= int(w.info.MaxStack) {
		return nil
	}
	size := (need + 1023) &^ 1023
	if size > 65535 {
		size = 65535
	}
	w.info.MaxStack = uint16(size)
	if err := os.WriteFile(w.path("default.opts"), fmt.Appendf(nil, "-D %d\n", DefaultMaxStack), 0o644); err != nil {
		return fmt.Errorf("writing default.opts: %w", err)
	}
	return w.writeInfo()
}

// Flush writes every buffered record to its data file.
func (w *Writer) Flush() error {
	var errs []error
	for tid, t := range w.tasks {
		if len(t.buf) > 0 {
			errs = append(errs, w.flushTask(tid, t))
		}
	}
	return errors.Join(errs...)
}

// AddEvent names a user event id (>= EventIDBase) as "provider:name" in
// events.txt and sets the EVENT feature.
func (w *Writer) AddEvent(id uint64, name string) error {
	if id < EventIDBase {
		return fmt.Errorf("event %q: id %d below %d", name, id, EventIDBase)
	}
	if name == "" || strings.ContainsAny(name, " \t\n") {
		return fmt.Errorf("event name %q: empty or has whitespace", name)
	}
	if w.events[id] {
		return nil
	}
	if w.eventTxt == nil {
		f, err := os.OpenFile(w.path("events.txt"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("creating events.txt: %w", err)
		}
		w.eventTxt = f
		w.info.Features |= FeatEvent
		if err := w.writeInfo(); err != nil {
			return err
		}
	}
	w.events[id] = true
	if _, err := fmt.Fprintf(w.eventTxt, "EVENT: %d %s\n", id, name); err != nil {
		return fmt.Errorf("writing events.txt: %w", err)
	}
	return nil
}

// Extern adds a timestamped message to extern.dat, shown by replay.
func (w *Writer) Extern(time uint64, msg string) error {
	if w.extern == nil {
		f, err := os.OpenFile(w.path("extern.dat"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("creating extern.dat: %w", err)
		}
		w.extern = f
	}
	msg = strings.ReplaceAll(msg, "\n", " ")
	if _, err := fmt.Fprintf(w.extern, "%s %s\n", FormatTime(time), msg); err != nil {
		return fmt.Errorf("writing extern.dat: %w", err)
	}
	return nil
}

// SymName returns the basename of the .sym/.dbg files of the module at path:
// its file name, or for a second module of the same file name
// "<name>-<AltSymSuffix>", where uftrace looks for it. mapID is the build id
// on the module's session map line ("" for none: rtrace's maps are /proc
// copies).
func (w *Writer) SymName(path, mapID string) string {
	base := filepath.Base(path)
	if owner, ok := w.modules[base]; !ok || owner == path {
		w.modules[base] = path
		return base
	}
	name := base + "-" + AltSymSuffix(path, mapID)
	w.modules[name] = path
	return name
}

// AltSymSuffix is what uftrace 0.13 appends to the basename of the files of
// a module whose plain name another module holds (make_new_symbol_filename
// in utils/symbol.c): the first 4 characters of the build id on its map
// line, or without one a 16-bit sum of the path's chars (C char: signed on
// x86-64) in 4 hex digits.
func AltSymSuffix(path, mapID string) string {
	if mapID != "" {
		return mapID[:min(4, len(mapID))]
	}
	var sum uint16
	for i := 0; i < len(path); i++ {
		sum += uint16(int8(path[i]))
	}
	return fmt.Sprintf("%04x", sum)
}

// Symbols writes <name>.sym for the module at path (name from SymName).
// end is the end of the last symbol (0: last symbol + 1).
func (w *Writer) Symbols(name, path, buildID string, syms []Symbol, end uint64) error {
	var b bytes.Buffer
	if err := WriteSyms(&b, path, buildID, syms, end); err != nil {
		return fmt.Errorf("symbols of %s: %w", path, err)
	}
	return writeFileAtomic(w.path(name+".sym"), b.Bytes())
}

// Debug writes <name>.dbg (source lines and argument specs) for the module
// at path and sets the DEBUG_INFO feature.
func (w *Writer) Debug(name, path, buildID string, funcs []DebugFunc) error {
	var b bytes.Buffer
	if err := WriteDebug(&b, path, buildID, funcs); err != nil {
		return fmt.Errorf("debug info of %s: %w", path, err)
	}
	if err := writeFileAtomic(w.path(name+".dbg"), b.Bytes()); err != nil {
		return err
	}
	if w.info.Features&FeatDebugInfo == 0 {
		w.info.Features |= FeatDebugInfo
		return w.writeInfo()
	}
	return nil
}

// Close flushes every task and closes all files, leaving a complete
// directory. It is safe to call more than once.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	errs := []error{w.Flush()}
	tids := make([]int, 0, len(w.tasks))
	for tid := range w.tasks {
		tids = append(tids, tid)
	}
	sort.Ints(tids)
	for _, tid := range tids {
		// A task without records has its (empty) data file too; info,
		// rewritten once below, names it then.
		t := w.tasks[tid]
		if t.f == nil {
			if err := w.createTask(tid, t); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		errs = append(errs, t.f.Close())
	}
	for _, f := range []*os.File{w.taskTxt, w.eventTxt, w.extern} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	errs = append(errs, w.writeInfo(), w.infoFile.Close())
	return errors.Join(errs...)
}
