package drain

import (
	"time"

	"rtrace/tracer/fast"
)

// The coarse clock (docs/FAST-PATH.md, "The coarse clock"): the resource
// calls of a process of one thread, traced without a function trace, take
// their time from a word of their state that the drain sets to its clock
// each round, or a ticker when the drain is held up (State.SetCoarse),
// not from rdtsc, which costs 10-16 ns on
// these VMs (a third of a malloc's record). Their order is the ring's;
// their times lag by about a millisecond (a few while the drain is held
// up), never backwards. The process's second thread puts it back on the
// TSC (its calls and the first thread's are merged by time) before either
// runs on: the clone event stops the first, and the second starts stopped.

// SetCoarse puts st's resource calls on the drain's clock (on) or back on
// the TSC. The clock starts past what the tracer queued (a fork child's
// first calls come after its Fork, whatever its CPU's TSC says).
func (d *Drainer) SetCoarse(st *fast.State, on bool) {
	var start uint64
	if on {
		d.mu.Lock()
		if q := d.order.queues[nil]; q != nil {
			start = q.last + 1
		}
		d.mu.Unlock()
	}
	d.coarseMu.Lock()
	defer d.coarseMu.Unlock()
	if !on {
		// Only a state the drainer still has: one it forgot (its thread
		// or image ended) may be unmapped.
		if d.coarse[st] {
			delete(d.coarse, st)
			st.SetCoarse(0)
		}
		return
	}
	if d.coarse == nil {
		d.coarse = map[*fast.State]bool{}
	}
	d.coarse[st] = true
	st.SetCoarse(max(fast.ReadTSC(), start))
	if !d.ticking {
		d.ticking = true
		d.tickDone = make(chan struct{})
		go d.ticker()
	}
}

// forgetCoarse takes st off the coarse clock's list: it is about to be
// reset or unmapped.
func (d *Drainer) forgetCoarse(st *fast.State) {
	d.coarseMu.Lock()
	delete(d.coarse, st)
	d.coarseMu.Unlock()
}

// tickCoarse sets the coarse states' clock to now, a TSC reading, unless
// it is later already: each drain round, each event the tracer queues (a
// stop's resource call, a fork...), whose time the calls made after it
// must not precede, and the ticker's.
func (d *Drainer) tickCoarse(now uint64) {
	d.lastTick.Store(now)
	d.coarseMu.Lock()
	defer d.coarseMu.Unlock()
	for st := range d.coarse {
		if st.Coarse() < now {
			st.SetCoarse(now)
		}
	}
}

// ticker ticks the coarse clock until Close when the drain's rounds have
// not for a while: a drain held up (a sink that blocks, a slow disk or
// listener, with d.mu held) must not hold the clock. It looks every 5 ms
// (a wake each millisecond cost Lua's allocations 4% of their time, in
// paired runs), and ticks when the last tick is 2 ms old: the times lag
// by about a millisecond while the drain runs, 7 ms at most while it is
// held up. Only while rtrace itself is stopped do they lag more.
func (d *Drainer) ticker() {
	defer close(d.tickDone)
	stale := d.clock.Scale().Ticks(uint64(2 * time.Millisecond))
	for !d.tickStop.Load() {
		time.Sleep(5 * time.Millisecond)
		if now := fast.ReadTSC(); now-d.lastTick.Load() > stale {
			d.tickCoarse(now)
		}
	}
}

// stopCoarse ends the ticker (at its next turn: tickDone) and forgets
// every state: the states may be unmapped once the trace ends.
func (d *Drainer) stopCoarse() {
	d.tickStop.Store(true)
	d.coarseMu.Lock()
	clear(d.coarse)
	d.coarseMu.Unlock()
}
