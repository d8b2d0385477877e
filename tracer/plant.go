package tracer

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"rtrace/internal/elfx"
	"rtrace/tracer/bp"
	"rtrace/tracer/fast"
)

// plantFuncs maps size bytes of scratch just below the module of cm (so
// rip-relative operands and detour jumps stay in rel32 range), plans the
// instrumentation of cands there (planFuncs) and commits the plan. It
// returns the scratch mapping and the end of what it used. On error
// nothing stays patched.
func (t *Tracer) plantFuncs(tid int, mem *os.File, im *image, cm *codeMap, cands []cand, size uint64) (scratch, end uint64, err error) {
	f, bias := cm.f, cm.bias
	lo, hi := bias+f.MinVaddr(), bias
	for _, l := range f.Loads {
		hi = max(hi, bias+l.Vaddr+l.Memsz)
	}
	// Each place near the module in turn, none taken over
	// (MAP_FIXED_NOREPLACE), then anywhere: a hint the kernel cannot honour
	// puts the mapping far away, out of reach of the module's code.
	for _, at := range scratchPlaces(lo, hi, size) {
		flags := uint64(unix.MAP_PRIVATE | unix.MAP_ANONYMOUS)
		if at != 0 {
			flags |= unix.MAP_FIXED_NOREPLACE
		}
		scratch, err = remoteSyscall(tid, unix.SYS_MMAP, at, size, unix.PROT_READ|unix.PROT_EXEC, flags, ^uint64(0), 0)
		if err == nil {
			break
		}
	}
	if err != nil {
		return 0, 0, fmt.Errorf("mapping scratch memory for %s: %w", f.Path, err)
	}
	var fc *fastCode
	if im.fast != nil {
		fc = &fastCode{table: im.fast.tableAddr, alive: im.fast.life.word(), rdfsbase: im.fast.rdfsbase, clones: t.on && !t.attached, res: t.resDesc, args: func(c cand, addr uint64) (fast.Desc, bool) {
			return t.argsDesc(f, c, addr)
		}, stops: func(c cand) bool {
			if c.res != nil {
				return true // a resource call: reported at stops (fastValues)
			}
			if t.cfg.Reads != nil && t.cfg.Reads(c.name) != 0 {
				return true
			}
			if t.cfg.Specs == nil {
				return false
			}
			args, rets := t.cfg.Specs(f, c.name, c.specValue())
			return len(args) > 0 || len(rets) > 0
		}}
	}
	p := planFuncs(cm, cands, scratch, size, im.entry, f == im.elf, fc)
	t.skipped = append(t.skipped, p.skipped...)
	for _, sk := range p.skipped {
		if sk.Res {
			fmt.Fprintf(t.cfg.Warn, "rtrace: warning: %s in %s is not traced (%s): its calls are missing from the resource trace\n", sk.Func, f.Path, sk.Reason)
		}
	}
	t.int3s = append(t.int3s, p.int3s...)
	t.planted += len(p.entries)
	if err := t.commitPlan(mem, im, p); err != nil {
		remoteSyscall(tid, unix.SYS_MUNMAP, scratch, size)
		return 0, 0, err
	}
	return scratch, p.end(), nil
}

// scratchSize is the size of a scratch mapping for slots slots: the
// return breakpoint's 16 bytes, the fast engine's shared code, and MaxSlot
// per slot, in whole pages.
func scratchSize(slots int) uint64 {
	return (16 + fast.CodeSize + uint64(slots*(bp.MaxSlot+fast.DescSize)) + 4095) &^ 4095
}

// cloneRoom is the scratch room the fast engine adds for copies of whole
// functions (bp.PrepareClone); a copy that does not fit leaves its
// function with an int3.
const cloneRoom = 64 << 10

