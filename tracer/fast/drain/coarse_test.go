package drain

import (
	"testing"

	"rtrace/tracer/fast"
)

// The coarse clock: the drain's ticks only move it forward, an event the
// tracer queues moves it past the event's time, a state put on it starts
// past what is queued, and a state the drainer
// forgot (its thread or image ended: it may be unmapped) is never written.
func TestCoarseClock(t *testing.T) {
	d := New(discardSink{}, fast.FixedClock(1), func(uint64) {})
	st := fast.NewState(make([]byte, fast.StateSize), 0)
	d.Add(st, 1)
	before := fast.ReadTSC()
	d.SetCoarse(st, true)
	c := st.Coarse()
	if c < before {
		t.Fatalf("coarse clock %d, set after TSC %d", c, before)
	}
	// The ticker stopped (its last tick done), the clock moves only as
	// the test says.
	d.tickStop.Store(true)
	<-d.tickDone
	c = st.Coarse()
	d.tickCoarse(c - 1000)
	if st.Coarse() != c {
		t.Errorf("a tick moved the clock back: %d -> %d", c, st.Coarse())
	}
	far := c + 1000
	d.tickCoarse(far)
	if st.Coarse() != far {
		t.Errorf("a tick to %d left %d", far, st.Coarse())
	}
	// An event: the calls after it are later than it.
	st.SetCoarse(1)
	d.Event(func() error { return nil })
	d.mu.Lock()
	ev := d.order.queues[nil].items[0].tsc
	d.mu.Unlock()
	if st.Coarse() != ev+1 {
		t.Errorf("event at %d, coarse clock %d: not just past it", ev, st.Coarse())
	}
	// A state put on the clock now starts past the queued event, even
	// where its CPU's TSC would say earlier.
	st2 := fast.NewState(make([]byte, fast.StateSize), 0)
	d.Add(st2, 2)
	d.mu.Lock()
	d.order.queues[nil].last = fast.ReadTSC() + 1<<40
	d.mu.Unlock()
	d.SetCoarse(st2, true)
	if st2.Coarse() <= d.order.queues[nil].last {
		t.Errorf("a new state's clock %d, before the queued %d", st2.Coarse(), d.order.queues[nil].last)
	}
	// Back on the TSC.
	d.SetCoarse(st, false)
	if st.Coarse() != 0 {
		t.Errorf("off the coarse clock: %d", st.Coarse())
	}
	// Forgotten: not written.
	d.SetCoarse(st, true)
	d.Remove(st)
	st.SetCoarse(42)
	d.SetCoarse(st, false)
	d.tickCoarse(fast.ReadTSC())
	if st.Coarse() != 42 {
		t.Errorf("a forgotten state was written: %d", st.Coarse())
	}
}
