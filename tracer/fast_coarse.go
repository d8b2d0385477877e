package tracer

import (
	"os"

	"rtrace/tracer/fast"
)

// The coarse clock (docs/FAST-PATH.md, "The coarse clock"): the resource
// calls of a process of one thread, traced without a function trace, take
// their time from a word of their state that the drain sets to its clock
// each round (State.SetCoarse), not from rdtsc, which costs 10-16 ns on
// these VMs (a third of a malloc's record). Their order is the ring's;
// their times lag by at most a round (about a millisecond, the longest
// nap), never backwards. The process's second thread puts it back on the
// TSC (its calls and the first thread's are merged by time) before either
// runs on: the clone event stops the first, and the second starts stopped.

// resTimeExact (RTRACE_RES_TIME=exact) keeps every resource call on the
// TSC.
var resTimeExact = os.Getenv("RTRACE_RES_TIME") == "exact"

// setCoarse puts st's resource calls on the drain's clock (on) or back on
// the TSC.
func (d *drainer) setCoarse(st *fast.State, on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
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
	st.SetCoarse(fast.ReadTSC())
}

// tickCoarseLocked sets the coarse states' clock to now, a TSC reading,
// unless it is later already: each drain round, and each event the
// tracer queues (a stop's resource call, a fork...), whose time the calls
// made after it must not precede.
func (d *drainer) tickCoarseLocked(now uint64) {
	for st := range d.coarse {
		if st.Coarse() < now {
			st.SetCoarse(now)
		}
	}
}

// coarseFor puts th's new state st on the coarse clock when th is the only
// thread of a process traced for its resource calls alone.
func (t *Tracer) coarseFor(th *thread, st *fast.State) {
	p := th.proc
	if t.funcs != nil || t.res == nil || resTimeExact || p.multi || th.vforked || t.drain == nil {
		return
	}
	for _, o := range t.threads {
		if o.proc == p && o != th {
			t.multiThreaded(p)
			return
		}
	}
	t.drain.setCoarse(st, true)
	p.coarse = st
}

// multiThreaded puts process p back on the TSC: it has a second thread.
func (t *Tracer) multiThreaded(p *process) {
	p.multi = true
	if p.coarse != nil {
		t.drain.setCoarse(p.coarse, false)
		p.coarse = nil
	}
}
