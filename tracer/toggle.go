package tracer

import (
	"errors"
	"fmt"
	"io"
	"os"

	"rtrace/tracer/bp"
)

// toggle flips tracing (the toggle signal arrived at process pid). The
// records of the closing window are handed over first. Turning tracing on
// asks each sink to open its window first; when one fails, tracing stays
// off. Function entries are written in or taken out, so a target with
// tracing off runs at full speed. Called on the tracer thread.
func (t *Tracer) toggle(pid int) {
	on := !t.on
	t.flushAll()
	var sinks, opened []Sink
	if t.funcs != nil {
		sinks = append(sinks, t.funcs)
	}
	if t.res != nil {
		sinks = append(sinks, t.res)
	}
	for _, s := range sinks {
		if err := s.Toggle(on, pid); err != nil {
			if !on {
				t.emit(err)
				continue
			}
			fmt.Fprintf(t.cfg.Warn, "rtrace: cannot turn tracing on: %v\n", err)
			for _, o := range opened {
				t.emit(o.Toggle(false, pid))
			}
			return
		}
		opened = append(opened, s)
	}
	t.setOn(on)
}

// ErrStreamClosed is what a sink returns once its stream is gone (a
// listener died): tracing is then turned off, as a toggle would.
var ErrStreamClosed = errors.New("stream closed")

// setOn turns tracing on or off in every traced process.
func (t *Tracer) setOn(on bool) {
	t.on = on
	for _, p := range t.procs {
		mem, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", p.pid), os.O_RDWR, 0)
		if err != nil {
			continue
		}
		t.arm(mem, p.image, 0, len(p.image.funcs), on)
		mem.Close()
	}
}

// arm writes (on) or takes out the entry instrumentation of the functions
// im.funcs[lo:hi]. A breakpoint that is also a hook, a probe or the entry
// point's stays: those work whether tracing is on or not. A disarmed
// breakpoint stays in the table: a thread already past the entry still
// reaches its trampoline or slot, and is handled there as before.
func (t *Tracer) arm(mem io.WriterAt, im *image, lo, hi int, on bool) {
	im.bps.All(func(b *bp.Breakpoint) {
		if !disarmable(b, lo, hi) {
			return
		}
		addr, code := entryPatch(b, on)
		if _, err := mem.WriteAt(code, int64(addr)); err != nil {
			fmt.Fprintf(t.cfg.Warn, "rtrace: warning: cannot patch %s: %v\n", im.funcs[b.Func].name, err)
		}
	})
}

// disarmable reports whether b is the entry instrumentation of one of the
// functions im.funcs[lo:hi] that tracing turns on and off: not also a
// hook's, a probe's or the entry point's breakpoint.
func disarmable(b *bp.Breakpoint, lo, hi int) bool {
	return b.Func >= lo && b.Func < hi && b.Kind&bp.FuncEntry != 0 && b.Kind&(bp.Hook|bp.Probe|bp.Internal) == 0
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
