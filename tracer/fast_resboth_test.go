package tracer

import (
	"testing"
	"time"

	"rtrace/internal/testutil"
	"rtrace/internal/trace"
	"rtrace/tracer/fast"
	"rtrace/tracer/fast/drain"
)

// callsSink keeps the resource calls it gets.
type callsSink struct {
	discardSink
	calls []trace.Call
}

func (s *callsSink) Call(c *trace.Call) error { s.calls = append(s.calls, *c); return nil }
func (s *callsSink) Lost(int, uint64) error   { return nil }

// TestResBothEntryTime: a call that releases and allocates (DescBoth)
// reports its release at its entry's time, which its record carries after
// the arguments and the result, as exit_res writes it: with an odd count of
// words (reallocarray's three arguments) a zero pads the record after it,
// and the release was stamped with that zero.
func TestResBothEntryTime(t *testing.T) {
	clock, err := fast.NewClock()
	if err != nil {
		testutil.RequireCapability(t, "no usable TSC clock: %v", err)
	}
	for _, sym := range []string{"realloc", "reallocarray", "mremap"} {
		var rf *ResFunc
		for mi := range resModules {
			for i := range resModules[mi].Funcs {
				if resModules[mi].Funcs[i].Sym == sym {
					rf = &resModules[mi].Funcs[i]
				}
			}
		}
		if rf == nil {
			t.Fatalf("no resource function %s", sym)
		}
		st := fast.NewState(make([]byte, fast.StateSize), 0)
		d := drain.New(discardSink{}, clock, func(uint64) {})
		sink := &callsSink{}
		d.SetRes(sink, false, nil)
		n := resArgs(rf)
		s := newStub(&resFn{rf: rf, res: 1})
		s.Both = true
		id := d.AddStub(resStub(s, rf))
		d.Add(st, 1)
		entry := fast.ReadTSC()
		ret := entry + 100_000_000 // tens of milliseconds later
		// The arguments: the old block, then sizes (mremap: old size, new
		// size); the result; the entry's time.
		words := []uint64{0x5555deadb000, 16, 4, 8}[:n]
		words = append(words, 0x5555beef0000, entry)
		for _, r := range fast.ResWords(ret, id, words, nil, 0, false) {
			st.Emit(r)
		}
		d.Sync()
		// The drain's conversion may be the clock's next piece: the times
		// agree within a millisecond, where the padding's zero is hours off.
		sc := clock.Scale()
		near := func(a, b time.Duration) bool { return a-b < time.Millisecond && b-a < time.Millisecond }
		var rel, alloc *trace.Call
		for i := range sink.calls {
			if sink.calls[i].Alloc {
				alloc = &sink.calls[i]
			} else {
				rel = &sink.calls[i]
			}
		}
		if rel == nil || alloc == nil {
			t.Fatalf("%s (%d arguments): calls %+v, want a release and an allocation", sym, n, sink.calls)
		}
		if want := d.TimeOfDay(sc.Nanos(entry)); !near(rel.Time, want) {
			t.Errorf("%s (%d arguments): release at %v, want its entry's time %v", sym, n, rel.Time, want)
		}
		if want := d.TimeOfDay(sc.Nanos(ret)); !near(alloc.Time, want) {
			t.Errorf("%s (%d arguments): allocation at %v, want its return's time %v", sym, n, alloc.Time, want)
		}
	}
}
