// Package drain is the fast engine's drain: it reads the rings the
// injected code writes in the traced process (docs/FAST-PATH.md), turns
// their records into the trace's (function records with their payloads,
// resource calls with their backtraces), orders them with what the
// tracer says of the same threads, and hands them to the sinks. One
// goroutine polls (Run); the tracer's thread calls in to hand on what a
// stopped thread did after its records (Do, SyncState, the Res methods).
package drain

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"rtrace/internal/trace"
	"rtrace/internal/uftrace"
	"rtrace/tracer/fast"
)

// Drainer moves the records of every thread's ring to the function sink
// while the program runs, and orders them before what the tracer hands
// the sink (Do). One goroutine polls (Run); the tracer thread syncs.
type Drainer struct {
	mu     sync.Mutex
	sink   Sink
	clock  *fast.Clock
	owner  map[*fast.State]int    // the tid each state's records belong to
	last   map[int]uint64         // per task: the last time handed on
	latest map[int]uftrace.Record // per task: the last record handed on
	recs   []trace.Rec
	// states and tids are drainRound's list of the rings to drain.
	states []*fast.State
	tids   []int
	events func(uint64)
	err    error // the first sink error
	lost   uint64
	// retiring are the states of threads that exited, handed over at
	// their exit event (Retire) and finished here, off the tracer's path.
	retiring []*retiree
	pending  []*retiree // retireRound's list
	closing  uint32     // set by Close: nap's futex word
	closed   bool       // the last drain is done: the goroutine hands nothing more
	stop     chan struct{}
	// The resource calls the rings hold (res.go): their sink (nil:
	// none), the functions whose stubs record them, each ring's decoder,
	// the calls of a batch, and the losses seen.
	res      ResSink
	resStubs []Stub
	argFns   []ArgFn // functions whose stubs record their values, by number (values.go)
	// The coarse clock (coarse.go): the states on it, under coarseMu
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
	bsink     BatchSink
	lane      drainLane // the lane of a ring read's calls (lane.go)
	batch     []trace.Call
	nbatch    int
	resEvs    []Effect
	args      [6]uint64   // a call's arguments (callArgs)
	order     resOrder    // the calls decoded and the tracer's events, until their turn
	resRings  atomic.Bool // resource calls are recorded in the rings
	resClosed bool        // the sink said its stream closed (ErrStreamClosed)
	dayStart  int64       // local midnight in wall-clock ns, for timeOfDay
	btAll     bool        // --backtrace-all
	monitor   []uint64    // --monitor
	wallOff   int64       // wall-clock ns less CLOCK_MONOTONIC ns
}

// noteErr keeps the first sink error.
func (d *Drainer) noteErr(err error) {
	if err != nil && d.err == nil {
		d.err = err
	}
}

// New returns a drainer of function records to sink (events counts the
// records handed on), converting the rings' times with clock. Without a
// function trace, sink takes nothing (the rings then hold what resource
// tracing needs in the process: its frames).
func New(sink Sink, clock *fast.Clock, events func(uint64)) *Drainer {
	return &Drainer{sink: sink, clock: clock, owner: map[*fast.State]int{}, last: map[int]uint64{}, latest: map[int]uftrace.Record{},
		events: events, stop: make(chan struct{}), wallOff: time.Now().UnixNano() - fast.Nanotime()}
}

// SetRes makes res the sink of the resource calls the rings hold, with
// --backtrace-all (btAll) and --monitor's sizes. Before Run.
func (d *Drainer) SetRes(res ResSink, btAll bool, monitor []uint64) {
	d.mu.Lock()
	d.res, d.btAll, d.monitor = res, btAll, monitor
	d.mu.Unlock()
}

// SetWallOffset sets the wall clock's offset from CLOCK_MONOTONIC, in
// nanoseconds, that the resource calls' times of day are made with (New
// reads it): tests compare two drains' streams with one.
func (d *Drainer) SetWallOffset(ns int64) {
	d.mu.Lock()
	d.wallOff = ns
	d.mu.Unlock()
}

// Stats is what a drainer counted: the function records lost on full
// rings, the resource calls lost, the calls whose record carried a
// backtrace, and the calls its lane made from the ring's words alone
// (laneQuick).
type Stats struct {
	Lost, ResLost, Walks, Quick uint64
}

// Stats returns the counts so far.
func (d *Drainer) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return Stats{Lost: d.lost, ResLost: d.resLost, Walks: d.walks, Quick: d.quick}
}

