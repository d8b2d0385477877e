package tracer

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"rtrace/internal/trace"
	"rtrace/internal/uftrace"
	"rtrace/tracer/fast"
)

// drainer moves the records of every thread's ring to the function sink
// while the program runs, and orders them before what the tracer hands
// the sink (lockedSink). One goroutine polls; the tracer thread syncs.
type drainer struct {
	mu     sync.Mutex
	sink   FuncSink
	clock  *fast.Clock
	owner  map[*fast.State]int    // the tid each state's records belong to
	last   map[int]uint64         // per task: the last time handed on
	latest map[int]uftrace.Record // per task: the last record handed on
	recs   []Rec
	// states and tids are drainRound's list of the rings to drain.
	states []*fast.State
	tids   []int
	events func(uint64)
	err    error // the first sink error
	lost   uint64
	// retiring are the states of threads that exited, handed over at
	// their exit event (retire) and finished here, off the tracer's path.
	retiring []*retiree
	pending  []*retiree // retireRound's list
	closing  uint32     // set by close: nap's futex word
	closed   bool       // the last drain is done: the goroutine hands nothing more
	stop     chan struct{}
	// The resource calls the rings hold (fast_res.go): their sink (nil:
	// none), the functions whose stubs record them, each ring's decoder,
	// the calls of a batch, and the losses seen.
	res      ResSink
	resStubs []resStub
	argFns   []argFn // functions whose stubs record their values, by number (fast_args.go)
	// The coarse clock (fast_coarse.go): the states on it, under coarseMu
	// (after mu when both are held: its ticker takes coarseMu alone).
	coarseMu sync.Mutex
	coarse   map[*fast.State]bool
	ticking  bool
	tickStop atomic.Bool
	tickDone chan struct{} // closed when the ticker ends
	lastTick atomic.Uint64 // the last tick's TSC
	decoders map[*fast.State]*ringRes
	resLost  uint64
	walks    uint64       // calls whose record carried a backtrace
	quick    uint64       // calls laneQuick made
	call     trace.Call   // the call resCalls hands the sink, reused
	rc       fast.ResCall // the call a ring's records make, reused
	// batch: the calls of a ring read, for a sink that takes them so
	// (bsink, set while they are read), handed on at the read's end.
	bsink     ResBatchSink
	lane      drainLane // the lane of a ring read's calls (fast_lane.go)
	batch     []trace.Call
	nbatch    int
	resEvs    []resEvent
	order     resOrder    // the calls decoded and the tracer's events, until their turn
	resRings  atomic.Bool // resource calls are recorded in the rings
	resClosed bool        // the sink said its stream closed (ErrStreamClosed)
	dayStart  int64       // local midnight in wall-clock ns, for timeOfDay
	btAll     bool        // --backtrace-all
	monitor   []uint64    // --monitor
	wallOff   int64       // wall-clock ns less CLOCK_MONOTONIC ns
}

// retiree is the state of a thread that exited: its ring to drain, then
// its open frames to close at the exit's time, then its task's end.
type retiree struct {
	st     *fast.State
	tid    int
	ts     uint64     // the exit event's time: the open frames' EXIT records
	fi     *fastImage // the state's process: only compared (reclaim)
	reuse  bool       // its table entries are gone from the process: reusable
	exit   bool       // the tracer's Exit call for tid came meanwhile:
	exitTS uint64     // made once the state is finished
	done   bool
}

// ownerOf returns the tid st's records go to (0: none).
func (d *drainer) ownerOf(st *fast.State) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.owner[st]
}

// retire hands the drainer st, the state of tid, which exited at ts: a
// thread's last records (up to a ring of them) were drained at its exit
// event, on the tracer thread, while the program's other threads waited
// for the tracer (a 4-thread fib(25): 0.3-1.7 ms per exit).
func (d *drainer) retire(st *fast.State, tid int, ts uint64, fi *fastImage, reuse bool) {
	d.mu.Lock()
	d.retiring = append(d.retiring, &retiree{st: st, tid: tid, ts: ts, fi: fi, reuse: reuse})
	d.mu.Unlock()
}

