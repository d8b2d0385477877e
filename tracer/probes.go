package tracer

import (
	"encoding/binary"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"rtrace/internal/elfx"
	"rtrace/internal/uftrace"
	"rtrace/internal/usdt"
	"rtrace/tracer/bp"
	"rtrace/tracer/ptrace"
)

// probeSite is a USDT probe rtrace planted a breakpoint at.
type probeSite struct {
	id   uint64 // user event id (>= uftrace.EventIDBase)
	name string // provider:name
	args []usdt.Arg
	// bad: why an operand does not decode; its argument and those after
	// it are left out, with one warning.
	bad    error
	warned bool
}

// eventID returns the user event id of provider:name, announcing a new one
// to the sink (events.txt).
func (t *Tracer) eventID(name string) uint64 {
	if id, ok := t.eventIDs[name]; ok {
		return id
	}
	id := uftrace.EventIDBase + uint64(len(t.eventIDs))
	t.eventIDs[name] = id
	if t.funcs != nil {
		t.emit(t.funcs.Event(id, name))
	}
	return id
}

// plantProbes plants a breakpoint at each probe of module f (loaded at
// bias) that an -E pattern selects, and bumps its semaphore.
func (t *Tracer) plantProbes(mem *os.File, im *image, f *elfx.File, bias uint64) {
	if f.ProbeErr != nil && len(t.cfg.Events) > 0 {
		fmt.Fprintf(t.cfg.Warn, "rtrace: warning: %s: %v\n", f.Path, f.ProbeErr)
	}
	for _, p := range f.Probes {
		if !matchEvent(t.cfg.Events, p) {
			continue
		}
		for _, pat := range t.cfg.Events {
			if p.Match(pat) {
				if t.eventHit == nil {
					t.eventHit = map[string]bool{}
				}
				t.eventHit[pat] = true
			}
		}
		addr := p.PC + bias
		if err := t.plantProbe(mem, im, p, addr, bias); err != nil {
			fmt.Fprintf(t.cfg.Warn, "rtrace: warning: cannot plant probe %s at %#x in %s: %v\n", p.FullName(), addr, f.Path, err)
		}
	}
}

func matchEvent(pats []string, p usdt.Probe) bool {
	for _, pat := range pats {
		if p.Match(pat) {
			return true
		}
	}
	return false
}

func (t *Tracer) plantProbe(mem *os.File, im *image, p usdt.Probe, addr, bias uint64) error {
	if b := im.bps.At(addr); b != nil {
		// A function's int3 entry (a detour would cover the probe): one
		// stop records the call, then the probe.
		if b.Kind&bp.Probe != 0 || b.Plan.Action == bp.Detoured {
			return fmt.Errorf("another breakpoint is there")
		}
		if err := bumpSemaphore(mem, p, bias); err != nil {
			return err
		}
		if p.Semaphore != 0 {
			im.semaphores = append(im.semaphores, p.Semaphore+bias)
		}
		b.Kind |= bp.Probe
		b.Site = t.addSite(im, p)
		return nil
	}
	b, err := stageInt3(mem, im, addr)
	if err != nil {
		return err
	}
	if err := bumpSemaphore(mem, p, bias); err != nil {
		return err
	}
	if p.Semaphore != 0 {
		im.semaphores = append(im.semaphores, p.Semaphore+bias)
	}
	if err := armInt3(mem, b); err != nil {
		return err
	}
	b.Kind, b.Site = bp.Probe, t.addSite(im, p)
	im.bps.Add(b)
	return nil
}

// addSite adds p to im's probe sites and returns its index.
func (t *Tracer) addSite(im *image, p usdt.Probe) int {
	site := probeSite{id: t.eventID(p.FullName()), name: p.FullName()}
	site.args, site.bad = usdt.ParseArgs(p.Args)
	im.probes = append(im.probes, site)
	return len(im.probes) - 1
}

// bumpSemaphore increments p's semaphore, if it has one, so the program
// evaluates the probe (its *_ENABLED() test).
func bumpSemaphore(mem *os.File, p usdt.Probe, bias uint64) error {
	if p.Semaphore == 0 {
		return nil
	}
	return addSemaphore(mem, p.Semaphore+bias, 1)
}

// addSemaphore adds delta to the 16-bit USDT semaphore at addr: +1 when
// rtrace plants a probe, -1 when a detach takes it out.
func addSemaphore(mem *os.File, addr uint64, delta uint16) error {
	var c [2]byte
	if _, err := mem.ReadAt(c[:], int64(addr)); err != nil {
		return fmt.Errorf("reading its semaphore: %w", err)
	}
	binary.LittleEndian.PutUint16(c[:], binary.LittleEndian.Uint16(c[:])+delta)
	if _, err := mem.WriteAt(c[:], int64(addr)); err != nil {
		return fmt.Errorf("writing its semaphore: %w", err)
	}
	return nil
}

// probe records a probe hit of th: an EVENT record at the current depth,
// and the decoded arguments for the probe log.
func (t *Tracer) probe(th *thread, b *bp.Breakpoint, regs *unix.PtraceRegs, ts uint64) {
	if t.funcs == nil || !t.on {
		return
	}
	site := &th.proc.image.probes[b.Site]
	depth := th.depth
	if th.proc.image.fast != nil {
		// The frames are in the process; the record goes after the ring's.
		depth = 0
		if st := th.fastView(); st != nil {
			depth = st.Depth()
		}
		t.fastRecord(th, uftrace.Record{Time: ts, Type: uftrace.Event, Depth: depth, Addr: site.id}, nil)
	} else {
		t.record(th, uftrace.Record{Time: ts, Type: uftrace.Event, Depth: depth, Addr: site.id}, nil)
	}
	reg := func(name string) uint64 {
		if name == "rip" {
			return b.Addr
		}
		if get := namedRegs[name]; get != nil {
			return get(regs)
		}
		return 0
	}
	read := func(addr uint64, size int) (uint64, error) {
		var buf [8]byte
		if err := ptrace.ReadMem(th.tid, addr, buf[:size]); err != nil {
			return 0, err
		}
		return binary.LittleEndian.Uint64(buf[:]), nil
	}
	vals := make([]string, 0, len(site.args))
	for _, a := range site.args {
		v, err := a.Value(reg, read)
		if err != nil {
			if !site.warned {
				site.warned = true
				fmt.Fprintf(t.cfg.Warn, "rtrace: warning: probe %s: argument %d: %v (shown as ?)\n", site.name, len(vals)+1, err)
			}
			vals = append(vals, "?")
			continue
		}
		vals = append(vals, a.Format(v))
	}
	if site.bad != nil && !site.warned {
		site.warned = true
		fmt.Fprintf(t.cfg.Warn, "rtrace: warning: probe %s: %v: recorded without that argument and those after it\n", site.name, site.bad)
	}
	t.emit(t.funcs.Probe(ts, th.tid, site.name, vals))
}