// scratchPlaces are where to ask for size bytes of scratch for a module
// loaded at [lo, hi), nearest first: below it (scratchHint, then further
// down), above it past room for the heap a non-PIE program's brk grows
// into, then 0 (anywhere). Each is within rel32 reach of the module's code
// for a module under 1 GiB.
func scratchPlaces(lo, hi, size uint64) []uint64 {
	var places []uint64
	if h := scratchHint(lo, size); h != 0 {
		for k := uint64(0); k < 4 && h >= k<<24 && h-k<<24 >= 1<<16; k++ {
			places = append(places, h-k<<24)
		}
	}
	for k := uint64(1); k <= 4; k++ {
		places = append(places, (hi+k<<26+4095)&^4095)
	}
	return append(places, 0)
}

// scratchHint is where to ask for size bytes of scratch for a module
// loaded from lo on: a page-aligned address 1 MiB below it, so that its
// code reaches the scratch with rel32 displacements; 0 (anywhere) when
// there is no room below.
func scratchHint(lo, size uint64) uint64 {
	hint := (lo - size - 1<<20) &^ 4095
	if hint > lo { // wrapped around
		return 0
	}
	return hint
}

// plantPlan is how the functions of one module are instrumented: what
// goes in its scratch mapping and what is written over their entries.
// planFuncs computes it without touching the process; commitPlan writes
// it.
type plantPlan struct {
	f             *elfx.File
	text          textImage // the module's code as planned over
	scratch, size uint64    // the scratch mapping
	// code is the scratch mapping's contents from its start: the return
	// breakpoint (an int3 padded to 16 bytes), then each entry's slot,
	// padded to 16 bytes.
	code    []byte
	entries []entryPlan
	// sites: the fast engine's shared code is at the start of the scratch,
	// after the return breakpoint (nil: the int3 engine).
	sites *fast.Sites
	// clones are the functions detoured to a copy of their whole body.
	clones []string
	// skipped are the candidates left untraced, int3s those instrumented
	// with an int3 instead of a detour, with why.
	skipped, int3s []Skip
}

// entryPlan is the instrumentation of one function's entry.
type entryPlan struct {
	c    cand
	addr uint64 // runtime address
	// bp is its breakpoint (Func not set: the function's index is known
	// when it is committed); the entry gets patch over orig.
	bp          bp.Breakpoint
	patch       uint64
	jmp, orig   []byte
	jump        bool // setjmp (fn.jump)
	personality bool // a personality routine (fn.personality)
	// stub is the fast engine's stub of the function: where a thread
	// stopped at its int3 entry goes on (a detour jumps there itself).
	stub uint64
	// redirects: with an int3 entry, the direct calls and jumps of the
	// module aimed at the stub instead (no stop for them).
	redirects []redirect
	// argStub: its stub records its -A/-R values (args.S).
	argStub bool
}

// redirect is a call site's rel32 rewritten: at at, new over orig.
type redirect struct {
	at        uint64
	orig, new [4]byte
}

// fastCode says how the fast engine's code is generated (planFuncs): the
// thread table's address and how the code reads a thread's key.
type fastCode struct {
	table    uint64
	alive    uint64 // the lifeline word (fast_lifeline.go), 0: none
	rdfsbase bool
	// stops says which functions keep an int3 entry that the tracer
	// handles at each call (their arguments or return value are recorded).
	stops func(c cand) bool
	// clones: a function may run from a copy of its body. Only when no
	// thread can be inside it yet: not at an attach, and not for entries
	// planted disarmed (--disable) that a toggle arms later.
	clones bool
	// res says, for a resource module's function at addr, the descriptor
	// of the stub that records its calls in the process (res.S); false
	// keeps it on stops.
	res func(c cand, addr uint64) (fast.Desc, bool)
	// args says, for a function stops would keep for its arguments or
	// return value, the descriptor of the stub that records them in the
	// process (args.S); false keeps it on stops.
	args func(c cand, addr uint64) (fast.Desc, bool)
}

// headFunc makes the head of a function's stub at a slot (fast.Head).
type headFunc func(slot uint64) ([]byte, error)

// end is the end of the scratch the plan uses, 16-byte aligned: where
// later slots (hooks, GOT trampolines) may go.
func (p *plantPlan) end() uint64 { return (p.scratch + uint64(len(p.code)) + 15) &^ 15 }

