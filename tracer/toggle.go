package tracer

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"rtrace/tracer/bp"
	"rtrace/tracer/fast/drain"
	"rtrace/tracer/ptrace"
)

// toggle flips tracing (the toggle signal arrived at process pid). The
// records of the closing window are handed over first. Turning tracing on
// asks each sink to open its window first; when one fails, tracing stays
// off. Function entries are written in or taken out, so a target with
// tracing off runs at full speed. th is the thread the signal stopped.
// Called on the tracer thread.
func (t *Tracer) toggle(th *thread) {
	on := !t.window // decided before windowEnd's flush may close the stream
	if !on {
		t.windowEnd(th)
	}
	t.switchWindow(th, on)
}

// switchWindow opens (on) or closes the sinks' window and turns tracing on
// or off with it; th is the thread a signal stopped.
func (t *Tracer) switchWindow(th *thread, on bool) {
	pid := th.proc.pid
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
	t.window = on
	if on {
		t.closeReq.Store(false) // a request for an earlier window is stale
	}
	// Entries are rewritten with every thread stopped: none runs the
	// bytes while they change.
	t.whileParked(th, func() { t.setOn(on) })
}

// signalAction does what a --signal trigger asks (the signal stopped
// th). Called on the tracer thread.
func (t *Tracer) signalAction(th *thread, act SignalAction) {
	switch {
	case t.finished:
	case act == Finish:
		t.finished = true
		if t.window {
			t.windowEnd(th)
			t.switchWindow(th, false)
		} else if t.on {
			t.whileParked(th, func() { t.setOn(false) })
		}
	case act == TraceOn && !t.on:
		if !t.window {
			t.switchWindow(th, true)
			return
		}
		t.flushAll()
		t.whileParked(th, func() { t.setOn(true) })
	case act == TraceOff && t.on:
		t.flushAll()
		t.whileParked(th, func() { t.setOn(false) })
	}
}

// whileParked runs f with every thread stopped: first is stopped already;
// the others are interrupted, and resumed after f with the signals they
// stopped with. Before f, a thread running the first instructions of a
// function whose entry f may patch is stepped past them.
func (t *Tracer) whileParked(first *thread, f func()) {
	if t.pending == nil {
		t.pending = map[int]unix.Signal{}
	}
	for tid, th := range t.threads {
		if th != first {
			ptrace.Interrupt(tid)
		}
	}
	first.parked = true
	if err := t.park(); err != nil {
		fmt.Fprintf(t.cfg.Warn, "rtrace: warning: %v\n", err)
	}
	f()
	for _, th := range t.threads {
		if th.parked {
			t.moveOutOfPatches(th)
		}
	}
	for tid, th := range t.threads {
		th.parked = false
		if th == first {
			continue
		}
		if th.groupStop {
			ptrace.Listen(tid)
		} else {
			t.deliver(th, t.pending[tid])
		}
		delete(t.pending, tid)
	}
	if t.closeReq.Load() && first.proc != nil {
		t.wake(first.proc.pid) // its wake came while the threads were parked
	}
}

// moveOutOfPatches moves a stopped thread whose pc lies inside the bytes
// a detour jmp covers (it was running a function's first instructions
// when the jmp was written) to the copy of that instruction in the
// trampoline, which goes on and jumps back after the jmp: the thread
// never runs the middle of the jmp. (A rep-prefixed instruction can stay
// there for long: single-stepping it does one iteration.)
func (t *Tracer) moveOutOfPatches(th *thread) {
	if th.proc == nil {
		return
	}
	var regs unix.PtraceRegs
	if ptrace.GetRegs(th.tid, &regs) != nil {
		return
	}
	if to, ok := movedPC(th.proc.image, regs.Rip); ok {
		ptrace.SetPC(th.tid, to)
	}
}

// movedPC returns where a thread at pc, inside (not at the start of) the
// bytes a detour jmp covers, goes on.
func movedPC(im *image, pc uint64) (uint64, bool) {
	var to uint64
	found := false
	im.bps.All(func(b *bp.Breakpoint) {
		if b.Plan.Action == bp.Detoured && len(b.Plan.Jmp) == 5 && pc > b.Plan.Patch && pc < b.Plan.Patch+5 {
			to, found = b.Plan.Moved[pc]
		}
	})
	return to, found
}

// CloseWindow asks the tracer to close the open window and turn tracing
// off, as a toggle would (safe from any goroutine): its reader went away
// (a listening `rtrace toggle` was killed), and the tracer must not wait
// for its next write to notice. pid is a traced process: the wake signal
// goes to its first thread, and the tracer swallows it.
func (t *Tracer) CloseWindow(pid int) {
	if t.closeReq.Swap(true) {
		return
	}
	t.wake(pid)
}

// wake sends the wake signal to pid's main thread; the loop knows it for
// rtrace's own by its siginfo (ownWake) and swallows it.
func (t *Tracer) wake(pid int) {
	unix.Tgkill(pid, pid, wakeSignal)
}

// closeRequested closes the window CloseWindow asked to close, th being
// a thread stopped by the wake signal.
func (t *Tracer) closeRequested(th *thread) {
	if t.closeReq.Swap(false) && t.window && !t.finished && th.proc != nil {
		fmt.Fprintln(t.cfg.Warn, WindowGoneLine)
		t.switchWindow(th, false)
	}
}

// WindowGoneLine is what rtrace says when a window's reader (a listening
// `rtrace toggle`) went away and tracing is turned off.
const WindowGoneLine = "rtrace: the reader of the trace's window went away: tracing turned off"

// ErrStreamClosed is what a sink returns once its stream is gone (a
// listener died): tracing is then turned off, as a toggle would. The
// drain's: it says it of the resource calls it hands on.
var ErrStreamClosed = drain.ErrStreamClosed

// setOn turns tracing on or off in every traced process.
func (t *Tracer) setOn(on bool) {
	t.on = on
	for _, p := range t.procs {
		if p.image.fast != nil && p.image.fast.disabled {
			continue
		}
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
		for _, r := range im.funcs[b.Func].redirects {
			code := r.orig[:]
			if on {
				code = r.new[:]
			}
			mem.WriteAt(code, int64(r.at))
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
