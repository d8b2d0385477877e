package drain

import (
	"fmt"
	"slices"
	"testing"

	"rtrace/internal/datadir"
	"rtrace/internal/testutil"
	"rtrace/internal/trace"
	"rtrace/internal/uftrace"
	"rtrace/tracer/fast"
)

// dataSink hands a drained thread's records to a uftrace.data writer, as
// the function pipeline's last stage does.
type dataSink struct {
	w *datadir.Writer
}

func (s *dataSink) Records(tid int, recs []trace.Rec) error {
	return s.w.Write(&trace.Records{Tid: tid, Recs: recs})
}

func (s *dataSink) Exit(time uint64, tid int) error { return nil }

// BenchmarkDrain measures the fast engine's drain from a full ring into a
// uftrace.data directory: the ns/op is per record.
func BenchmarkDrain(b *testing.B) {
	w, err := datadir.Create(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	for _, it := range []trace.Item{&trace.Session{Time: 1, Pid: 42, SID: "0123456789abcdef", Exe: "/bin/true",
		Maps: []byte("00400000-00401000 r-xp 00000000 00:00 0 /bin/true\n7ffc0000-7ffc1000 rw-p 00000000 00:00 0 [stack]\n")},
		&trace.Task{Time: 2, Tid: 42, Pid: 42}} {
		if err := w.Write(it); err != nil {
			b.Fatal(err)
		}
	}
	clock, err := fast.NewClock()
	if err != nil {
		b.Skip(err)
	}
	clock.Nanos(0) // calibrated (a sleep) before the timer starts
	d := New(&dataSink{w: w}, clock, func(uint64) {})
	st := fast.NewState(make([]byte, fast.StateSize), 0)
	d.Add(st, 42)
	tsc := uint64(1 << 40)
	depth := 0
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(b.N-done, fast.RingCap)
		b.StopTimer()
		for i := range n {
			typ := fast.TypeEntry
			if i%2 == 1 {
				typ = fast.TypeExit
			}
			tsc += 30
			st.Emit(fast.Rec{TSC: tsc, Word: fast.Word(typ, depth, 0x401000+uint64(i%64)*16)})
		}
		b.StartTimer()
		d.Sync()
		done += n
	}
	b.StopTimer()
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

// logSink notes what reaches a function sink, in order.
type logSink struct {
	log []string
}

func (s *logSink) Records(tid int, recs []trace.Rec) error {
	for _, r := range recs {
		s.log = append(s.log, fmt.Sprintf("%d %s d%d %#x", tid, r.Type, r.Depth, r.Addr))
	}
	return nil
}

func (s *logSink) Exit(time uint64, tid int) error {
	s.log = append(s.log, fmt.Sprintf("%d exit", tid))
	return nil
}

// A thread that exited with records in its ring and frames open: the
// drainer hands on its records, then the exits of its open frames (the
// top one half-pushed, its ENTRY not written, has none), then the task's
// Exit that the tracer made meanwhile; the state comes back reset.
func TestRetireOrder(t *testing.T) {
	sink := &logSink{}
	var events uint64
	d := New(sink, testClock(t), func(n uint64) { events += n })
	st := fast.NewState(make([]byte, fast.StateSize), 0)
	d.Add(st, 7)
	st.Push(fast.Frame{Depth: 0, Addr: 0x1000, Slot: 0x7ff0})
	st.Emit(fast.Rec{TSC: 1, Word: fast.Word(fast.TypeEntry, 0, 0x1000)})
	st.Push(fast.Frame{Depth: 1, Addr: 0x2000, Slot: 0x7fe0})
	st.Emit(fast.Rec{TSC: 2, Word: fast.Word(fast.TypeEntry, 1, 0x2000)})
	st.Push(fast.Frame{Depth: 2, Addr: 0x3000, Slot: 0x7fd0}) // killed before its ENTRY
	fi := new(int)                                            // a process
	d.Retire(st, 7, 100, fi, true, false)
	if err := d.Exit(200, 7); err != nil {
		t.Fatal(err)
	}
	if len(sink.log) != 0 {
		t.Fatalf("the Exit call did not wait for the retired state: %q", sink.log)
	}
	if reuse, drop := d.Reclaim(fi, false); len(reuse)+len(drop) != 0 {
		t.Fatalf("reclaim without force returned an unfinished state")
	}
	reuse, drop := d.Reclaim(fi, true)
	want := []string{"7 entry d0 0x1000", "7 entry d1 0x2000", "7 exit d1 0x2000", "7 exit d0 0x1000", "7 exit"}
	if !slices.Equal(sink.log, want) {
		t.Errorf("the sink got\n%q\nwant\n%q", sink.log, want)
	}
	if len(reuse) != 1 || reuse[0] != st || len(drop) != 0 {
		t.Errorf("reclaim: reuse %v, drop %v; want the state to reuse", reuse, drop)
	}
	if st.Depth() != 0 || st.Pending() {
		t.Errorf("the reclaimed state is not reset: depth %d, pending %v", st.Depth(), st.Pending())
	}
	if events != 4 {
		t.Errorf("%d events counted, want 4 (2 ENTRY from the ring, 2 EXIT)", events)
	}
	if _, ok := d.owner[st]; ok || len(d.retiring) != 0 {
		t.Errorf("the drainer still holds the state")
	}
	// A state whose entries stayed in the process is handed back to unmap.
	st2 := fast.NewState(make([]byte, fast.StateSize), 0)
	d.Add(st2, 8)
	d.Retire(st2, 8, 100, fi, false, false)
	d.Sync()
	if reuse, drop := d.Reclaim(fi, false); len(reuse) != 0 || len(drop) != 1 {
		t.Errorf("reclaim: reuse %v, drop %v; want one to drop", reuse, drop)
	}
}

// A tid reused before the drainer finished the old thread's state: the
// new thread's records wait for the old one's records, exits and Exit,
// whichever way the drainer gets to them (its polling rounds here).
func TestRetireTidReuse(t *testing.T) {
	sink := &logSink{}
	d := New(sink, testClock(t), func(uint64) {})
	old := fast.NewState(make([]byte, fast.StateSize), 0)
	d.Add(old, 7)
	old.Push(fast.Frame{Depth: 0, Addr: 0x1000, Slot: 0x7ff0})
	old.Emit(fast.Rec{TSC: 1, Word: fast.Word(fast.TypeEntry, 0, 0x1000)})
	d.Retire(old, 7, 100, new(int), true, false)
	if err := d.Exit(150, 7); err != nil {
		t.Fatal(err)
	}
	// A polling round takes the old ring's records; the state is not
	// finished yet (its exits and Exit wait for retireRound).
	if !d.drainRound(1) {
		t.Fatal("the first round found nothing")
	}
	cur := fast.NewState(make([]byte, fast.StateSize), 0)
	d.Add(cur, 7)
	cur.Emit(fast.Rec{TSC: 2, Word: fast.Word(fast.TypeEntry, 0, 0x2000)})
	if d.drainRound(1) {
		t.Errorf("a round drained the new thread's ring before the old thread's end: %q", sink.log)
	}
	if !d.retireRound() || !d.drainRound(1) {
		t.Fatalf("the rounds found nothing to do: %q", sink.log)
	}
	want := []string{"7 entry d0 0x1000", "7 exit d0 0x1000", "7 exit", "7 entry d0 0x2000"}
	if !slices.Equal(sink.log, want) {
		t.Errorf("the sink got\n%q\nwant\n%q", sink.log, want)
	}
}

// countSink counts what reaches a function sink.
type countSink struct {
	recs, lost int
}

func (s *countSink) Records(tid int, recs []trace.Rec) error {
	for _, r := range recs {
		if r.Type == uftrace.Lost {
			s.lost++
		} else {
			s.recs++
		}
	}
	return nil
}

func (s *countSink) Exit(time uint64, tid int) error { return nil }

// A retired state finished at once (the process ended) with a full ring
// and losses pending between its records: every record and every LOST
// reaches the sink before the state is reset (each loss ends a batch, so
// a bound on batches fell short).
func TestRetireDrainsAll(t *testing.T) {
	sink := &countSink{}
	d := New(sink, testClock(t), func(uint64) {})
	st := fast.NewState(make([]byte, fast.StateSize), 0)
	d.Add(st, 7)
	emitted, losses := 0, 7
	fill := func() {
		for st.Len() < fast.RingCap {
			st.Emit(fast.Rec{TSC: uint64(emitted + 1), Word: fast.Word(fast.TypeEntry, 0, 0x1000)})
			emitted++
		}
	}
	batch := drainBatch
	defer func() { drainBatch = batch }()
	for k := range losses {
		fill()
		st.Emit(fast.Rec{TSC: 1, Word: 0}) // no room: counted lost
		// Drained in part, off the batches' grid: the loss stays pending
		// after the ring's records.
		drainBatch = 1000 + 37*k
		d.mu.Lock()
		d.drainBatchLocked(st, 7)
		d.mu.Unlock()
	}
	drainBatch = batch
	fill()
	fi := new(int) // a process
	d.Retire(st, 7, uint64(emitted+1), fi, true, false)
	d.Reclaim(fi, true)
	if sink.recs != emitted || sink.lost != losses {
		t.Errorf("the sink got %d records and %d LOST; want %d and %d", sink.recs, sink.lost, emitted, losses)
	}
}

// testClock is a calibrated-on-demand TSC clock, or a skip where the TSC
// cannot be used.
func testClock(t *testing.T) *fast.Clock {
	t.Helper()
	clock, err := fast.NewClock()
	if err != nil {
		testutil.RequireCapability(t, "no usable TSC clock: %v", err)
	}
	return clock
}

// The int3 engine has no drainer: the calls of the paths both engines
// take do nothing on a nil one.
func TestNilDrainer(t *testing.T) {
	var d *Drainer
	st := fast.NewState(make([]byte, fast.StateSize), 0)
	d.Add(st, 1)
	d.SetOwner(st, 2)
	d.Sync()
	d.Remove(st)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}