// planFuncs plans the instrumentation of cands in the module of cm, with
// size bytes of scratch at scratch whose first byte is the return
// breakpoint: a detour where the entry allows one, an int3 otherwise, and
// nothing (a Skip) where neither can be planted or the scratch is full.
// entry is the program's entry point; exe says cm is the executable's.
// With fc (the fast engine), each function gets a stub that records its
// calls in the process (fast.Head): a detour jumps to it, an int3 entry
// sends the thread there.
func planFuncs(cm *codeMap, cands []cand, scratch, size, entry uint64, exe bool, fc *fastCode) *plantPlan {
	// entries sized first: an entryPlan is large, and growing the slice
	// one function at a time was a quarter of planning sqlite3.
	p := &plantPlan{f: cm.f, text: cm.text, scratch: scratch, size: size, code: make([]byte, 16, size), entries: make([]entryPlan, 0, len(cands))}
	p.code[0] = bp.Int3
	ret := scratch
	if fc != nil {
		s := fast.SitesAt(scratch + 16)
		p.sites = &s
		p.code = append(p.code, fast.Code(fc.table, fc.alive, fc.rdfsbase)...)
	}
	for _, c := range cands {
		addr := c.value + cm.bias
		body := cm.text.code(addr, max(c.size, 16))
		n := len(body) // fewer than 16 bytes at the end of the text
		if n == 0 {
			p.skipped = append(p.skipped, Skip{c.name, fmt.Sprintf("no code at %#x", addr), c.res != nil})
			continue
		}
		if uint64(len(p.code))+bp.MaxSlot+fast.DescSize > size {
			p.skipped = append(p.skipped, Skip{c.name, "no scratch room left", c.res != nil})
			continue
		}
		jump := c.libcall && hookNames[c.name] == hookSetjmp
		var plan bp.Plan
		err := errJump
		personality := c.libcall && exe && strings.HasSuffix(c.name, "_personality_v0")
		stops := fc != nil && fc.stops != nil && fc.stops(c)
		argStub := false
		var head headFunc
		if p.sites != nil {
			sites := p.sites
			head = func(slot uint64) ([]byte, error) { return fast.Head(slot, addr, sites.Entry) }
			if c.res != nil && fc.res != nil {
				if d, ok := fc.res(c, addr); ok {
					// The descriptor before the stub: the stub hands it to
					// the shared code.
					desc := scratch + uint64(len(p.code))
					p.code = append(p.code, d.Bytes()...)
					head = func(slot uint64) ([]byte, error) { return fast.ResHead(slot, desc, sites.ResEntry) }
					stops = false
				}
			} else if stops && fc.args != nil {
				if d, ok := fc.args(c, addr); ok {
					desc := scratch + uint64(len(p.code))
					p.code = append(p.code, d.Bytes()...)
					head = func(slot uint64) ([]byte, error) { return fast.ArgsHead(slot, desc, sites.EntryArgs) }
					stops, argStub = false, true
				}
			}
		}
		slot := scratch + uint64(len(p.code))
		if stops {
			err = errValues
		} else if !jump && (p.sites == nil || !personality) {
			plan, err = cm.detour(c, body, slot, ret, entry, head)
		}
		var stub uint64
		var redirects []redirect
		if errors.Is(err, errBranchInside) && p.sites != nil && fc.clones {
			if cp, cerr := cm.clone(c, body, slot, head); cerr == nil && uint64(len(p.code)+len(cp.Slot)) <= size {
				plan, err = cp, nil
				p.clones = append(p.clones, c.name)
			}
		}
		detourErr := err
		if err != nil {
			why := err.Error()
			if plan, err = bp.Prepare(body, addr, slot); err != nil {
				p.skipped = append(p.skipped, Skip{c.name, err.Error(), c.res != nil})
				continue
			}
			if p.sites != nil {
				// The stub a thread stopped at the int3 is sent to: the head,
				// then on to where the function goes on.
				stub = (slot + uint64(len(plan.Slot)) + 15) &^ 15
				head, herr := head(stub)
				if herr != nil {
					p.skipped = append(p.skipped, Skip{c.name, herr.Error(), c.res != nil})
					continue
				}
				plan.Slot = append(plan.Slot, make([]byte, stub-slot-uint64(len(plan.Slot)))...)
				plan.Slot = bp.JumpBack(append(plan.Slot, head...), slot, plan.Resume)
				if !jump && !personality && !stops && !errors.Is(detourErr, errProbeInside) && !cm.probeAt(addr) {
					// A probe in the first bytes must see every call.
					redirects = cm.redirects(addr, stub)
				}
			}
			if !jump && !(p.sites != nil && personality) {
				p.int3s = append(p.int3s, Skip{Func: c.name, Reason: why})
			}
		} else if p.sites != nil {
			stub = slot
		}
		p.code = append(p.code, plan.Slot...)
		p.code = append(p.code, make([]byte, -len(p.code)&15)...)
		e := entryPlan{c: c, addr: addr, jump: jump, personality: personality, stub: stub, redirects: redirects, argStub: argStub,
			bp: bp.Breakpoint{Addr: addr, Orig: body[0], Kind: bp.FuncEntry, Plan: plan}}
		if plan.Action == bp.Detoured {
			e.bp.Addr = plan.Trap
			if p.sites != nil {
				e.bp.Addr = stub // no int3: the key of its bookkeeping
			}
			e.patch, e.jmp, e.orig = plan.Patch, plan.Jmp, plan.Orig
		} else {
			e.patch, e.jmp, e.orig = addr, []byte{bp.Int3}, body[:1]
		}
		p.entries = append(p.entries, e)
	}
	p.keepRedirects()
	return p
}

