package postproc

import (
	"rtrace/internal/uftrace"
)

// FuncOptions are the function-trace filters of a uftrace.data input
// (uftrace's own record and replay options of the same letters).
type FuncOptions struct {
	Filters   []uftrace.Pattern // -F: keep these functions and what they call
	NoTrace   []uftrace.Pattern // -N: drop these functions and what they call
	Depth     int               // -D: keep calls nested less than this deep (0: any)
	Threshold uint64            // -t: drop calls shorter than this many ns
	Tids      map[int]bool
	// MaxStack (--max-stack): drop calls nested this many levels deep or
	// deeper, counting every recorded level (0: any).
	MaxStack int
	// Srcline (--srcline): the trace keeps each module's source lines, a
	// .dbg file for `uftrace replay --srcline`, as uftrace record --srcline
	// does. Not a filter; without it the DWARF is not read.
	Srcline bool
}

// Active says whether any filter is set.
func (o FuncOptions) Active() bool {
	return len(o.Filters) > 0 || len(o.NoTrace) > 0 || o.Depth > 0 || o.Threshold > 0 || len(o.Tids) > 0 || o.MaxStack > 0
}

// NewFuncFilter returns the uftrace.Filter of o, for uftrace.Copy. parent,
// when not nil, names the task a forked process's main thread came from
// (uftrace.Reader.Parent): the child's stack starts as its parent's was.
func NewFuncFilter(o FuncOptions, parent func(tid int) int) uftrace.Filter {
	return &funcFilter{opts: o, parent: parent, tasks: map[int]*funcTask{}}
}

// funcFilter follows each task's call stack from the records' depths. A
// call is kept when it is under a -F function (or there is no -F), under
// no -N function, and fewer than -D kept calls below the innermost -F
// function (or the bottom); kept records are written with their depth
// among kept calls. With -t an entry waits on the stack until its exit
// shows the call lasted long enough; a call that does makes its waiting
// callers pass too (they lasted longer), so the filter holds at most one
// stack of entries per task. Levels a task's records start below (a
// forked child, a trace started mid-run) get stand-in frames: the parent's
// when known, else frames kept unless a -F is needed.
type funcFilter struct {
	opts   FuncOptions
	parent func(tid int) int
	tasks  map[int]*funcTask
}

type funcTask struct {
	stack []funcFrame
	last  uint64 // time of the task's last record
}

// funcFrame is one call on a task's stack.
type funcFrame struct {
	addr    uint64
	inDepth int  // the record's depth
	in, out bool // under a -F function; under a -N function
	kept    bool
	stand   bool          // a stand-in for a call whose entry is not in the data
	depth   int           // output depth when kept
	nkept   int           // kept calls on the stack up to this one
	dnext   int           // -D depth of a kept call under this one
	entry   uint64        // entry time
	pending *uftrace.Item // -t: entry not yet written
}

func (f *funcFilter) Record(it *uftrace.Item, emit func(*uftrace.Item) error) error {
	if len(f.opts.Tids) > 0 && !f.opts.Tids[it.Tid] {
		return nil
	}
	t := f.tasks[it.Tid]
	if t == nil {
		t = f.newTask(it.Tid)
	}
	t.last = it.Time
	switch it.Type {
	case uftrace.Entry:
		return f.entry(t, it, emit)
	case uftrace.Exit:
		return f.exit(t, it, emit)
	}
	// Events and lost records belong to the innermost call.
	top := f.top(t)
	if !f.inside(top) {
		return nil
	}
	if err := f.flush(t, len(t.stack), emit); err != nil {
		return err
	}
	it.Depth = top.nkept
	return emit(it)
}

// startFork starts the task of a process forked by parent from the
// parent's stack as it is now: the stream's Fork comes right after the
// parent's records up to the fork. An entry the parent still holds (-t)
// is held by the child too, as its own: each writes it if its own call
// lasts long enough, as uftrace's recorder does in both processes.
func (f *funcFilter) startFork(child, parent int) {
	t := &funcTask{}
	if p := f.tasks[parent]; p != nil {
		t.stack = append(t.stack, p.stack...)
		t.last = p.last
		for i := range t.stack {
			if pe := t.stack[i].pending; pe != nil {
				c := *pe
				c.Tid = child
				t.stack[i].pending = &c
			}
		}
	}
	f.tasks[child] = t
}

// newTask starts a task's stack: a forked child's as its parent's is.
func (f *funcFilter) newTask(tid int) *funcTask {
	t := &funcTask{}
	if f.parent != nil {
		if p := f.tasks[f.parent(tid)]; p != nil {
			t.stack = append(t.stack, p.stack...)
			for i := range t.stack {
				t.stack[i].stand, t.stack[i].pending = true, nil
			}
		}
	}
	f.tasks[tid] = t
	return t
}

