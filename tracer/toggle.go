package tracer

import (
	"errors"
	"fmt"
	"os"

	"rtrace/tracer/bp"
)

// toggle flips resource reporting (the toggle signal arrived). Turning it
// on asks the sink to open its stream first; when that fails reporting
// stays off. Breakpoints of resource functions are written in or taken out
// so a target with reporting off runs at full speed. Called on the tracer
// thread.
func (t *Tracer) toggle(pid int) {
	on := !t.resOn
	if err := t.sink.Toggle(on, pid); err != nil {
		fmt.Fprintf(t.cfg.Warn, "rtrace: cannot turn tracing on: %v\n", err)
		return
	}
	t.setRes(on)
}

// ErrStreamClosed is what Sink.Call returns once the resource stream is
// gone (a listener died): reporting is then turned off, as a toggle would.
var ErrStreamClosed = errors.New("resource stream closed")

// setRes turns resource reporting on or off in every traced process.
func (t *Tracer) setRes(on bool) {
	t.resOn = on
	for _, p := range t.procs {
		mem, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", p.pid), os.O_RDWR, 0)
		if err != nil {
			continue
		}
		t.armRes(mem, p.image, 0, len(p.image.funcs), on)
		mem.Close()
	}
}

// armRes writes (on) or takes out the entry instrumentation of the
// resource functions among im.funcs[lo:hi]. A disarmed breakpoint stays in
// the table: a thread already past the entry still reaches its trampoline
// or slot, and is handled there as before.
func (t *Tracer) armRes(mem *os.File, im *image, lo, hi int, on bool) {
	im.bps.All(func(b *bp.Breakpoint) {
		if b.Func < lo || b.Func >= hi || b.Kind&bp.FuncEntry == 0 || im.funcs[b.Func].res == nil {
			return
		}
		addr, code := entryPatch(b, on)
		if _, err := mem.WriteAt(code, int64(addr)); err != nil {
			fmt.Fprintf(t.cfg.Warn, "rtrace: warning: cannot patch %s: %v\n", im.funcs[b.Func].name, err)
		}
	})
}

// entryPatch is where a breakpoint's instrumentation goes and its bytes:
// armed (the detour jmp or GOT slot value, or an int3) or not (the
// original bytes).
func entryPatch(b *bp.Breakpoint, armed bool) (uint64, []byte) {
	if b.Plan.Action == bp.Detoured {
		if armed {
			return b.Plan.Patch, b.Plan.Jmp
		}
		return b.Plan.Patch, b.Plan.Orig
	}
	if armed {
		return b.Addr, []byte{bp.Int3}
	}
	return b.Addr, []byte{b.Orig}
}