// detour plans a detour for cand c, whose code at its runtime address is
// body, with its trampoline at slot and ret as its return breakpoint. The
// error says why it gets no detour: code that does not all decode, the
// function holding the entry point (whose breakpoint must not land inside
// a jump), one too short, or something another piece of code reaches
// inside the jump (a symbol, a branch target, a USDT probe).
func (cm *codeMap) detour(c cand, body []byte, slot, ret, entry uint64, head headFunc) (bp.Plan, error) {
	addr := c.value + cm.bias
	if err := cm.undecoded[c.value]; err != nil {
		return bp.Plan{}, err
	}
	if c.size == 0 || c.size > uint64(len(body)) || entry >= addr && entry < addr+c.size {
		return bp.Plan{}, errEntryPoint
	}
	var plan bp.Plan
	var err error
	if head != nil {
		plan, err = bp.PrepareDetourWith(body[:c.size], addr, slot, head)
	} else {
		plan, err = bp.PrepareDetour(body[:c.size], addr, slot, ret)
	}
	if err != nil {
		return plan, err
	}
	lo, hi := plan.Patch, plan.Patch+uint64(len(plan.Jmp))
	switch {
	case symbolWithin(cm.starts, lo-cm.bias, hi-cm.bias):
		return plan, errSymbolInside
	case cm.targets.within(lo, hi):
		return plan, errBranchInside
	case symbolWithin(cm.probes, lo-1, hi):
		return plan, errProbeInside
	}
	return plan, nil
}

// clone plans, for the fast engine, a detour of c to a copy of its whole
// body (bp.PrepareClone): for a function whose own loop jumps inside the
// bytes the jmp overwrites, when no other function's branch lands there.
// Its copy makes real calls only in a module without C++ exceptions.
func (cm *codeMap) clone(c cand, body []byte, slot uint64, head headFunc) (bp.Plan, error) {
	addr := c.value + cm.bias
	if c.size == 0 || c.size > uint64(len(body)) || c.size > 8192 {
		return bp.Plan{}, errBranchInside
	}
	body = body[:c.size]
	own, err := bp.Branches(body, addr)
	if err != nil {
		return bp.Plan{}, err
	}
	// Once the copy runs, the original body never must: no other
	// function's branch may land anywhere in it (a .cold part jumping
	// back), and a USDT probe in it would never be hit.
	end := addr + c.size
	slices.Sort(own.Targets)
	for a := addr + 1; a < end; a++ {
		n := cm.targets.at(a)
		if n == 0 {
			continue
		}
		lo, _ := slices.BinarySearch(own.Targets, a)
		hi, _ := slices.BinarySearch(own.Targets, a+1)
		if n == maxLandings || n != hi-lo {
			return bp.Plan{}, errBranchInside // another function jumps there too
		}
	}
	if j, _ := slices.BinarySearch(cm.probes, addr); j < len(cm.probes) && cm.probes[j] < end {
		return bp.Plan{}, errProbeInside
	}
	return bp.PrepareClone(body, addr, slot, !cm.exceptions(), head)
}

