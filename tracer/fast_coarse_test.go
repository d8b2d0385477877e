package tracer

import (
	"testing"

	"rtrace/tracer/fast"
)

// The coarse clock: the drain's ticks only move it forward, an event the
// tracer queues moves it past the event's time, and a state the drainer
// forgot (its thread or image ended: it may be unmapped) is never written.
func TestCoarseClock(t *testing.T) {
	d := newDrainer(discardSink{}, fast.FixedClock(1), func(uint64) {})
	st := fast.NewState(make([]byte, fast.StateSize), 0)
	d.add(st, 1)
	before := fast.ReadTSC()
	d.setCoarse(st, true)
	c := st.Coarse()
	if c < before {
		t.Fatalf("coarse clock %d, set after TSC %d", c, before)
	}
	d.mu.Lock()
	d.tickCoarseLocked(c - 1000)
	d.mu.Unlock()
	if st.Coarse() != c {
		t.Errorf("a tick moved the clock back: %d -> %d", c, st.Coarse())
	}
	d.mu.Lock()
	d.tickCoarseLocked(c + 1000)
	d.mu.Unlock()
	if st.Coarse() != c+1000 {
		t.Errorf("a tick to %d left %d", c+1000, st.Coarse())
	}
	// An event: the calls after it are later than it.
	now := fast.ReadTSC()
	(&lockedResSink{d}).Lost(1, 1)
	d.mu.Lock()
	ev := d.order.queues[nil].items[0].tsc
	d.mu.Unlock()
	if ev < now || st.Coarse() <= ev {
		t.Errorf("event at %d (after %d), coarse clock %d: not past it", ev, now, st.Coarse())
	}
	// Back on the TSC.
	d.setCoarse(st, false)
	if st.Coarse() != 0 {
		t.Errorf("off the coarse clock: %d", st.Coarse())
	}
	// Forgotten: not written.
	d.setCoarse(st, true)
	d.remove(st)
	st.SetCoarse(42)
	d.setCoarse(st, false)
	d.mu.Lock()
	d.tickCoarseLocked(fast.ReadTSC())
	d.mu.Unlock()
	if st.Coarse() != 42 {
		t.Errorf("a forgotten state was written: %d", st.Coarse())
	}
}
