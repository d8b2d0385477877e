package drain

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"

	"rtrace/internal/trace"
	"rtrace/internal/uftrace"
	"rtrace/tracer/fast"
)

// payloadSink notes the records a function sink gets, with their payloads.
type payloadSink struct {
	discardSink
	log []string
}

func (s *payloadSink) Records(tid int, recs []trace.Rec) error {
	for _, r := range recs {
		s.log = append(s.log, fmt.Sprintf("%s %#x more=%v %x", r.Type, r.Addr, r.More, r.Payload))
	}
	return nil
}

// The drain gives an ARGS or RET group (args.S) to the function record
// after it (a -W cpu watch event may come between) when that record's word
// is the one the group names, as its payload (made from the registers as
// a stop makes it, with the specs of the group's function: two functions
// at one address, in two processes, are told apart), across a batch's
// end too; a group followed by another record is dropped.
func TestDrainValues(t *testing.T) {
	args := []uftrace.ArgSpec{{Kind: uftrace.IntArg, Index: 1, Size: 4}, {Kind: uftrace.IntArg, Index: 3}}
	rets := []uftrace.ArgSpec{{Kind: uftrace.RetVal}}
	other := []uftrace.ArgSpec{{Kind: uftrace.IntArg, Index: 2}}
	// The payload as Tracer.values makes it: the registers' values in spec order.
	payload := func(specs []uftrace.ArgSpec, regs *unix.PtraceRegs) []byte {
		var vals []uftrace.Value
		for _, a := range specs {
			v := regs.Rax
			if a.Kind == uftrace.IntArg {
				v = []uint64{regs.Rdi, regs.Rsi, regs.Rdx, regs.Rcx, regs.R8, regs.R9}[a.Index-1]
			}
			vals = append(vals, uftrace.Value{Int: v})
		}
		b, err := uftrace.AppendPayload(nil, specs, vals)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	const fn, elsewhere = 0x401000, 0x402000
	entry, exit := fast.Word(fast.TypeEntry, 0, fn), fast.Word(fast.TypeExit, 0, fn)
	watch := fast.Word(int(uftrace.Event), 1, 100011|1<<20) // -W cpu: CPU 1
	var recs []fast.Rec
	recs = append(recs, fast.ValueWords(entry, 0, false, []uint64{7, 8, 9})...)
	recs = append(recs, fast.Rec{TSC: 90, Word: watch}, fast.Rec{TSC: 100, Word: entry})
	recs = append(recs, fast.ValueWords(exit, 0, true, []uint64{0x2a, 0})...)
	recs = append(recs, fast.Rec{TSC: 200, Word: exit})
	// Not its record: no payload.
	recs = append(recs, fast.ValueWords(fast.Word(fast.TypeEntry, 0, elsewhere), 0, false, []uint64{1, 2, 3})...)
	recs = append(recs, fast.Rec{TSC: 300, Word: entry})
	recs = append(recs, fast.Rec{TSC: 400, Word: exit})
	// The other function at the same address: its own specs.
	recs = append(recs, fast.ValueWords(entry, 1, false, []uint64{4, 5})...)
	recs = append(recs, fast.Rec{TSC: 500, Word: entry})
	p1, _ := uftrace.AppendPayload(nil, args, []uftrace.Value{{Int: 7}, {Int: 9}})
	p2, _ := uftrace.AppendPayload(nil, rets, []uftrace.Value{{Int: 0x2a}})
	p3, _ := uftrace.AppendPayload(nil, other, []uftrace.Value{{Int: 5}})
	want := fmt.Sprint([]string{
		fmt.Sprintf("event %#x more=true %x", 100011, uftrace.WatchPayload(1)), fmt.Sprintf("entry %#x more=true %x", fn, p1), fmt.Sprintf("exit %#x more=true %x", fn, p2),
		fmt.Sprintf("entry %#x more=false ", fn), fmt.Sprintf("exit %#x more=false ", fn),
		fmt.Sprintf("entry %#x more=true %x", fn, p3)})
	for _, batch := range []int{1, 2, 3, 1 << 12} {
		t.Run(fmt.Sprint(batch), func(t *testing.T) {
			defer func(n int) { drainBatch = n }(drainBatch)
			drainBatch = batch
			sink := &payloadSink{}
			d := New(sink, fast.FixedClock(1), func(uint64) {})
			if id := d.AddArgFn(ArgFn{fn, args, rets, payload}); id != 0 {
				t.Fatalf("first function numbered %d", id)
			}
			d.AddArgFn(ArgFn{fn, other, nil, payload})
			st := fast.NewState(make([]byte, fast.StateSize), 0)
			d.Add(st, 1)
			for _, r := range recs {
				st.Emit(r)
			}
			d.Sync()
			if got := fmt.Sprint(sink.log); got != want {
				t.Errorf("records\n%s\nwant\n%s", got, want)
			}
		})
	}
}