// exceptions reports whether the module may unwind C++ exceptions through
// its frames: it calls the C++ runtime's throw or the unwinder.
func (cm *codeMap) exceptions() bool {
	for _, imp := range cm.f.Imports {
		switch imp.Name {
		case "__cxa_throw", "__cxa_rethrow", "_Unwind_RaiseException", "_Unwind_Resume", "__gxx_personality_v0":
			return true
		}
	}
	for _, fn := range cm.f.Funcs {
		if fn.Name == "_Unwind_RaiseException" || fn.Name == "__gxx_personality_v0" {
			return true
		}
	}
	return false
}

// probeAt reports whether a USDT probe -E selects is at addr.
func (cm *codeMap) probeAt(addr uint64) bool {
	_, found := slices.BinarySearch(cm.probes, addr)
	return found
}

// redirects returns the rewrites that aim the module's direct calls and
// jumps of the function at addr at its stub. Sites that other patches
// overlap are dropped by keepRedirects.
func (cm *codeMap) redirects(addr, stub uint64) []redirect {
	var out []redirect
	i, _ := slices.BinarySearchFunc(cm.callers, addr, func(s bp.Site, t uint64) int { return cmp.Compare(s.Target, t) })
	for ; i < len(cm.callers) && cm.callers[i].Target == addr; i++ {
		at := cm.callers[i].At
		rel := int64(stub) - int64(at+5)
		if rel < math.MinInt32 || rel > math.MaxInt32 {
			continue
		}
		code := cm.text.code(at+1, 4)
		if len(code) != 4 {
			continue
		}
		r := redirect{at: at + 1}
		copy(r.orig[:], code)
		binary.LittleEndian.PutUint32(r.new[:], uint32(int32(rel)))
		out = append(out, r)
	}
	return out
}

// keepRedirects drops the call-site rewrites that overlap the bytes
// another entry patches (a call among a detoured function's first
// instructions is displaced, not rewritten).
func (p *plantPlan) keepRedirects() {
	var patched [][2]uint64
	for _, e := range p.entries {
		patched = append(patched, [2]uint64{e.patch, e.patch + uint64(len(e.jmp))})
	}
	slices.SortFunc(patched, func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) })
	overlaps := func(lo, hi uint64) bool {
		i, _ := slices.BinarySearchFunc(patched, lo, func(r [2]uint64, t uint64) int { return cmp.Compare(r[0], t) })
		return i < len(patched) && patched[i][0] < hi || i > 0 && patched[i-1][1] > lo
	}
	calls := map[string]int{}
	for i := range p.entries {
		e := &p.entries[i]
		e.redirects = slices.DeleteFunc(e.redirects, func(r redirect) bool { return overlaps(r.at-1, r.at+4) })
		calls[e.c.name] += len(e.redirects)
	}
	for i, s := range p.int3s {
		if n := calls[s.Func]; n > 0 {
			p.int3s[i].Reason += fmt.Sprintf(" (its %d direct call site(s) call its stub without a stop)", n)
		}
	}
}

// symbolWithin reports whether a symbol of sorted starts lies in (lo, hi).
func symbolWithin(starts []uint64, lo, hi uint64) bool {
	i, _ := slices.BinarySearch(starts, lo+1)
	return i < len(starts) && starts[i] < hi
}
