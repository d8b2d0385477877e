package tracer

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"

	"rtrace/internal/uftrace"
	"rtrace/tracer/fast"
)

// payloadSink notes the records a function sink gets, with their payloads.
type payloadSink struct {
	FuncSink
	log []string
}

func (s *payloadSink) Records(tid int, recs []Rec) error {
	for _, r := range recs {
		s.log = append(s.log, fmt.Sprintf("%s %#x more=%v %x", r.Type, r.Addr, r.More, r.Payload))
	}
	return nil
}

// The drain gives an ARGS or RET group (args.S) to the function record
// after it when that record's word is the one the group names, as its
// payload (made from the registers as a stop makes it): across a batch's
// end too; a group followed by another record is dropped.
func TestDrainValues(t *testing.T) {
	args := []uftrace.ArgSpec{{Kind: uftrace.IntArg, Index: 1, Size: 4}, {Kind: uftrace.IntArg, Index: 3}}
	rets := []uftrace.ArgSpec{{Kind: uftrace.RetVal}}
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
	const fn, other = 0x401000, 0x402000
	entry, exit := fast.Word(fast.TypeEntry, 0, fn), fast.Word(fast.TypeExit, 0, fn)
	var recs []fast.Rec
	recs = append(recs, fast.ValueWords(entry, false, []uint64{7, 8, 9})...)
	recs = append(recs, fast.Rec{TSC: 100, Word: entry})
	recs = append(recs, fast.ValueWords(exit, true, []uint64{0x2a, 0})...)
	recs = append(recs, fast.Rec{TSC: 200, Word: exit})
	// Not its record: no payload.
	recs = append(recs, fast.ValueWords(fast.Word(fast.TypeEntry, 0, other), false, []uint64{1, 2, 3})...)
	recs = append(recs, fast.Rec{TSC: 300, Word: entry})
	recs = append(recs, fast.Rec{TSC: 400, Word: exit})
	p1, _ := uftrace.AppendPayload(nil, args, []uftrace.Value{{Int: 7}, {Int: 9}})
	p2, _ := uftrace.AppendPayload(nil, rets, []uftrace.Value{{Int: 0x2a}})
	want := fmt.Sprint([]string{
		fmt.Sprintf("entry %#x more=true %x", fn, p1), fmt.Sprintf("exit %#x more=true %x", fn, p2),
		fmt.Sprintf("entry %#x more=false ", fn), fmt.Sprintf("exit %#x more=false ", fn)})
	for _, batch := range []int{1, 2, 3, 1 << 12} {
		t.Run(fmt.Sprint(batch), func(t *testing.T) {
			defer func(n int) { drainBatch = n }(drainBatch)
			drainBatch = batch
			sink := &payloadSink{}
			d := newDrainer(sink, fast.FixedClock(1), func(uint64) {})
			d.addArgFn(fn, args, rets, payload)
			st := fast.NewState(make([]byte, fast.StateSize), 0)
			d.add(st, 1)
			for _, r := range recs {
				st.Emit(r)
			}
			d.sync()
			if got := fmt.Sprint(sink.log); got != want {
				t.Errorf("records\n%s\nwant\n%s", got, want)
			}
		})
	}
}
