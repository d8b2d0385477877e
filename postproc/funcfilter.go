package postproc

import (
	"cmp"
	"slices"

	"rtrace/internal/uftrace"
)

// FuncOptions are the function-trace filters of a uftrace.data input
// (uftrace's own record and replay options of the same letters).
type FuncOptions struct {
	Filters []uftrace.Pattern // -F: keep these functions and what they call
	NoTrace []uftrace.Pattern // -N: drop these functions and what they call
	// FilterOrder says, for each -F and -N in the order given, whether it
	// was -N: of a function both match, the last decides, as in uftrace
	// (utils/filter.c: a later filter of one address replaces the
	// earlier). Without it (its length not theirs), every -N comes last.
	FilterOrder []bool
	Depth       int    // -D: keep calls nested less than this deep (0: any)
	Threshold   uint64 // -t: drop calls shorter than this many ns
	Tids        map[int]bool
	// MaxStack (--max-stack): drop calls nested this many levels deep or
	// deeper, counting every recorded level (0: any).
	MaxStack int
	// Srcline (--srcline): the trace keeps each module's source lines, a
	// .dbg file for `uftrace replay --srcline`, as uftrace record --srcline
	// does. Not a filter; without it the DWARF is not read.
	Srcline bool
	// WithSyms (--with-syms DIR): each module's .sym is made from the one
	// DIR holds for it, when it does (withsyms.Apply), as the tracer read
	// its functions. Not a filter.
	WithSyms string
	// Hide (-H): calls of these functions are left out, their callees
	// kept, a level up.
	Hide []uftrace.Pattern
	// Callers (-C): only the calls of these functions (without their
	// callees) and the calls they are made in are kept.
	Callers []uftrace.Pattern
	// Disabled (--disable): tracing starts off, until a trace_on trigger.
	Disabled bool
	// Triggers (-T): of their actions, those on what is kept: depth=,
	// time=, filter, notrace, hide, caller, trace, trace_on, trace_off and
	// finish. The others are not the function stage's.
	Triggers []uftrace.Trigger
}

// Active says whether any filter is set.
func (o FuncOptions) Active() bool {
	return len(o.Filters) > 0 || len(o.NoTrace) > 0 || o.Depth > 0 || o.Threshold > 0 || len(o.Tids) > 0 || o.MaxStack > 0 ||
		len(o.Hide) > 0 || len(o.Callers) > 0 || len(o.Triggers) > 0 || o.Disabled
}

// qualified says whether a pattern names a module (FUNC@MODULE): the
// filter then needs to know where each function is.
func (o FuncOptions) qualified() bool {
	if uftrace.Qualified(o.Filters) || uftrace.Qualified(o.NoTrace) || uftrace.Qualified(o.Hide) || uftrace.Qualified(o.Callers) {
		return true
	}
	for _, tr := range o.Triggers {
		if tr.Module != "" {
			return true
		}
	}
	return false
}

// holds says whether the filter may hold entries until their exit: a
// time filter (-t, time=) or a caller filter is set.
func (o FuncOptions) holds() bool {
	if o.Threshold > 0 || o.callerFilter() {
		return true
	}
	for _, tr := range o.Triggers {
		if tr.HasTime {
			return true
		}
	}
	return false
}

// callerFilter says whether a -C pattern or a caller trigger is set.
func (o FuncOptions) callerFilter() bool {
	if len(o.Callers) > 0 {
		return true
	}
	for _, tr := range o.Triggers {
		if tr.Caller {
			return true
		}
	}
	return false
}

// NewFuncFilter returns the uftrace.Filter of o, for uftrace.Copy. parent,
// when not nil, names the task a forked process's main thread came from
// (uftrace.Reader.Parent): the child's stack starts as its parent's was.
// matched, when not nil, says whether a pattern matches one of the
// functions of a session (of module, when not ""): a -F that matches none
// is ignored, as uftrace ignores it.
func NewFuncFilter(o FuncOptions, parent func(tid int) int, matched func(sid string, p uftrace.Pattern, module string) bool, size func(sid string, addr uint64) uint64) uftrace.Filter {
	f := newFuncFilter(o, parent)
	f.matched, f.size = matched, size
	return f
}

