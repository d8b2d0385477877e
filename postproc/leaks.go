package postproc

import (
	"sort"

	"rtrace/internal/trace"
)

// leakSet is the -l filter: the allocations not released so far, in call
// order, with sp-rtrace's leak semantics (trace.Matcher; docs/sp-rtrace.md,
// "Leak semantics"). An allocation taken over by a newer one of the same
// ID is never matched and stays a leak. Releases are always dropped.
type leakSet struct {
	match *trace.Matcher[*live]
	bySeq map[int]*live // every leak, matchable or taken over
}

// live is an allocation not released.
type live struct {
	call *trace.Call
	seq  int
	show bool // passes the per-call selections
}

func newLeakSet() *leakSet {
	return &leakSet{match: trace.NewMatcher[*live](), bySeq: map[int]*live{}}
}

// add takes call number seq into account. show says whether it is to be
// written if it leaks; refcount whether its resource type counts
// references.
func (s *leakSet) add(c *trace.Call, seq int, show, refcount bool) {
	if c.Alloc {
		l := &live{call: c, seq: seq, show: show}
		if s.match.Alloc(c, refcount, l) {
			s.bySeq[seq] = l
		}
		return
	}
	if l, ok := s.match.Release(c, refcount); ok {
		delete(s.bySeq, l.seq)
	}
}

// survivors are the leaks to show, in call order.
func (s *leakSet) survivors() []*live {
	out := make([]*live, 0, len(s.bySeq))
	for _, l := range s.bySeq {
		if l.show {
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}
