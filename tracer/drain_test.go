package tracer

import (
	"testing"

	"rtrace/internal/datadir"
	"rtrace/internal/trace"
	"rtrace/tracer/fast"
)

// dataSink hands a drained thread's records to a uftrace.data writer, as
// the function pipeline's last stage does.
type dataSink struct {
	FuncSink
	w *datadir.Writer
}

func (s *dataSink) Records(tid int, recs []Rec) error {
	return s.w.Write(&trace.Records{Tid: tid, Recs: recs})
}

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
	d := newDrainer(&dataSink{w: w}, clock, func(uint64) {})
	st := fast.NewState(make([]byte, fast.StateSize), 0)
	d.add(st, 42)
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
		d.sync()
		done += n
	}
	b.StopTimer()
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}
