package postproc

import (
	"slices"

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
	s.filter = newFuncFilter(o, nil)
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
}

func (s *funcStage) Write(it trace.Item) error {
	switch v := it.(type) {
	case *trace.Records:
		return s.records(v)
	case *trace.Session:
		s.sids[v.Pid], s.pids[v.Pid] = v.SID, v.Pid
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
	names := s.names[s.sids[s.pids[v.Tid]]]
	for _, r := range v.Recs {
		it := &s.item
		if s.hold {
			it = &uftrace.Item{}
			r.Payload = slices.Clone(r.Payload)
		}
		*it = uftrace.Item{Tid: v.Tid, Record: r.Record, Payload: r.Payload}
		if r.Type == uftrace.Entry || r.Type == uftrace.Exit {
			it.Func = names[r.Addr]
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
