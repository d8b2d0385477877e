package drain

import (
	"fmt"
	"slices"
	"testing"

	"rtrace/tracer/fast"
)

// TestResOrderMerges: calls queued from several rings leave in time order,
// each ring's in its order, those below the watermark only; the tracer's
// events go among them by their time; a loss follows its ring's calls.
func TestResOrderMerges(t *testing.T) {
	var o resOrder
	a, b := &fast.State{}, &fast.State{}
	var out []string
	emit := func(p *resPend) {
		switch {
		case p.ev != nil:
			p.ev()
		case p.lost > 0:
			out = append(out, fmt.Sprintf("lost%d@%d", p.lost, p.tsc))
		default:
			out = append(out, fmt.Sprintf("%d:%d@%d", p.tid, p.words[0], p.tsc))
		}
	}
	call := func(tsc, w uint64) *fast.ResCall { return &fast.ResCall{TSC: tsc, Words: []uint64{w}} }
	o.push(a, 1, call(10, 100), nil, 10, resAll)
	o.push(a, 1, call(30, 101), nil, 30, resAll)
	o.push(b, 2, call(20, 200), nil, 20, resAll)
	o.push(b, 2, call(40, 201), nil, 40, resAll)
	o.pushLost(b, 2, 3)
	o.pushEvent(25, func() error { out = append(out, "event@25"); return nil })
	if o.last(a) != 30 || o.last(b) != 40 || o.last(&fast.State{}) != 0 {
		t.Fatalf("last: %d %d", o.last(a), o.last(b))
	}
	o.flush(35, emit)
	want := []string{"1:100@10", "2:200@20", "event@25", "1:101@30"}
	if !slices.Equal(out, want) {
		t.Fatalf("below 35: %v, want %v", out, want)
	}
	out = nil
	o.push(a, 1, call(50, 102), nil, 50, resAll)
	o.flush(1000, emit)
	want = []string{"2:201@40", "lost3@40", "1:102@50"}
	if !slices.Equal(out, want) {
		t.Fatalf("the rest: %v, want %v", out, want)
	}
	out = nil
	o.flush(1000, emit)
	if len(out) != 0 {
		t.Fatalf("emitted twice: %v", out)
	}
	o.forget(a)
	if _, ok := o.queues[a]; ok {
		t.Error("an empty queue of a gone ring is kept")
	}
}

// TestResOrderOneQueue: with one queue (one thread), the calls leave in
// their order up to the watermark, and a queue that never empties keeps
// only what waits.
func TestResOrderOneQueue(t *testing.T) {
	var o resOrder
	st := &fast.State{}
	var got []uint64
	emit := func(p *resPend) { got = append(got, p.tsc) }
	const rounds = 1000
	for round := range rounds {
		for i := range 100 {
			o.push(st, 1, &fast.ResCall{TSC: uint64(round*1000 + i)}, nil, uint64(round*1000+i), resAll)
		}
		o.flush(uint64(round*1000+50), emit)
	}
	if q := o.queues[st]; cap(q.items) > 1024 {
		t.Errorf("a queue of 50 waiting calls holds room for %d", cap(q.items))
	}
	o.flush(1<<62, emit)
	if len(got) != 100*rounds || !slices.IsSorted(got) {
		t.Fatalf("%d calls, sorted %v", len(got), slices.IsSorted(got))
	}
}