// top is the innermost open call (a frame for "no call" when none is).
func (f *funcFilter) top(t *funcTask) funcFrame {
	if len(t.stack) == 0 {
		return funcFrame{in: len(f.opts.Filters) == 0}
	}
	return t.stack[len(t.stack)-1]
}

// unwind pops the calls a record of depth d shows to be over.
func (t *funcTask) unwind(d int) {
	n := len(t.stack)
	for n > 0 && t.stack[n-1].inDepth >= d {
		n--
	}
	t.stack = t.stack[:n]
}

// frame makes the frame of a call at record depth d under the current top;
// name is "" for a stand-in.
func (f *funcFilter) frame(t *funcTask, d int, addr uint64, name string) funcFrame {
	p := f.top(t)
	matchF := name != "" && uftrace.MatchAny(f.opts.Filters, name)
	fr := funcFrame{
		addr:    addr,
		inDepth: d,
		in:      p.in || matchF,
		out:     p.out || name != "" && uftrace.MatchAny(f.opts.NoTrace, name),
		stand:   name == "",
		depth:   p.nkept,
		nkept:   p.nkept,
		dnext:   p.dnext,
	}
	dd := p.dnext
	if matchF {
		dd = 0 // uftrace counts -D from the innermost -F function
	}
	fr.kept = f.inside(fr) && (f.opts.Depth == 0 || dd < f.opts.Depth) && (f.opts.MaxStack == 0 || d < f.opts.MaxStack)
	if fr.kept {
		fr.nkept++
		fr.dnext = dd + 1
	}
	return fr
}

// fill pushes stand-ins for the levels below record depth d that have no
// call on the stack.
func (f *funcFilter) fill(t *funcTask, d int) {
	for {
		next := 0
		if n := len(t.stack); n > 0 {
			next = t.stack[n-1].inDepth + 1
		}
		if next >= d {
			return
		}
		t.stack = append(t.stack, f.frame(t, next, 0, ""))
	}
}

// inside says whether calls under fr are kept by -F and -N.
func (f *funcFilter) inside(fr funcFrame) bool { return fr.in && !fr.out }

func (f *funcFilter) entry(t *funcTask, it *uftrace.Item, emit func(*uftrace.Item) error) error {
	t.unwind(it.Depth)
	f.fill(t, it.Depth)
	fr := f.frame(t, it.Depth, it.Addr, it.Func)
	fr.entry = it.Time
	if fr.kept {
		it.Depth = fr.depth
		if f.opts.Threshold > 0 {
			fr.pending = it
		} else if err := emit(it); err != nil {
			return err
		}
	}
	t.stack = append(t.stack, fr)
	return nil
}

// exit closes the call at the record's depth: the one whose entry was
// seen, or a stand-in for one whose entry is not in the data (its exit
// still says whether -N named it).
func (f *funcFilter) exit(t *funcTask, it *uftrace.Item, emit func(*uftrace.Item) error) error {
	t.unwind(it.Depth + 1)
	f.fill(t, it.Depth+1)
	d := len(t.stack) - 1
	fr := t.stack[d]
	t.stack = t.stack[:d]
	if fr.stand || fr.addr != it.Addr {
		if !fr.kept || fr.pending != nil || uftrace.MatchAny(f.opts.NoTrace, it.Func) {
			return nil
		}
		// Its callers are open still: their waiting entries come first,
		// as for an event.
		if err := f.flush(t, d, emit); err != nil {
			return err
		}
		it.Depth = fr.depth
		return emit(it)
	}
	if !fr.kept {
		return nil
	}
	if fr.pending != nil && it.Time-fr.entry < f.opts.Threshold {
		return nil
	}
	t.stack = append(t.stack, fr)
	err := f.flush(t, d+1, emit)
	t.stack = t.stack[:d]
	if err != nil {
		return err
	}
	it.Depth = fr.depth
	return emit(it)
}

// flush writes the waiting entries of the first n frames, outermost first.
func (f *funcFilter) flush(t *funcTask, n int, emit func(*uftrace.Item) error) error {
	for i := range t.stack[:n] {
		fr := &t.stack[i]
		if fr.pending == nil {
			continue
		}
		if err := emit(fr.pending); err != nil {
			return err
		}
		fr.pending = nil
	}
	return nil
}

// End writes the calls still open whose run so far passes -t: uftrace shows
// a call without exit as lasting to the end of its task's data.
func (f *funcFilter) End(emit func(*uftrace.Item) error) error {
	for _, t := range f.tasks {
		n := 0
		for i, fr := range t.stack {
			if fr.pending != nil && t.last-fr.entry >= f.opts.Threshold {
				n = i + 1
			}
		}
		if err := f.flush(t, n, emit); err != nil {
			return err
		}
	}
	return nil
}
