package tracer

import (
	"bytes"
	"testing"

	"rtrace/internal/trace"
	"rtrace/internal/wire"
	"rtrace/tracer/fast"
	"rtrace/tracer/fast/drain"
)

// laneResSink is wireResSink lending its writer to the drain's lane.
type laneResSink struct {
	wireResSink
	laned int
}

func (s *laneResSink) Lane(int) *wire.Writer { return s.w }
func (s *laneResSink) Laned(n int, err error) error {
	s.laned += n
	return err
}

// laneRig is a drainer whose resource calls go, through its sink, to a
// wire stream in out, with stubs for the calls the test writes: the
// drain's lane (laneQuick's kinds, quickStub) against this package's
// meaning of the calls (resEffects).
type laneRig struct {
	d   *drain.Drainer
	res drain.ResSink
	st  *fast.State
	w   *wire.Writer
	out *bytes.Buffer
	ids map[string]uint32
}

func newLaneRig(t *testing.T, clock *fast.Clock, lane bool, btAll bool, monitor []uint64) *laneRig {
	rig := &laneRig{st: fast.NewState(make([]byte, fast.StateSize), 0), out: &bytes.Buffer{}, ids: map[string]uint32{}}
	rig.d = drain.New(discardSink{}, clock, func(uint64) {})
	rig.w = wire.NewWriter(rig.out)
	if err := rig.w.Write(&trace.Header{Version: wire.Version, Arch: "x86_64", Pid: 1}); err != nil {
		t.Fatal(err)
	}
	if lane {
		rig.res = &laneResSink{wireResSink: wireResSink{w: rig.w}}
	} else {
		rig.res = &wireResSink{w: rig.w}
	}
	rig.d.SetRes(rig.res, btAll, monitor)
	rig.d.SetWallOffset(0) // the same times of day in both streams
	funcs := map[string]*ResFunc{
		// A call with an argument record: the lane leaves it to Calls.
		"fdcall": {Sym: "fdcall", Res: 1, Effect: allocRet, Args: []ArgRec{{"fd", 0, 'd'}}},
	}
	for _, m := range resModules {
		for i := range m.Funcs {
			funcs[m.Funcs[i].Sym] = &m.Funcs[i]
		}
	}
	for _, name := range []string{"malloc", "free", "realloc", "posix_memalign", "fdcall", "close"} {
		rf := funcs[name]
		s := newStub(&resFn{rf: rf, res: 1 + rf.Res})
		switch {
		case rf.AtEntry:
			s.Release = true
		case rf.Effect == allocOutPtr:
			s.Out = true
		case rf.releases() && rf.allocates():
			s.Both = true
		}
		rig.ids[name] = rig.d.AddStub(resStub(s, rf))
	}
	rig.d.Add(rig.st, 1)
	return rig
}

// run writes rounds rounds of calls into the ring, draining it whenever
// it may be full, and returns the stream.
func (rig *laneRig) run(t *testing.T, rounds int) []byte {
	var tsc uint64 = 1000
	stacks := [][]uint64{{0x401000, 0x402000, 0x403000}, {0x401100, 0x402100}, {0x401200}}
	call := func(name string, words []uint64, stack int, miss bool) {
		tsc += 50
		var s []uint64
		slot := 0
		if stack >= 0 {
			s, slot = stacks[stack], stack
		}
		for _, r := range fast.ResWords(tsc, rig.ids[name], words, s, slot, miss) {
			rig.st.Emit(r)
		}
	}
	for i := range rounds {
		p := uint64(0x10000 + i*0x100)
		first := i == 0
		call("malloc", []uint64{16, p}, 0, first)
		call("malloc", []uint64{32, p + 0x20}, 1, first)
		call("free", []uint64{p}, -1, false)
		if i%7 == 3 {
			call("fdcall", []uint64{uint64(i), p + 0x40}, 2, i == 3)
		}
		call("malloc", []uint64{48, p + 0x60}, 0, false)
		call("realloc", []uint64{p + 0x20, 64, p + 0x80, tsc - 10}, 1, false)
		call("realloc", []uint64{0, 8, p + 0xa0, tsc - 5}, 0, false)
		call("realloc", []uint64{p + 0x60, 0, 0, tsc - 5}, 0, false)
		call("posix_memalign", []uint64{0x7ff000, 16, 100, 0, p + 0xc0}, 1, false)
		call("malloc", []uint64{0, 0}, 0, false) // failed: no call
		call("free", []uint64{0}, -1, false)     // of NULL: no call
		call("close", []uint64{3, 0}, -1, false)
		if i%40 == 39 {
			rig.d.Sync()
		}
	}
	if err := rig.d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rig.w.Flush(); err != nil {
		t.Fatal(err)
	}
	return rig.out.Bytes()
}

// TestDrainLaneSameStream: the calls the drain writes through its lane
// make the same stream, byte for byte, as the calls it hands to Calls,
// with calls the lane leaves to Calls among them, with -b's backtraces
// for allocations only, --backtrace-all and --monitor.
func TestDrainLaneSameStream(t *testing.T) {
	for _, tc := range []struct {
		name    string
		btAll   bool
		monitor []uint64
	}{{"default", false, nil}, {"backtrace-all", true, nil}, {"monitor", false, []uint64{32, 100}}} {
		t.Run(tc.name, func(t *testing.T) {
			const rounds = 300
			clock := fast.FixedClock(0.4)
			plain := newLaneRig(t, clock, false, tc.btAll, tc.monitor)
			want := plain.run(t, rounds)
			rig := newLaneRig(t, clock, true, tc.btAll, tc.monitor)
			got := rig.run(t, rounds)
			stats, plainStats := rig.d.Stats(), plain.d.Stats()
			if stats.Walks != plainStats.Walks {
				t.Errorf("%d backtraces counted through the lane, %d through Calls", stats.Walks, plainStats.Walks)
			}
			// laneQuick: mallocs, frees and reallocs' calls after the first
			// round (not mallocs or reallocs with --monitor, nor frees or
			// reallocs with --backtrace-all): 4 + 4 a round.
			if quick := stats.Quick; quick == 0 || tc.monitor == nil && !tc.btAll && quick < (rounds-1)*8 {
				t.Errorf("%d calls made by laneQuick", quick)
			}
			laned := rig.res.(*laneResSink).laned
			// 8 calls of a round go through the lane (the realloc that
			// frees and allocates: two), fdcall's through Calls.
			if laned < rounds*7 {
				t.Errorf("%d calls went through the lane, want at least %d", laned, rounds*7)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("the lane's stream differs from Calls': %d bytes against %d", len(got), len(want))
			}
			rd, err := wire.NewReader(bytes.NewReader(got))
			if err != nil {
				t.Fatal(err)
			}
			calls, args := 0, 0
			byName := map[string]int{}
			for {
				it, err := rd.Next()
				if err != nil {
					break
				}
				if c, ok := it.(*trace.Call); ok {
					byName[c.Name]++
					calls++
					args += len(c.Args)
				}
			}
			// malloc x2, free, malloc, realloc x1 + x1 + x1 (frees, allocates),
			// realloc(0, 8), realloc(p, 0), posix_memalign, close; fdcall every 7th.
			if wantCalls := rounds*10 + (rounds+3)/7; calls != wantCalls {
				t.Errorf("%d calls in the stream, want %d: %v (lost %d)", calls, wantCalls, byName, stats.ResLost)
			}
			if args == 0 {
				t.Errorf("no argument record in the stream: fdcall's went missing")
			}
		})
	}
}