// retireLocked finishes r: drains its ring, records the exits of the
// frames still open, makes the Exit call that waited for them, and
// forgets the state (reset for reuse when it can be).
func (d *drainer) retireLocked(r *retiree) {
	if r.done {
		return
	}
	r.done = true
	st := r.st
	// All of it: a batch ends early at each loss, and what is left would
	// be reset away. The thread is gone and its entries with it: nothing
	// refills the ring. With entries left in the process (not reused),
	// a bound.
	for i := 0; (r.reuse || i < 4*fast.RingCap/drainBatch) && d.drainBatchLocked(st, r.tid); i++ {
	}
	if n := d.openFramesLocked(r.tid, st); n < st.Depth() {
		st.Pop() // a half-done step's frame: no EXIT to write
	}
	if st.Depth() > 0 {
		recs := make([]Rec, 0, st.Depth())
		for st.Depth() > 0 {
			fr := st.Pop()
			recs = append(recs, Rec{Record: uftrace.Record{Time: r.ts, Type: uftrace.Exit, Depth: fr.Depth, Addr: fr.Addr}})
		}
		d.events(uint64(len(recs)))
		d.noteErr(d.recordsLocked(r.tid, recs))
	}
	if r.exit {
		d.noteErr(d.sink.Exit(r.exitTS, r.tid))
		delete(d.latest, r.tid) // a reused tid starts afresh
	}
	delete(d.owner, st)
	delete(d.decoders, st)
	d.forgetCoarse(st)
	if r.reuse {
		st.Reset()
	}
}

// retireTidLocked finishes the states tid's threads left (a tid can be
// reused): what is handed on for tid next follows their records.
func (d *drainer) retireTidLocked(tid int) {
	for _, r := range d.retiring {
		if r.tid == tid {
			d.retireLocked(r)
		}
	}
}

func (d *drainer) retireAllLocked() {
	for _, r := range d.retiring {
		d.retireLocked(r)
	}
}

// retireRound moves each retired state on by one batch of its ring, or
// finishes it once its ring is empty, taking the lock for each step only
// (as drainRound does), and reports whether it did anything.
func (d *drainer) retireRound() bool {
	d.mu.Lock()
	d.pending = d.pending[:0]
	for _, r := range d.retiring {
		if !r.done {
			d.pending = append(d.pending, r)
		}
	}
	d.mu.Unlock()
	for _, r := range d.pending {
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			return false
		}
		if !r.done && !d.retiringBefore(r.tid, r.st) && !d.drainBatchLocked(r.st, r.tid) {
			d.retireLocked(r)
		}
		d.mu.Unlock()
	}
	return len(d.pending) > 0
}

// retiringBefore reports whether tid has a state retired before st (a
// live one, or one retired later) not finished yet: st's records, a
// later thread's under a reused tid, wait for it.
func (d *drainer) retiringBefore(tid int, st *fast.State) bool {
	for _, r := range d.retiring {
		if r.st == st {
			return false
		}
		if r.tid == tid && !r.done {
			return true
		}
	}
	return false
}

// deferExit keeps the Exit call for tid until its retired state is
// finished, and reports whether it did.
func (d *drainer) deferExit(time uint64, tid int) bool {
	for _, r := range d.retiring {
		if r.tid == tid && !r.done && !r.exit {
			r.exit, r.exitTS = true, time
			return true
		}
	}
	return false
}

// reclaim returns the finished states of fi's threads that exited (all of
// them with force), reset for reuse or not (unmap them), and forgets them.
func (d *drainer) reclaim(fi *fastImage, force bool) (reuse, drop []*fast.State) {
	d.mu.Lock()
	defer d.mu.Unlock()
	kept := d.retiring[:0]
	for _, r := range d.retiring {
		if r.fi == fi && force {
			d.retireLocked(r)
		}
		switch {
		case r.fi != fi || !r.done:
			kept = append(kept, r)
		case r.reuse:
			reuse = append(reuse, r.st)
		default:
			drop = append(drop, r.st)
		}
	}
	clear(d.retiring[len(kept):])
	d.retiring = kept
	return reuse, drop
}

// noteErr keeps the first sink error.
func (d *drainer) noteErr(err error) {
	if err != nil && d.err == nil {
		d.err = err
	}
}

