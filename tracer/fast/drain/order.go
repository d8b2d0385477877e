package drain

import (
	"container/heap"

	"rtrace/internal/trace"
	"rtrace/tracer/fast"
)

// The resource calls of every thread in time order (docs/FAST-PATH.md,
// "Resource calls in time order"). Each thread's ring holds its calls in
// the order it made them; a call made after another thread's, that it
// depends on (a block one thread allocates, another frees), must reach
// the sink after it: the leak report pairs them in the order it reads
// them. The drain reads the rings one batch at a time; the calls it
// decodes wait here, each ring's in a queue, and leave merged by their
// TSC readings up to a watermark: the TSC read (ReadTSC) before a sweep
// that then read every ring to its end. A call c that depends on a call
// d of another thread was made after d's thread published d's records
// (they are written before d returns what c uses), so d's records were in
// its ring before c's TSC reading; when c is below the watermark, d was
// in its ring before the sweep began, and the sweep read it. A ring the
// sweep did not read to its end (a thread writing as fast as the drain
// reads) lowers the watermark to its last call's time: its later calls
// come after it.

// resPend is a call a ring held, decoded, waiting for its turn; or, with
// lost set, the calls its thread dropped on a full ring.
type resPend struct {
	tsc     uint64 // its place in time: the call's, or its releases' (part)
	callTSC uint64 // the call's record's
	tid     int
	id      uint32
	part    resPart
	n       uint8 // payload words
	words   [resPayloadMax]uint64
	frames  []trace.Frame // its backtrace (ringRes.framesOf: never written again)
	lost    uint64
	ev      func() error // an event of the tracer's instead
}

// resPayloadMax is the most payload words a call carries: six arguments,
// the result and the out word.
const resPayloadMax = 8

// resQueue is one ring's calls waiting, in ring order.
type resQueue struct {
	items []resPend
	head  int
	last  uint64 // the TSC of the last call read from the ring
	owner int    // the tid of the last call queued
}

func (q *resQueue) empty() bool { return q.head == len(q.items) }

// pop drops the head; an emptied queue starts again at the beginning of
// its slice.
func (q *resQueue) pop() {
	q.items[q.head].frames, q.items[q.head].ev = nil, nil
	if q.head++; q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
		if cap(q.items) > 1<<13 {
			q.items = nil // a burst's room goes back
		}
	}
}

// resOrder holds the queues of every ring.
type resOrder struct {
	queues map[*fast.State]*resQueue
	merge  resHeap // flush's, reused
	n      int     // calls and events queued
}

// queue returns st's queue, its consumed head moved out when it is the
// larger part (a queue that never empties does not grow without end).
func (o *resOrder) queue(st *fast.State) *resQueue {
	q := o.queues[st]
	if q == nil {
		if o.queues == nil {
			o.queues = map[*fast.State]*resQueue{}
		}
		q = &resQueue{}
		o.queues[st] = q
	}
	if q.head >= 64 && 2*q.head >= len(q.items) {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	return q
}

// push queues part of call c of tid's ring st, its backtrace frames, at
// TSC tsc.
func (o *resOrder) push(st *fast.State, tid int, c *fast.ResCall, frames []trace.Frame, tsc uint64, part resPart) {
	q := o.queue(st)
	o.n++
	q.items = append(q.items, resPend{tsc: tsc, callTSC: c.TSC, tid: tid, id: c.ID, part: part, frames: frames})
	p := &q.items[len(q.items)-1]
	p.n = uint8(copy(p.words[:], c.Words))
	q.last, q.owner = max(q.last, c.TSC), tid
}

// pushEvent queues an event of the tracer's at TSC tsc, after the ones
// before it.
func (o *resOrder) pushEvent(tsc uint64, ev func() error) {
	q := o.queue(nil)
	o.n++
	tsc = max(tsc, q.last)
	q.items = append(q.items, resPend{tsc: tsc, ev: ev})
	q.last = tsc
}

// pushLost queues, after the calls read before it, the loss of n calls
// of tid's ring st.
func (o *resOrder) pushLost(st *fast.State, tid int, n uint64) {
	q := o.queue(st)
	o.n++
	q.items = append(q.items, resPend{tsc: q.last, tid: tid, lost: n})
	q.owner = tid
}

// last is the TSC of the last call read from st's ring (0: none).
func (o *resOrder) last(st *fast.State) uint64 {
	if q := o.queues[st]; q != nil {
		return q.last
	}
	return 0
}

// flush hands emit, in time order, what is queued below the watermark
// wm, each queue in its order.
func (o *resOrder) flush(wm uint64, emit func(p *resPend)) {
	h := &o.merge
	h.qs = h.qs[:0]
	for _, q := range o.queues {
		if !q.empty() && q.items[q.head].tsc < wm {
			h.qs = append(h.qs, q)
		}
	}
	if len(h.qs) == 1 { // one queue: no merge
		q := h.qs[0]
		for !q.empty() && q.items[q.head].tsc < wm {
			emit(&q.items[q.head])
			q.pop()
			o.n--
		}
		return
	}
	heap.Init(h)
	for h.Len() > 0 {
		q := h.qs[0]
		emit(&q.items[q.head])
		q.pop()
		o.n--
		if q.empty() || q.items[q.head].tsc >= wm {
			heap.Pop(h) // its later ones are later still
		} else {
			heap.Fix(h, 0)
		}
	}
}

// forget drops st's queue once empty (its ring is gone).
func (o *resOrder) forget(st *fast.State) {
	if q := o.queues[st]; q != nil && q.empty() {
		delete(o.queues, st)
	}
}

// resHeap orders queues by their head's time.
type resHeap struct{ qs []*resQueue }

func (h *resHeap) Len() int { return len(h.qs) }
func (h *resHeap) Less(i, j int) bool {
	return h.qs[i].items[h.qs[i].head].tsc < h.qs[j].items[h.qs[j].head].tsc
}
func (h *resHeap) Swap(i, j int) { h.qs[i], h.qs[j] = h.qs[j], h.qs[i] }
func (h *resHeap) Push(x any)    { h.qs = append(h.qs, x.(*resQueue)) }
func (h *resHeap) Pop() any {
	n := len(h.qs) - 1
	h.qs = h.qs[:n]
	return nil
}