// Sizes returns the size function of NewFuncFilter for the functions of
// r's sessions: their symbols' st_size, as while recording, read from the
// modules' files when they are here; else the distance to the next line
// of the module's .sym (which counts the padding after a function).
func Sizes(r *uftrace.Reader) func(sid string, addr uint64) uint64 {
	sizes := map[[2]uint64]uint64{}
	sorted := map[int][]*uftrace.Module{} // each session's modules by address
	return func(sid string, addr uint64) uint64 {
		for si, s := range r.Sessions {
			if s.SID != sid {
				continue
			}
			key := [2]uint64{uint64(si), addr}
			if n, ok := sizes[key]; ok {
				return n
			}
			mods, ok := sorted[si]
			if !ok {
				mods = slices.Clone(s.Modules)
				slices.SortFunc(mods, func(a, b *uftrace.Module) int { return cmp.Compare(a.Base, b.Base) })
				sorted[si] = mods
			}
			n, ok := elfSize(mods, addr)
			if !ok {
				n = s.Size(addr)
			}
			sizes[key] = n
			return n
		}
		return 0
	}
}

// Matched returns the matched function of NewFuncFilter for the functions
// of r's sessions: their modules' symbols.
func Matched(r *uftrace.Reader) func(sid string, p uftrace.Pattern, module string) bool {
	return func(sid string, p uftrace.Pattern, module string) bool {
		for _, s := range r.Sessions {
			if s.SID != sid {
				continue
			}
			for _, m := range s.Modules {
				if m.Syms == nil {
					continue
				}
				for _, sym := range m.Syms.Syms {
					if sym.Type == '?' {
						continue
					}
					if uftrace.MatchModule(s.Where(m, sym), module) && p.MatchSymbol(sym.Name) {
						return true
					}
				}
			}
		}
		return false
	}
}

func newFuncFilter(o FuncOptions, parent func(tid int) int) *funcFilter {
	f := &funcFilter{opts: o, parent: parent, tasks: map[int]*funcTask{}, enabled: !o.Disabled, callers: o.callerFilter()}
	f.holds = o.Threshold > 0 || f.callers || slices.ContainsFunc(o.Triggers, func(tr uftrace.Trigger) bool { return tr.HasTime })
	return f
}

// funcFilter follows each task's call stack from the records' depths, as
// uftrace replay's filters do (utils/fstack.c: fstack_entry and
// get_task_ustack of uftrace v0.13). A call is kept when it is under a -F
// function (or there is no -F), under no -N function, not hidden (-H),
// and fewer than -D kept calls below the innermost -F function or depth=
// trigger (or the bottom); kept records are written with their depth among
// kept calls. With -t (or a time= trigger) an entry waits on the stack
// until its exit shows the call lasted long enough; with -C, until its exit
// shows it was a call of a -C function. A call that passes makes its
// waiting callers pass too, so the filter holds at most one stack of
// entries per task. Levels a task's records start below (a forked child, a
// trace started mid-run) get stand-in frames: the parent's when known,
// else frames kept unless a -F is needed. trace_off and trace_on triggers
// switch tracing for every task, as uftrace's do; a finish trigger ends
// it.
type funcFilter struct {
	opts   FuncOptions
	parent func(tid int) int
	// matched says whether a pattern matches a function of a session
	// (nil: take every pattern as matching); inMode caches what it says of
	// the -F patterns and filter triggers, by session.
	matched  func(sid string, p uftrace.Pattern, module string) bool
	inMode   map[string]bool
	tasks    map[int]*funcTask
	enabled  bool // no trace_off trigger since the last trace_on
	finished bool // a finish trigger was hit: nothing more is kept
	callers  bool // a caller filter is set
	holds    bool // an entry may wait for its exit (-t, time=, -C)
	// size is the size of the function at addr in session sid (size=
	// triggers), nil when unknown: size= then leaves every call in.
	size func(sid string, addr uint64) uint64
}

type funcTask struct {
	stack []funcFrame
	last  uint64 // time of the task's last record
	sid   string // its session (an exec starts another)
}

// funcFrame is one call on a task's stack.
type funcFrame struct {
	addr    uint64
	inDepth int  // the record's depth
	in, out bool // under a -F function; under a -N function
	kept    bool // its entry is written (counted, and tracing was on)
	// counted: a level of the output's depth, whether tracing is on or
	// not, as uftrace's record_idx counts every call its filters let
	// through (libmcount/mcount.c, mcount_entry_filter_record): a call
	// entered while tracing was off has its exit written if tracing is
	// on again by then, at its depth.
	counted bool
	stand   bool          // a stand-in for a call whose entry is not in the data
	depth   int           // output depth when kept
	nkept   int           // kept calls on the stack up to this one
	dnext   int           // -D depth of a kept call under this one
	limit   int           // the -D or depth= limit on dnext (-1: none)
	entry   uint64        // entry time
	pending *uftrace.Item // -t, -C: entry not yet written
	// threshold is the -t or time= of the call; caller: a -C function;
	// trace: shown whatever threshold says ("trace" trigger).
	threshold     uint64
	caller, trace bool
	// minSize: the size= of the call or of one it is under; a function
	// smaller is left out, its calls kept, as libmcount's size filter
	// (mcount_entry_filter_record: MCOUNT_FL_NORECORD).
	minSize uint64
}

