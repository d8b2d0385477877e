package postproc

import (
	"bytes"
	"slices"
	"sort"

	"rtrace/internal/elfx"
	"rtrace/internal/trace"
	"rtrace/internal/uftrace"
)

// NewFuncStage returns the post-processor's stage of a function trace: it
// applies uftrace's function filters o to the batches of records passing
// through, with the same filter `rtrace postproc -i DIR -d OUT` applies to
// a uftrace.data directory (NewFuncFilter), whichever engine recorded
// them, and passes the records kept and every other item on to next.
// Function names come from the stream's Symbols items. Without a filter
// it returns next itself: nothing to do per record.
func NewFuncStage(o FuncOptions, next trace.Writer) trace.Writer {
	if !o.Active() {
		return next
	}
	s := &funcStage{next: next, hold: o.holds(), names: map[string]map[uint64]string{},
		sids: map[int]string{}, pids: map[int]int{}, out: map[int][]trace.Rec{}}
	sized := slices.ContainsFunc(o.Triggers, func(tr uftrace.Trigger) bool { return tr.HasSize })
	if o.qualified() || len(o.Filters) > 0 || sized || slices.ContainsFunc(o.Triggers, func(tr uftrace.Trigger) bool { return tr.Filter }) {
		s.where = map[string]*whereIndex{}
	}
	s.filter = newFuncFilter(o, nil)
	s.filter.matched = s.matched
	if sized {
		s.filter.size = func(sid string, addr uint64) uint64 {
			if w := s.where[sid]; w != nil {
				return w.size(addr)
			}
			return 0
		}
	}
	s.emit = func(it *uftrace.Item) error {
		s.out[it.Tid] = append(s.out[it.Tid], trace.Rec{Record: it.Record, Payload: it.Payload})
		return nil
	}
	return s
}

type funcStage struct {
	next   trace.Writer
	filter *funcFilter
	emit   func(*uftrace.Item) error
	// hold: the filter keeps entries past the batch (-t, time=, -C), so
	// each record gets its own item and payload.
	hold  bool
	item  uftrace.Item
	names map[string]map[uint64]string // function names by session, by address
	sids  map[int]string               // session of each process
	pids  map[int]int                  // process of each task
	out   map[int][]trace.Rec          // records kept, by task, not yet passed on
	// where finds the module of each function, by session, when a
	// pattern names one (FUNC@MODULE) or a -F may match nothing
	// (matched); nil otherwise.
	where map[string]*whereIndex
}

func (s *funcStage) Write(it trace.Item) error {
	switch v := it.(type) {
	case *trace.Records:
		return s.records(v)
	case *trace.Session:
		s.sids[v.Pid], s.pids[v.Pid] = v.SID, v.Pid
		if s.where != nil {
			s.where[v.SID] = newWhereIndex(v.Exe, v.Maps)
		}
	case *trace.Maps:
		if w := s.where[v.SID]; w != nil {
			w.setMaps(v.Maps)
		}
	case *trace.Task:
		if v.PPid != 0 {
			s.sids[v.Pid] = s.sids[v.PPid]
			s.filter.startFork(v.Pid, v.PPid)
		}
		if !v.Exit {
			s.pids[v.Tid] = v.Pid
		}
	case *trace.Symbols:
		m := s.names[v.SID]
		if m == nil {
			m = map[uint64]string{}
			s.names[v.SID] = m
		}
		for _, f := range v.Funcs {
			m[f.Addr] = f.Name
		}
	}
	return s.next.Write(it)
}

// records filters one batch and passes on what it keeps.
func (s *funcStage) records(v *trace.Records) error {
	sid := s.sids[s.pids[v.Tid]]
	names, where := s.names[sid], s.where[sid]
	for _, r := range v.Recs {
		it := &s.item
		if s.hold {
			it = &uftrace.Item{}
			r.Payload = slices.Clone(r.Payload)
		}
		*it = uftrace.Item{Tid: v.Tid, Record: r.Record, Payload: r.Payload}
		it.Session = sid
		if r.Type == uftrace.Entry || r.Type == uftrace.Exit {
			it.Func = names[r.Addr]
			if where != nil {
				it.Where = where.at(r.Addr)
			}
		}
		if err := s.filter.Record(it, s.emit); err != nil {
			return err
		}
	}
	return s.flush()
}

// flush passes on the records kept so far, task by task.
func (s *funcStage) flush() error {
	for tid, recs := range s.out {
		if len(recs) == 0 {
			continue
		}
		if err := s.next.Write(&trace.Records{Tid: tid, Recs: recs}); err != nil {
			return err
		}
		s.out[tid] = recs[:0]
	}
	return nil
}

// Close passes on the calls the filter still holds (open at the end, -t),
// then closes the next stage.
func (s *funcStage) Close() error {
	err := s.filter.End(s.emit)
	if err == nil {
		err = s.flush()
	}
	if cerr := s.next.Close(); err == nil {
		err = cerr
	}
	return err
}