// openFramesLocked is how many of st's frames have their ENTRY and not
// their EXIT in tid's trace, for a thread that stopped for good, its ring
// drained: one killed inside a stub may have pushed its top frame without
// writing the ENTRY yet, or written the EXIT without popping it yet. Its
// last record tells: the top frame is open when that record is its ENTRY
// or one of a call inside it. (With records lost, nothing can be told.)
func (d *drainer) openFramesLocked(tid int, st *fast.State) int {
	n := st.Depth()
	if n == 0 || st.Lost() {
		return n
	}
	last, ok := d.latest[tid]
	top := st.Frame(n - 1)
	if ok && (last.Depth >= n || last.Type == uftrace.Entry && last.Depth == n-1 && last.Addr == top.Addr) {
		return n
	}
	return n - 1
}

func newDrainer(sink FuncSink, clock *fast.Clock, events func(uint64)) *drainer {
	return &drainer{sink: sink, clock: clock, owner: map[*fast.State]int{}, last: map[int]uint64{}, latest: map[int]uftrace.Record{},
		events: events, stop: make(chan struct{}), wallOff: time.Now().UnixNano() - nanotime()}
}

func (d *drainer) add(st *fast.State, tid int) {
	if d == nil {
		return
	}
	d.mu.Lock()
	d.owner[st] = tid
	delete(d.decoders, st) // a new thread's, or a reused state's
	d.mu.Unlock()
}

// remove drains st and forgets it.
func (d *drainer) remove(st *fast.State) {
	if d == nil {
		return
	}
	d.mu.Lock()
	d.drainLocked(st, d.owner[st])
	delete(d.owner, st)
	delete(d.decoders, st)
	d.forgetCoarse(st)
	d.mu.Unlock()
}

// setOwner drains st and sends its later records to tid's task.
func (d *drainer) setOwner(st *fast.State, tid int) {
	if d == nil {
		return
	}
	d.mu.Lock()
	if old, ok := d.owner[st]; ok {
		d.drainLocked(st, old)
		d.owner[st] = tid
	}
	d.mu.Unlock()
}

// syncState drains st's ring: what its thread wrote before it stopped.
// Other threads' records need no order with what the tracer writes of
// this one (lockedSink), and draining them too made every thread exit of
// a 4-thread fib(25) drain its siblings' rings on the tracer thread.
func (d *drainer) syncState(st *fast.State) {
	d.mu.Lock()
	if tid, ok := d.owner[st]; ok {
		d.drainLocked(st, tid)
	}
	d.mu.Unlock()
}

// sync drains every ring.
func (d *drainer) sync() {
	if d == nil {
		return
	}
	d.mu.Lock()
	d.drainAllLocked()
	d.mu.Unlock()
}

// drainAllLocked drains every ring, a batch from each in turn: a thread
// waiting for room in its ring sees it move while the others are drained.
func (d *drainer) drainAllLocked() bool {
	wm := d.relHoldLocked(fast.ReadTSC())
	defer d.flushResLocked(wm)
	d.retireAllLocked()
	any := false
	for range fast.RingCap / drainBatch {
		more := false
		for st, tid := range d.owner {
			if d.drainBatchLocked(st, tid) {
				more = true
			}
		}
		if !more {
			break
		}
		any = true
	}
	return any
}

// drainRound drains a batch from each ring, taking the lock for each
// batch only: the tracer, which takes it to hand on what a stopped thread
// did, waits for one batch at most, not for every ring to be empty.
func (d *drainer) drainRound(least uint64) bool {
	wm := fast.ReadTSC() // before the list: a ring added later has nothing older
	d.mu.Lock()
	d.tickCoarse(wm)
	wm = d.relHoldLocked(wm)
	d.states = d.states[:0]
	d.tids = d.tids[:0]
	for st, tid := range d.owner {
		d.states, d.tids = append(d.states, st), append(d.tids, tid)
	}
	d.mu.Unlock()
	any := false
	for i, st := range d.states {
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			return false
		}
		// The state may have gone (unmapped: not to be read) or changed
		// owner since the list was made.
		if tid, ok := d.owner[st]; ok && tid == d.tids[i] && (st.Len() >= least || least <= 1 && st.Pending()) && !d.retiringBefore(tid, st) && d.drainBatchLocked(st, tid) {
			any = true
		}
		d.mu.Unlock()
	}
	d.mu.Lock()
	if !d.closed {
		d.flushResLocked(wm)
	}
	d.mu.Unlock()
	return any
}