// filtered says whether -F (filter) or -N (notrace) selects the function
// name at w: of a function both match, the one given last (FilterOrder).
func (o *FuncOptions) filtered(name string, w uftrace.Where) (filter, notrace bool) {
	filter, notrace = uftrace.MatchAnyIn(o.Filters, name, w), uftrace.MatchAnyIn(o.NoTrace, name, w)
	if !filter || !notrace || len(o.FilterOrder) != len(o.Filters)+len(o.NoTrace) {
		return filter, notrace
	}
	i, j := 0, 0
	for _, out := range o.FilterOrder {
		if out {
			if o.NoTrace[j].MatchIn(name, w) {
				filter, notrace = false, true
			}
			j++
		} else {
			if o.Filters[i].MatchIn(name, w) {
				filter, notrace = true, false
			}
			i++
		}
	}
	return filter, notrace
}

// acts is what the options say of one function.
type acts struct {
	filter, notrace, hide, caller, trace, on, off, finish bool
	depth                                                 int // -1: no depth= trigger
	time                                                  uint64
	hasTime                                               bool
	size                                                  uint64
	hasSize                                               bool
}

// actsOf merges what -F, -N, -H, -C and the triggers say of the function
// name at w ("" for a stand-in: nothing).
func (f *funcFilter) actsOf(name string, w uftrace.Where) acts {
	a := acts{depth: -1}
	if name == "" {
		return a
	}
	o := &f.opts
	a.filter, a.notrace = o.filtered(name, w)
	a.hide, a.caller = uftrace.MatchAnyIn(o.Hide, name, w), uftrace.MatchAnyIn(o.Callers, name, w)
	for i := range o.Triggers {
		tr := &o.Triggers[i]
		if !tr.Func.MatchSymbol(name) || !uftrace.MatchModule(w, tr.Module) {
			continue
		}
		a.filter, a.notrace, a.hide, a.caller = a.filter || tr.Filter, a.notrace || tr.NoTrace, a.hide || tr.Hide, a.caller || tr.Caller
		a.trace, a.on, a.off, a.finish = a.trace || tr.Trace, a.on || tr.TraceOn, a.off || tr.TraceOff, a.finish || tr.Finish
		if tr.HasDepth {
			a.depth = tr.Depth
		}
		if tr.HasTime {
			a.time, a.hasTime = tr.Time, true
		}
		if tr.HasSize {
			a.size, a.hasSize = tr.Size, true
		}
	}
	return a
}

func (f *funcFilter) Record(it *uftrace.Item, emit func(*uftrace.Item) error) error {
	if len(f.opts.Tids) > 0 && !f.opts.Tids[it.Tid] || f.finished {
		return nil
	}
	t := f.tasks[it.Tid]
	if t == nil {
		t = f.newTask(it.Tid)
	}
	t.last, t.sid = it.Time, it.Session
	switch it.Type {
	case uftrace.Entry:
		return f.entry(t, it, emit)
	case uftrace.Exit:
		return f.exit(t, it, emit)
	}
	// Events and lost records belong to the innermost call.
	top := f.top(t)
	if !f.inside(top) || !f.enabled {
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
		root := funcFrame{in: !f.filterMode(t.sid), limit: -1, threshold: f.opts.Threshold}
		if f.opts.Depth > 0 {
			root.limit = f.opts.Depth
		}
		return root
	}
	return t.stack[len(t.stack)-1]
}

