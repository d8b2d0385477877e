package postproc

import (
	"sort"

	"rtrace/internal/trace"
)

// leakSet is the -l filter: the allocations not released so far.
//
// Calls are keyed by (resource type, resource ID), in call order. An
// allocation of a key already live on a refcount resource type adds a
// reference and is dropped; any other allocation takes the key over (the
// older allocation, never matched, stays a leak). A release takes a
// reference away and, at zero or for other types, drops the allocation.
// Releases are always dropped. (sp-rtrace.md, "Leak semantics".)
type leakSet struct {
	byKey map[leakKey]*live
	bySeq map[int]*live // every leak, keyed or taken over
}

type leakKey struct {
	res int
	id  uint64
}

// live is an allocation not released.
type live struct {
	call *trace.Call
	seq  int
	refs int
	show bool // passes the per-call selections
}

func newLeakSet() *leakSet {
	return &leakSet{byKey: map[leakKey]*live{}, bySeq: map[int]*live{}}
}

// add takes call number seq into account. show says whether it is to be
// written if it leaks; refcount whether its resource type counts
// references.
func (s *leakSet) add(c *trace.Call, seq int, show, refcount bool) {
	k := leakKey{c.Res, c.ID}
	l := s.byKey[k]
	if c.Alloc {
		if l != nil && refcount {
			l.refs++
			return
		}
		l = &live{call: c, seq: seq, refs: 1, show: show}
		s.byKey[k] = l
		s.bySeq[seq] = l
		return
	}
	if l == nil {
		return
	}
	if l.refs--; l.refs <= 0 || !refcount {
		delete(s.byKey, k)
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