// rings is the number of rings drainRound read last (only run's
// goroutine calls it).
func (d *drainer) rings() int { return len(d.states) }

// drainTidLocked drains the rings whose records are tid's.
func (d *drainer) drainTidLocked(tid int) {
	d.retireTidLocked(tid)
	for st, owner := range d.owner {
		if owner == tid {
			d.drainLocked(st, tid)
		}
	}
}

// drainLocked hands st's pending records to the sink as tid's.
func (d *drainer) drainLocked(st *fast.State, tid int) bool {
	any := false
	// At most one ring's worth: a thread writing as fast as rtrace reads
	// must not hold the lock (and the tracer) forever.
	for i := 0; i <= fast.RingCap/drainBatch && d.drainBatchLocked(st, tid); i++ {
		any = true
	}
	return any
}

// nap sleeps for dur in the calling thread, or until close wakes it: a
// time.Sleep under a millisecond lasts a millisecond when the Go runtime
// has nothing else to wake for (it waits in epoll_wait, whose timeout
// counts milliseconds), and a ring of 2^16 records fills in 0.8 ms at
// fib(30)'s pace. The sleep is a FUTEX_WAIT on d.closing with a timeout
// (futex(2)): close sets the word and wakes it, and a trace's end no
// longer waits for the rest of a sleep of up to 1 ms.
func (d *drainer) nap(dur time.Duration) {
	const waitPrivate = 0 | 128 // FUTEX_WAIT | FUTEX_PRIVATE_FLAG, linux/futex.h
	ts := unix.NsecToTimespec(dur.Nanoseconds())
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&d.closing)), waitPrivate, 0, uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// wakeNap ends the drainer's sleep, and any later one, at once.
func (d *drainer) wakeNap() {
	const wakePrivate = 1 | 128 // FUTEX_WAKE | FUTEX_PRIVATE_FLAG
	atomic.StoreUint32(&d.closing, 1)
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&d.closing)), wakePrivate, 1, 0, 0, 0)
}

// drainLeast is the fewest records the drain takes from a ring right
// after a round that found some: fewer wait for the next round, after a
// sleep. A drain that chased the thread took 70 records at a time on
// fib(30), and each batch moved the ring's head and tail between the two
// CPUs' caches: 77,000 batches, and fib(30) took 12% longer than with
// the slower drain it replaced.
const drainLeast = 1024

// drainBatch is the most records handed on at once: a batch's records
// and their encoding stay in the CPU's cache.
var drainBatch = 1 << 12

