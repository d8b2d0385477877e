package tracer

import (
	"os"

	"rtrace/tracer/fast"
)

// The coarse clock (docs/FAST-PATH.md, "The coarse clock"; the drain's
// side in drain/coarse.go): the resource calls of a process of one thread,
// traced without a function trace, take their time from a word of their
// state that the drain sets, not from rdtsc. The process's second thread
// puts it back on the TSC before either runs on.

// resTimeExact (RTRACE_RES_TIME=exact) keeps every resource call on the
// TSC.
var resTimeExact = os.Getenv("RTRACE_RES_TIME") == "exact"

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
	t.drain.SetCoarse(st, true)
	p.coarse = st
}

// multiThreaded puts process p back on the TSC: it has a second thread.
func (t *Tracer) multiThreaded(p *process) {
	p.multi = true
	if p.coarse != nil {
		t.drain.SetCoarse(p.coarse, false)
		p.coarse = nil
	}
}