// A nil *Drainer (the int3 engine has none) does nothing in Add, Remove,
// SetOwner, Sync and Close: the event loop's paths that both engines take
// call them.

// Add makes tid the owner of st's records: a new thread's state, or a
// reused one.
func (d *Drainer) Add(st *fast.State, tid int) {
	if d == nil {
		return
	}
	d.mu.Lock()
	d.owner[st] = tid
	delete(d.decoders, st) // a new thread's, or a reused state's
	d.mu.Unlock()
}

// Remove drains st and forgets it.
func (d *Drainer) Remove(st *fast.State) {
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

// SetOwner drains st and sends its later records to tid's task.
func (d *Drainer) SetOwner(st *fast.State, tid int) {
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

// SyncState drains st's ring: what its thread wrote before it stopped.
// Other threads' records need no order with what the tracer writes of
// this one (Do), and draining them too made every thread exit of a
// 4-thread fib(25) drain its siblings' rings on the tracer thread.
func (d *Drainer) SyncState(st *fast.State) {
	d.mu.Lock()
	if tid, ok := d.owner[st]; ok {
		d.drainLocked(st, tid)
	}
	d.mu.Unlock()
}

// Sync drains every ring.
func (d *Drainer) Sync() {
	if d == nil {
		return
	}
	d.mu.Lock()
	d.drainAllLocked()
	d.mu.Unlock()
}

// Which rings Do drains first.
const (
	DrainNone = 0
	DrainAll  = -1
)

// Locked is the drainer while Do holds its lock: what may be done only
// then.
type Locked struct{ d *Drainer }

// Do runs f under the drainer's lock, after draining the rings of the
// thread tid (DrainAll: every ring; DrainNone: none): what the tracer
// hands the function sink of tid in f follows the records tid's thread
// wrote before it stopped. Other threads' records need no order with
// it: a trace keeps each thread's records apart.
func (d *Drainer) Do(tid int, f func(Locked) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch tid {
	case DrainNone:
	case DrainAll:
		d.drainAllLocked()
	default:
		d.drainTidLocked(tid)
	}
	return f(Locked{d})
}

// Records hands the sink recs, tid's, their times kept monotonic per
// task.
func (l Locked) Records(tid int, recs []trace.Rec) error { return l.d.recordsLocked(tid, recs) }

// RetireTid finishes the states a thread of tid left: a fork's child
// whose pid is an old thread's tid starts after that thread's end.
func (l Locked) RetireTid(tid int) { l.d.retireTidLocked(tid) }

// Exit hands the sink the end of task tid at time, after its rings'
// records; a thread whose state is retired but not finished yet ends
// once it is (the records of its open frames come first).
func (d *Drainer) Exit(time uint64, tid int) error {
	d.mu.Lock()
	deferred := d.deferExit(time, tid)
	d.mu.Unlock()
	if deferred {
		return nil
	}
	return d.Do(tid, func(Locked) error {
		delete(d.latest, tid) // a reused tid starts afresh
		return d.sink.Exit(time, tid)
	})
}

// nap sleeps for dur in the calling thread, or until Close wakes it: a
// time.Sleep under a millisecond lasts a millisecond when the Go runtime
// has nothing else to wake for (it waits in epoll_wait, whose timeout
// counts milliseconds), and a ring of 2^16 records fills in 0.8 ms at
// fib(30)'s pace. The sleep is a FUTEX_WAIT on d.closing with a timeout
// (futex(2)): Close sets the word and wakes it, and a trace's end no
// longer waits for the rest of a sleep of up to 1 ms.
func (d *Drainer) nap(dur time.Duration) {
	const waitPrivate = 0 | 128 // FUTEX_WAIT | FUTEX_PRIVATE_FLAG, linux/futex.h
	ts := unix.NsecToTimespec(dur.Nanoseconds())
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&d.closing)), waitPrivate, 0, uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// wakeNap ends the drainer's sleep, and any later one, at once.
func (d *Drainer) wakeNap() {
	const wakePrivate = 1 | 128 // FUTEX_WAKE | FUTEX_PRIVATE_FLAG
	atomic.StoreUint32(&d.closing, 1)
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&d.closing)), wakePrivate, 1, 0, 0, 0)
}

// Run polls the rings until Close: at once while they fill, backing off
// to 1 ms when they stay empty.
func (d *Drainer) Run() {
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

// Close stops Run's goroutine, drains what is left and returns the first
// sink error.
func (d *Drainer) Close() error {
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
