package tracer

import (
	"io"
	"testing"

	"rtrace/internal/trace"
	"rtrace/internal/wire"
	"rtrace/tracer/fast"
	"rtrace/tracer/fast/drain"
)

// wireResSink encodes the calls it gets as the pre-processor's writer
// does (wire 3.2), into w.
type wireResSink struct {
	discardSink
	w *wire.Writer
}

func (s *wireResSink) Call(c *trace.Call) error    { return s.w.Write(c) }
func (s *wireResSink) Calls(cs []trace.Call) error { return s.w.Calls(cs) }
func (s *wireResSink) Lost(int, uint64) error      { return nil }

// BenchmarkDrainResCalls measures, through the drain's lane (and
// through Calls: -bench 'DrainResCalls/calls'), the drain's side of a resource call
// recorded in the process: decoding a malloc's and a free's records from
// a ring (a 10-frame stack, 64 stacks in turn, as the stubs write them),
// making the calls and encoding them into a wire stream. ns/op is per
// call; the target's side (the stub, the walk) is not in it.
func BenchmarkDrainResCalls(b *testing.B) {
	b.Run("lane", func(b *testing.B) { benchDrainResCalls(b, true) })
	b.Run("calls", func(b *testing.B) { benchDrainResCalls(b, false) })
}

func benchDrainResCalls(b *testing.B, lane bool) {
	clock, err := fast.NewClock()
	if err != nil {
		b.Skip(err)
	}
	st := fast.NewState(make([]byte, fast.StateSize), 0)
	d := drain.New(discardSink{}, clock, func(uint64) {})
	w := wire.NewWriter(io.Discard)
	if err := w.Write(&trace.Header{Version: wire.Version, Arch: "x86_64", Pid: 1}); err != nil {
		b.Fatal(err)
	}
	var res drain.ResSink = &wireResSink{w: w}
	if lane {
		res = &laneResSink{wireResSink: wireResSink{w: w}}
	}
	d.SetRes(res, false, nil)
	mod := resModules[0]
	var malloc, free *ResFunc
	for i := range mod.Funcs {
		switch mod.Funcs[i].Sym {
		case "malloc":
			malloc = &mod.Funcs[i]
		case "free":
			free = &mod.Funcs[i]
		}
	}
	mid := d.AddStub(resStub(newStub(&resFn{rf: malloc, res: 1}), malloc))
	fs := newStub(&resFn{rf: free, res: 1})
	fs.Release = true
	fid := d.AddStub(resStub(fs, free))
	d.Add(st, 1)
	stacks := make([][]uint64, 64)
	for i := range stacks {
		for f := range 10 {
			stacks[i] = append(stacks[i], 0x555555554000+uint64(i*64+f*8))
		}
	}
	// One round: 64 mallocs with their stacks (the first time a STACK
	// each), 64 frees, as one thread writes them.
	var tsc uint64 = 1000
	round := func(first bool) []fast.Rec {
		var recs []fast.Rec
		for i, s := range stacks {
			tsc += 100
			recs = append(recs, fast.ResWords(tsc, mid, []uint64{uint64(16 + i), 0x5555deadb000 + uint64(i)*64}, s, i, first)...)
		}
		for i := range stacks {
			tsc += 100
			recs = append(recs, fast.ResWords(tsc, fid, []uint64{0x5555deadb000 + uint64(i)*64}, nil, 0, false)...)
		}
		return recs
	}
	first, again := round(true), round(false)
	for _, r := range first {
		st.Emit(r)
	}
	d.Sync()
	b.ResetTimer()
	calls := 0
	for calls < b.N {
		for _, r := range again {
			st.Emit(r)
		}
		d.Sync()
		calls += 2 * len(stacks)
	}
	b.StopTimer()
	if err := d.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(calls), "ns/call")
}
