package drain

import (
	"golang.org/x/sys/unix"

	"rtrace/internal/uftrace"
	"rtrace/tracer/fast"
)

// The values of a function whose stub records them (docs/FAST-PATH.md,
// "Arguments and return values"): an ARGS or RET group in the ring goes
// to the function record after it, as the payload the tracer makes at a
// stop.

// ArgFn is a function whose stub records its values: its address, its
// specs, and how their payload is made from registers (the tracer's, as
// at a stop). Its number (Desc.ID, the groups') is its index in the
// drainer's list: one address may be different functions in the
// processes of a traced tree.
type ArgFn struct {
	Addr       uint64
	Args, Rets []uftrace.ArgSpec
	Payload    func(specs []uftrace.ArgSpec, regs *unix.PtraceRegs) []byte
}

// AddArgFn numbers f, a function whose stub records its values.
func (d *Drainer) AddArgFn(f ArgFn) uint32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.argFns = append(d.argFns, f)
	return uint32(len(d.argFns) - 1)
}

// pendValues is an ARGS or RET group a ring held, waiting for the
// function record it belongs to: the next one, whose word is word.
type pendValues struct {
	word  uint64
	id    uint32
	ret   bool
	regs  [6]uint64
	valid bool
}

// set keeps c, an ARGS or RET group (ResCall.Values).
func (p *pendValues) set(c *fast.ResCall) {
	p.word, p.id, p.ret, p.valid = c.TSC, c.ID, c.Slot == 1, true
	p.regs = [6]uint64{}
	copy(p.regs[:], c.Words)
}

// payloadFor returns the payload of a function record (word word, the
// first after the group p but for -W cpu's watch events, which stubs
// write between) when p belongs to it, and forgets p: a group belongs to
// the function record that follows it, or to none.
func (d *Drainer) payloadFor(p *pendValues, word uint64, typ int, addr uint64) []byte {
	if !p.valid || typ == int(uftrace.Event) {
		return nil
	}
	p.valid = false
	if p.word != word || p.ret != (typ == int(uftrace.Exit)) || int(p.id) >= len(d.argFns) {
		return nil
	}
	f := &d.argFns[p.id]
	if f.Addr != addr {
		return nil
	}
	var regs unix.PtraceRegs
	specs := f.Args
	if p.ret {
		specs = f.Rets
		regs.Rax, regs.Rdx = p.regs[0], p.regs[1]
	} else {
		regs.Rdi, regs.Rsi, regs.Rdx, regs.Rcx, regs.R8, regs.R9 = p.regs[0], p.regs[1], p.regs[2], p.regs[3], p.regs[4], p.regs[5]
	}
	if len(specs) == 0 {
		return nil
	}
	return f.Payload(specs, &regs)
}