// whereIndex finds where the functions of one session are: the module
// its maps place an address in, and whether the address is one of the
// executable's calls into libraries (its PLT stubs and GOT slots, as the
// .sym files' P symbols).
type whereIndex struct {
	exe      string
	mods     []*uftrace.Module
	exeIndex int             // the executable's in mods (-1: not mapped)
	plt      map[uint64]bool // runtime addresses; nil until the executable's base is known
	sizes    map[uint64]uint64
}

func newWhereIndex(exe string, maps []byte) *whereIndex {
	w := &whereIndex{exe: exe}
	w.setMaps(maps)
	return w
}

// setMaps takes the session's maps as they are now (a dlopen, a dlclose).
func (w *whereIndex) setMaps(maps []byte) {
	mm, err := uftrace.ParseMaps(bytes.NewReader(maps))
	if err != nil {
		return
	}
	w.mods = uftrace.Modules(mm)
	w.sizes = nil // another library may be where one was
	// The executable: by its path, else the first file mapped.
	i := slices.IndexFunc(w.mods, func(m *uftrace.Module) bool { return m.Path == w.exe })
	if i < 0 && len(w.mods) > 0 {
		i = 0
	}
	w.exeIndex = i
	if w.plt != nil || i < 0 {
		return
	}
	w.plt = map[uint64]bool{}
	if f, err := elfx.Open(w.mods[i].Path); err == nil {
		bias := f.Bias(w.mods[i].Base)
		for _, im := range f.Imports {
			addr, _ := im.Site()
			w.plt[addr+bias] = true
		}
	}
}

// size is the size of the function at runtime address addr: its symbol's
// (st_size, as libmcount's size filter reads it), 16 for a PLT stub of the
// executable (uftrace's PLT symbols), 0 when unknown.
func (w *whereIndex) size(addr uint64) uint64 {
	if n, ok := w.sizes[addr]; ok {
		return n
	}
	var n uint64
	if w.plt[addr] {
		n = 16
	} else {
		n, _ = elfSize(w.mods, addr)
	}
	if w.sizes == nil {
		w.sizes = map[uint64]uint64{}
	}
	w.sizes[addr] = n
	return n
}

// elfSize is the st_size of the function at runtime address addr in the
// file of the module of mods (sorted by address) that holds it, 16 for a
// PLT stub; false when no module holds it or its file cannot be read.
func elfSize(mods []*uftrace.Module, addr uint64) (uint64, bool) {
	m := moduleAt(mods, addr)
	if m == nil {
		return 0, false
	}
	f, err := elfx.Open(m.Path)
	if err != nil {
		return 0, false
	}
	off := addr - f.Bias(m.Base)
	j := sort.Search(len(f.Funcs), func(j int) bool { return f.Funcs[j].Value > off }) - 1
	if j >= 0 && off < f.Funcs[j].Value+f.Funcs[j].Size {
		return f.Funcs[j].Size, true
	}
	for _, im := range f.Imports {
		if im.Stub != 0 && off >= im.Stub && off < im.Stub+im.StubSize {
			return 16, true // a PLT stub: uftrace's PLT symbols are 16 bytes
		}
	}
	return 0, true
}

// at says where the function at addr is.
func (w *whereIndex) at(addr uint64) uftrace.Where {
	m := moduleAt(w.mods, addr)
	if m == nil {
		return uftrace.Where{}
	}
	return uftrace.Where{Module: m.Path, PLT: w.plt[addr]}
}

// moduleAt is the module of mods (sorted by address) that holds addr, nil
// for none.
func moduleAt(mods []*uftrace.Module, addr uint64) *uftrace.Module {
	i := sort.Search(len(mods), func(i int) bool { return mods[i].End > addr })
	if i == len(mods) || addr < mods[i].Base {
		return nil
	}
	return mods[i]
}

// matched says whether p matches a function of session sid (of module,
// when not ""), for the function filter: one the stream named, or a symbol
// of a module its maps hold (the executable's imports as PLT), as uftrace
// matches a filter against every module's symbol table.
func (s *funcStage) matched(sid string, p uftrace.Pattern, module string) bool {
	w := s.where[sid]
	for addr, name := range s.names[sid] {
		if p.MatchSymbol(name) && (module == "" || w != nil && uftrace.MatchModule(w.at(addr), module)) {
			return true
		}
	}
	if w == nil {
		return false
	}
	for i, m := range w.mods {
		f, err := elfx.Open(m.Path)
		if err != nil {
			continue
		}
		if uftrace.MatchModule(uftrace.Where{Module: m.Path}, module) &&
			slices.ContainsFunc(f.Funcs, func(fn elfx.Func) bool { return p.MatchSymbol(fn.Name) }) {
			return true
		}
		// The executable's imports: its calls into libraries (PLT).
		if i == w.exeIndex && uftrace.MatchModule(uftrace.Where{Module: m.Path, PLT: true}, module) &&
			slices.ContainsFunc(f.Imports, func(im elfx.Import) bool { return p.MatchSymbol(im.Name) }) {
			return true
		}
	}
	return false
}