// drainBatchLocked hands at most one batch of st's pending records to the
// sink as tid's, and reports whether there were any.
func (d *drainer) drainBatchLocked(st *fast.State, tid int) bool {
	if !st.Pending() {
		return false
	}
	// The records are converted where they lie in the ring, their times
	// kept monotonic per task (the TSC conversion and the tracer's clock
	// differ by the calibration's error).
	sc := d.clock.Scale()
	last := d.last[tid]
	d.recs = d.recs[:0]
	rr := d.ring(st)
	dec := &rr.dec
	drained := false
	d.resLostLocked(tid, st)
	lost := st.Drain(drainBatch, func(part []fast.Rec) {
		drained = drained || len(part) > 0
		// Decided once the part is read: what its calls depend on was
		// written before them, so before this (resDirectLocked).
		direct := d.resDirectLocked(st)
		if direct {
			d.bsink, _ = d.res.(ResBatchSink)
			d.laneBegin(tid)
		}
		at := len(d.recs)
		d.recs = slices.Grow(d.recs, len(part)+1)[:at+len(part)]
		out, t, j := d.recs[at:], last, 0
		for i := 0; i < len(part); i++ {
			r := part[i]
			if dec.Pending() || fast.IsRes(r.Word) {
				// A resource call's records, none of them a function's:
				// handed on here, while the part is the thread's.
				if direct && d.lane.w != nil && d.nbatch == 0 {
					if n := d.laneQuick(part, i, tid, rr, sc); n > 0 {
						i += n - 1
						continue
					}
				}
				if n, ok := dec.Group(part, i, &d.rc); ok {
					if d.rc.Values {
						rr.vals.set(&d.rc)
					} else {
						d.resCall(st, rr, tid, &d.rc, direct, sc)
					}
					i += n - 1
				} else if c, whole, _ := dec.Feed(r); whole {
					if c.Values {
						rr.vals.set(&c)
					} else {
						d.resCall(st, rr, tid, &c, direct, sc)
					}
				}
				continue
			}
			t = max(sc.Nanos(r.TSC), t)
			typ, depth, addr := fast.Unword(r.Word)
			out[j] = Rec{Record: uftrace.Record{Time: t, Type: uftrace.RecordType(typ), Depth: depth, Addr: addr}}
			if rr.vals.valid {
				// The values of a function whose stub records them (args.S).
				if p := d.payloadFor(&rr.vals, r.Word, typ, addr); p != nil {
					out[j].More, out[j].Payload = true, p
				}
			}
			if typ == int(uftrace.Event) {
				// The stubs' only event, -W cpu's: the CPU above the id.
				out[j].Addr, out[j].More, out[j].Payload = addr&(1<<20-1), true, uftrace.WatchPayload(uint32(addr>>20))
			}
			j++
		}
		d.recs = d.recs[:at+j]
		last = t
		d.flushBatchLocked()
	})
	n := len(d.recs)
	if lost > 0 {
		// The records that did not fit came after these.
		d.lost += lost
		d.recs = append(d.recs, Rec{Record: uftrace.Record{Time: last, Type: uftrace.Lost, Addr: lost}})
	}
	if len(d.recs) > 0 {
		d.events(uint64(n))
		if err := d.handLocked(tid, d.recs); err != nil && d.err == nil {
			d.err = err
		}
	}
	return drained || len(d.recs) > 0
}

// recordsLocked hands recs to the sink, their times kept monotonic per
// task (the TSC conversion and the tracer's clock differ by the
// calibration's error).
func (d *drainer) recordsLocked(tid int, recs []Rec) error {
	if len(recs) == 0 {
		return nil
	}
	last := d.last[tid]
	for i := range recs {
		if recs[i].Time < last {
			recs[i].Time = last
		}
		last = recs[i].Time
	}
	return d.handLocked(tid, recs)
}

// handLocked hands recs, monotonic from the task's last time on, to the
// sink.
func (d *drainer) handLocked(tid int, recs []Rec) error {
	d.last[tid] = recs[len(recs)-1].Time
	d.latest[tid] = recs[len(recs)-1].Record
	return d.sink.Records(tid, recs)
}

// run polls the rings until stopped: at once while they fill, backing off
// to 1 ms when they stay empty.
func (d *drainer) run() {
	d.clock.Nanos(0) // the clock's calibration sleeps: not under the lock
	idle := 50 * time.Microsecond
	least := uint64(1)
	for {
		select {
		case <-d.stop:
			return
		default:
		}
		retired := d.retireRound()
		if d.drainRound(least) || retired {
			idle, least = 50*time.Microsecond, drainLeast
			if d.resRings.Load() && d.rings() > 1 {
				// Every ring each round: the resource calls wait for the
				// slowest ring's (resOrder), and a few records left in a
				// ring would hold the others' back. A single ring's calls
				// go on at once (resDirectLocked): taken in batches, as
				// the function records are (Lua's allocations: 8% less of
				// rtrace's CPU than chasing the thread).
				least = 1
			}
			continue
		}
		d.nap(idle)
		idle, least = min(2*idle, time.Millisecond), 1
	}
}

// close stops the goroutine, drains what is left and returns the first
// sink error.
func (d *drainer) close() error {
	if d == nil {
		return nil
	}
	// The last drain here, not after the goroutine's end: waking the
	// tracer's locked thread once the goroutine ended took 0.03–0.25 ms.
	// The goroutine stops at its next turn of the lock (d.closed).
	d.stopCoarse()
	d.mu.Lock()
	d.closed = true
	d.drainAllLocked()
	d.flushResLocked(math.MaxUint64) // every thread is done
	err := d.err
	d.mu.Unlock()
	close(d.stop)
	d.wakeNap()
	return err
}