// filterMode says whether only calls under a -F function (or a filter
// trigger's) are kept in session sid: when one of those patterns matches
// a function of it, the executable's or a library's. uftrace ignores one
// that matches nothing (utils/filter.c, setup_trigger: the filter mode is
// set only by a pattern that matched), in each process it records.
func (f *funcFilter) filterMode(sid string) bool {
	if in, ok := f.inMode[sid]; ok {
		return in
	}
	in := false
	for _, p := range f.opts.Filters {
		in = in || f.matched == nil || f.matched(sid, p, p.Module())
	}
	for _, tr := range f.opts.Triggers {
		in = in || tr.Filter && (f.matched == nil || f.matched(sid, tr.Func, tr.Module))
	}
	if f.inMode == nil {
		f.inMode = map[string]bool{}
	}
	f.inMode[sid] = in
	return in
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
func (f *funcFilter) frame(t *funcTask, d int, addr uint64, name string, w uftrace.Where) funcFrame {
	p := f.top(t)
	a := f.actsOf(name, w)
	fr := funcFrame{
		addr:      addr,
		inDepth:   d,
		in:        p.in || a.filter,
		out:       p.out || a.notrace,
		stand:     name == "",
		depth:     p.nkept,
		nkept:     p.nkept,
		limit:     p.limit,
		threshold: p.threshold,
		caller:    a.caller,
		trace:     a.trace,
		minSize:   p.minSize,
	}
	if a.hasTime {
		fr.threshold = a.time
	}
	if a.hasSize {
		fr.minSize = a.size
	}
	small := fr.minSize > 0 && name != "" && f.size != nil && f.size(t.sid, addr) < fr.minSize
	dd := p.dnext
	if a.filter {
		// uftrace counts -D from the innermost -F function
		dd, fr.limit = 0, -1
		if f.opts.Depth > 0 {
			fr.limit = f.opts.Depth
		}
	}
	if a.depth >= 0 {
		dd, fr.limit = 0, a.depth
	}
	fr.dnext = dd // a call not kept is no level (uftrace: not counted)
	if f.inside(fr) {
		// Only where the filters let a call through, as in uftrace.
		if a.on {
			f.enabled = true
		}
		if a.off {
			f.enabled = false
		}
		if a.finish {
			f.finished = true // after this entry
		}
	}
	fr.counted = f.inside(fr) && !a.hide && !small && (fr.limit < 0 || dd < fr.limit) && (f.opts.MaxStack == 0 || d < f.opts.MaxStack)
	fr.kept = fr.counted && f.enabled
	if fr.counted {
		fr.nkept++
		fr.dnext = dd + 1
	}
	return fr
}

// waits says whether a kept call's entry waits for its exit: its exit
// decides (-t, time=, -C).
func (f *funcFilter) waits(fr *funcFrame) bool { return fr.threshold > 0 || f.callers }

// drop says whether a call whose entry waited, and that lasted dur, is
// left out: too short, or no -C function.
func (f *funcFilter) drop(fr *funcFrame, dur uint64) bool {
	return !fr.trace && (dur < fr.threshold || f.callers && !fr.caller)
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
		t.stack = append(t.stack, f.frame(t, next, 0, "", uftrace.Where{}))
	}
}

// inside says whether calls under fr are kept by -F and -N.
func (f *funcFilter) inside(fr funcFrame) bool { return fr.in && !fr.out }

func (f *funcFilter) entry(t *funcTask, it *uftrace.Item, emit func(*uftrace.Item) error) error {
	t.unwind(it.Depth)
	f.fill(t, it.Depth)
	fr := f.frame(t, it.Depth, it.Addr, it.Func, it.Where)
	fr.entry = it.Time
	if fr.kept {
		it.Depth = fr.depth
		switch {
		case f.finished:
			// A finish trigger: nothing comes after this entry, so what
			// waits is written now, and this entry with it.
			if err := f.flush(t, len(t.stack), emit); err != nil {
				return err
			}
			if err := emit(it); err != nil {
				return err
			}
		case f.waits(&fr):
			fr.pending = it
		default:
			// Callers waiting for their exits (-t, time=, -C) are written
			// first, as uftrace writes a recorded call's unwritten callers
			// (libmcount/record.c, record_trace_data): time order.
			if f.holds {
				if err := f.flush(t, len(t.stack), emit); err != nil {
					return err
				}
			}
			if err := emit(it); err != nil {
				return err
			}
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
		if _, out := f.opts.filtered(it.Func, it.Where); !fr.counted || fr.pending != nil || !f.enabled || out {
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
	if !fr.counted || !f.enabled { // uftrace shows no exit while tracing is off
		return nil
	}
	if (fr.pending != nil || !fr.kept && f.waits(&fr)) && f.drop(&fr, it.Time-fr.entry) {
		// Too short, or no -C function; a call entered while tracing was
		// off is judged so at its exit too (libmcount/mcount.c,
		// mcount_exit_filter_record).
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
			if fr.pending != nil && !f.drop(&fr, t.last-fr.entry) {
				n = i + 1
			}
		}
		if err := f.flush(t, n, emit); err != nil {
			return err
		}
	}
	return nil
}
