package tracer

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"rtrace/internal/elfx"
	"rtrace/tracer/bp"
	"rtrace/tracer/fast"
)

// codeMap is what planting needs to know of one loaded module: its code as
// the process holds it, and where a detour jump must not go.
type codeMap struct {
	f    *elfx.File
	bias uint64
	text textImage
	// starts are the symbols' link-time addresses, sorted; targets count
	// the direct branches landing on each byte of the text. A detour must
	// not put the middle of its jmp where a function jumps to: its own
	// loops or another function (glibc's __mempcpy_* jump into
	// __memcpy_*+3).
	starts  []uint64
	targets landings
	// slots are the runtime addresses indirect calls and jumps read their
	// target from (the GOT slots -fno-plt code calls through); loads those
	// other instructions read (a function's address taken).
	slots, loads map[uint64]bool
	// probes are the runtime addresses of the USDT probes -E selects: their
	// int3 must not land inside a detour jump. Sorted.
	probes []uint64
	// undecoded: functions whose code does not all decode. They are not
	// detoured: their own branches are not all known.
	undecoded map[uint64]error
	// callers are the 5-byte direct calls and jumps (runtime addresses),
	// sorted by target, then address.
	callers []bp.Site
	// called are the targets of direct calls of any encoding, kept only
	// for a module with synthetic functions (markColdParts).
	called map[uint64]bool
}

// scanModule reads the code of f, loaded at bias, and decodes every
// function. events are the -E patterns.
func scanModule(mem *os.File, f *elfx.File, bias uint64, events []string) *codeMap {
	cm := &codeMap{f: f, bias: bias, text: readText(mem, f, bias), slots: map[uint64]bool{}, loads: map[uint64]bool{}, undecoded: map[uint64]error{}}
	for _, p := range f.Probes {
		if matchEvent(events, p) {
			cm.probes = append(cm.probes, p.PC+bias)
		}
	}
	slices.Sort(cm.probes)
	cm.starts = make([]uint64, 0, len(f.Funcs))
	for _, fn := range f.Funcs {
		cm.starts = append(cm.starts, fn.Value)
	}
	// Decoding every function is most of the set-up time of a large
	// program: it runs on every CPU, the target waiting at its exec.
	type part struct {
		refs      bp.Refs // of all its functions
		undecoded map[uint64]error
	}
	workers := min(runtime.GOMAXPROCS(0), max(1, len(f.Funcs)/256))
	parts := make([]part, workers)
	// Only the GOT's slots matter of what indirect branches and other
	// instructions read (gotCalls): the rest is dropped as it is found.
	gotLo, gotHi := ^uint64(0), uint64(0)
	for _, imp := range f.Imports {
		gotLo, gotHi = min(gotLo, imp.GOT+bias), max(gotHi, imp.GOT+bias)
	}
	inGOT := func(refs []uint64, from int) []uint64 {
		keep := refs[:from]
		for _, r := range refs[from:] {
			if r >= gotLo && r <= gotHi {
				keep = append(keep, r)
			}
		}
		return keep
	}
	// Sized for the code's share of each worker: sqlite3 and Lua have a
	// branch target per 19 bytes of code, a 5-byte call or jump per 45.
	share := 0
	for _, t := range cm.text {
		share += len(t.data) / workers
	}
	synthetic := slices.ContainsFunc(f.Funcs, func(fn elfx.Func) bool { return fn.Synthetic })
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := part{undecoded: map[uint64]error{}}
			p.refs.Targets, p.refs.Sites = make([]uint64, 0, share/16), make([]bp.Site, 0, share/40)
			p.refs.WantCalls = synthetic
			for i := w; i < len(f.Funcs); i += workers {
				fn := f.Funcs[i]
				if b := cm.text.code(fn.Value+bias, fn.Size); b != nil {
					sites, slots, loads, calls := len(p.refs.Sites), len(p.refs.Slots), len(p.refs.Loads), len(p.refs.Calls)
					if err := p.refs.Add(b, fn.Value+bias); err != nil {
						// Past the bytes that did not decode, instructions may
						// be misread: none of its call sites is rewritten, and
						// none of its calls makes a split-off part a function.
						p.undecoded[fn.Value] = err
						p.refs.Sites, p.refs.Calls = p.refs.Sites[:sites], p.refs.Calls[:calls]
					}
					p.refs.Slots, p.refs.Loads = inGOT(p.refs.Slots, slots), inGOT(p.refs.Loads, loads)
				}
			}
			slices.SortFunc(p.refs.Sites, bySite)
			parts[w] = p
		}()
	}
	wg.Wait()
	nslots, nloads := 0, 0
	for _, p := range parts {
		nslots, nloads = nslots+len(p.refs.Slots), nloads+len(p.refs.Loads)
	}
	cm.slots, cm.loads = make(map[uint64]bool, nslots), make(map[uint64]bool, nloads)
	cm.targets = newLandings(cm.text)
	if synthetic {
		cm.called = map[uint64]bool{}
	}
	for _, p := range parts {
		for _, c := range p.refs.Calls {
			cm.called[c] = true
		}
		for _, t := range p.refs.Targets {
			cm.targets.add(t)
		}
		for _, s := range p.refs.Slots {
			cm.slots[s] = true
		}
		for _, s := range p.refs.Loads {
			cm.loads[s] = true
		}
		cm.callers = mergeSites(cm.callers, p.refs.Sites)
		maps.Copy(cm.undecoded, p.undecoded)
	}
	slices.Sort(cm.starts)
	return cm
}

// markColdParts renames the functions of a stripped executable that are
// parts split off a function (foo.cold, which a symbol table would name):
// with FDEs of their own, they look like functions, but they are reached
// by a jump from their function and never called. A synthetic function
// that a direct branch lands on and no direct call does is taken for one,
// and named func_<address>.cold so that it is not traced (isFragment). A
// function that only tail calls reach is left out with them.
func (cm *codeMap) markColdParts() {
	for i := range cm.f.Funcs {
		fn := &cm.f.Funcs[i]
		if !fn.Synthetic || isFragment(fn.Name) {
			continue
		}
		addr := fn.Value + cm.bias
		if c := cm.targets.count(addr); c != nil && *c > 0 && !cm.called[addr] {
			fn.Name += ".cold"
		}
	}
}

// bySite orders call sites by target, then address.
func bySite(a, b bp.Site) int {
	if c := cmp.Compare(a.Target, b.Target); c != 0 {
		return c
	}
	return cmp.Compare(a.At, b.At)
}

// mergeSites merges two lists of call sites sorted by bySite into one.
func mergeSites(a, b []bp.Site) []bp.Site {
	if len(a) == 0 {
		return b
	}
	out := make([]bp.Site, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if bySite(a[0], b[0]) <= 0 {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// landings count, for each byte of a module's text, the direct branches
// that land there (at most maxLandings: more count as maxLandings), by
// runtime address. Counting in place of a sorted list of targets: sorting
// sqlite3's 58,000 was an eighth of decoding it.
type landings []struct {
	start uint64
	n     []uint8
}

const maxLandings = math.MaxUint8

func newLandings(text textImage) landings {
	l := make(landings, len(text))
	for i, t := range text {
		l[i].start, l[i].n = t.start, make([]uint8, len(t.data))
	}
	return l
}

// count returns addr's counter, nil outside the text.
func (l landings) count(addr uint64) *uint8 {
	for _, s := range l {
		if i := addr - s.start; i < uint64(len(s.n)) {
			return &s.n[i]
		}
	}
	return nil
}

// add counts a branch landing at addr (outside the text: not counted).
func (l landings) add(addr uint64) {
	if c := l.count(addr); c != nil && *c < maxLandings {
		*c++
	}
}

// at returns how many branches land at addr.
func (l landings) at(addr uint64) int {
	if c := l.count(addr); c != nil {
		return int(*c)
	}
	return 0
}

// within reports whether a branch lands in (lo, hi).
func (l landings) within(lo, hi uint64) bool {
	for a := lo + 1; a < hi; a++ {
		if l.at(a) > 0 {
			return true
		}
	}
	return false
}

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
		fc = &fastCode{table: im.fast.tableAddr, rdfsbase: im.fast.rdfsbase, clones: t.on && !t.attached, stops: func(c cand) bool {
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
	return (16 + fast.CodeSize + uint64(slots*bp.MaxSlot) + 4095) &^ 4095
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
}

// redirect is a call site's rel32 rewritten: at at, new over orig.
type redirect struct {
	at        uint64
	orig, new [4]byte
}

// syscallGadget is `syscall; int3`, at gadgetOff in every scratch mapping:
// where the fast engine runs system calls in a thread while others run
// (remoteSyscallAt).
var syscallGadget = []byte{0x0f, 0x05, bp.Int3}

const gadgetOff = 8

// fastCode says how the fast engine's code is generated (planFuncs): the
// thread table's address and how the code reads a thread's key.
type fastCode struct {
	table    uint64
	rdfsbase bool
	// stops says which functions keep an int3 entry that the tracer
	// handles at each call (their arguments or return value are recorded).
	stops func(c cand) bool
	// clones: a function may run from a copy of its body. Only when no
	// thread can be inside it yet: not at an attach, and not for entries
	// planted disarmed (--disable) that a toggle arms later.
	clones bool
}

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
	copy(p.code[gadgetOff:], syscallGadget)
	ret := scratch
	if fc != nil {
		s := fast.SitesAt(scratch + 16)
		p.sites = &s
		p.code = append(p.code, fast.Code(fc.table, fc.rdfsbase)...)
	}
	for _, c := range cands {
		addr := c.value + cm.bias
		body := cm.text.code(addr, max(c.size, 16))
		n := len(body) // fewer than 16 bytes at the end of the text
		if n == 0 {
			p.skipped = append(p.skipped, Skip{c.name, fmt.Sprintf("no code at %#x", addr), c.res != nil})
			continue
		}
		if uint64(len(p.code))+bp.MaxSlot > size {
			p.skipped = append(p.skipped, Skip{c.name, "no scratch room left", c.res != nil})
			continue
		}
		slot := scratch + uint64(len(p.code))
		jump := c.libcall && hookNames[c.name] == hookSetjmp
		var plan bp.Plan
		err := errJump
		personality := c.libcall && exe && strings.HasSuffix(c.name, "_personality_v0")
		stops := fc != nil && fc.stops != nil && fc.stops(c)
		if stops {
			err = errValues
		} else if !jump && (p.sites == nil || !personality) {
			plan, err = cm.detour(c, body, slot, ret, entry, p.sites)
		}
		var stub uint64
		var redirects []redirect
		if errors.Is(err, errBranchInside) && p.sites != nil && fc.clones {
			if cp, cerr := cm.clone(c, body, slot, p.sites); cerr == nil && uint64(len(p.code)+len(cp.Slot)) <= size {
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
				head, herr := fast.Head(stub, addr, p.sites.Entry)
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
		e := entryPlan{c: c, addr: addr, jump: jump, personality: personality, stub: stub, redirects: redirects,
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

// firstIn names the first function whose patch or call-site redirect w
// writes.
func (p *plantPlan) firstIn(w write) string {
	in := func(at uint64) bool { return at >= w.at && at < w.at+uint64(len(w.b)) }
	for _, e := range p.entries {
		if in(e.patch) {
			return fmt.Sprintf("%s at %#x", e.c.name, e.patch)
		}
		for _, r := range e.redirects {
			if in(r.at) {
				return fmt.Sprintf("the call at %#x to %s", r.at-1, e.c.name)
			}
		}
	}
	return "the code"
}

// write is bytes to write at an address of the process.
type write struct {
	at uint64
	b  []byte
}

// coalesce merges the patches of each page into one write, the bytes
// between them taken from text: one write to /proc/PID/mem per page
// instead of one per function (sqlite3: 2,117 writes, 225 pages; a write
// costs a system call and a walk of the process's page tables). Only
// pages a patch changes are written. Overlapping patches, or bytes text
// does not hold, keep the patches as they are, in their order.
func coalesce(text textImage, patches []write) []write {
	sorted := slices.Clone(patches)
	slices.SortStableFunc(sorted, func(a, b write) int { return cmp.Compare(a.at, b.at) })
	var out []write
	for _, p := range sorted {
		n := len(out)
		if n > 0 {
			last := &out[n-1]
			end := last.at + uint64(len(last.b))
			if p.at < end {
				return patches // overlapping: the order matters
			}
			if p.at>>12 == last.at>>12 {
				gap := text.code(end, p.at-end)
				if uint64(len(gap)) == p.at-end {
					last.b = append(append(last.b, gap...), p.b...)
					continue
				}
			}
		}
		out = append(out, write{p.at, slices.Clone(p.b)})
	}
	return out
}

// commitPlan writes plan p into the process whose memory is mem and adds
// its functions and breakpoints to im. /proc/<pid>/mem writes go through
// FOLL_FORCE: they reach read-only text. The trampolines go first: a patch
// is live as soon as written. On error nothing stays patched and im is as
// it was; the caller unmaps the scratch.
//
// The patches are written a page at a time with the bytes between them
// from p.text (coalesce): nothing may write the module's text between
// scanModule's read and this commit (the hooks of a library are planted
// before its scan, its probes and the entry breakpoint after).
func (t *Tracer) commitPlan(mem io.WriterAt, im *image, p *plantPlan) error {
	if _, err := mem.WriteAt(p.code, int64(p.scratch)); err != nil {
		return fmt.Errorf("writing scratch memory for %s: %w", p.f.Path, err)
	}
	undo := func(n int) {
		for _, q := range p.entries[:n] {
			mem.WriteAt(q.orig, int64(q.patch))
			for _, r := range q.redirects {
				mem.WriteAt(r.orig[:], int64(r.at))
			}
		}
	}
	var patches []write
	for _, e := range p.entries {
		patches = append(patches, write{e.patch, e.jmp})
		for _, r := range e.redirects {
			patches = append(patches, write{r.at, r.new[:]})
		}
	}
	for _, w := range coalesce(p.text, patches) {
		if _, err := mem.WriteAt(w.b, int64(w.at)); err != nil {
			// Undo: the caller may leave this process untraced, and a jmp to
			// a trampoline's int3 would kill it. Every entry's bytes go back,
			// written or not (the same bytes over a page not written).
			undo(len(p.entries))
			return fmt.Errorf("instrumenting %s: writing %d bytes at %#x: %w", p.firstIn(w), len(w.b), w.at, err)
		}
	}
	for _, e := range p.entries {
		fi := t.newFn(p.f, e.c.name, e.addr, e.c.specValue())
		fi.jump = e.jump
		fi.res = e.c.res
		fi.personality = e.personality
		fi.stub = e.stub
		fi.redirects = e.redirects
		im.funcs = append(im.funcs, fi)
		b := e.bp
		b.Func = len(im.funcs) - 1
		im.bps.Add(&b)
	}
	im.scratch = append(im.scratch, [2]uint64{p.scratch, p.scratch + p.size})
	if p.sites != nil {
		im.fast.sites = append(im.fast.sites, *p.sites)
		im.fast.cloned = im.fast.cloned || len(p.clones) > 0
	}
	return nil
}

// fork returns the image of a forked child: a copy, since its memory is a
// copy. A library it loads or closes, and the scratch it maps, are its own.
func (im *image) fork() *image {
	c := *im
	c.bps = im.bps.Clone()
	c.funcs = slices.Clip(im.funcs)
	c.rets = slices.Clip(im.rets)
	c.probes = slices.Clone(im.probes) // their warned flags are per process
	c.scratch = slices.Clip(im.scratch)
	c.semaphores = slices.Clip(im.semaphores)
	if im.mods != nil {
		c.mods = maps.Clone(im.mods)
	}
	return &c
}

// detour plans a detour for cand c, whose code at its runtime address is
// body, with its trampoline at slot and ret as its return breakpoint. The
// error says why it gets no detour: code that does not all decode, the
// function holding the entry point (whose breakpoint must not land inside
// a jump), one too short, or something another piece of code reaches
// inside the jump (a symbol, a branch target, a USDT probe).
func (cm *codeMap) detour(c cand, body []byte, slot, ret, entry uint64, sites *fast.Sites) (bp.Plan, error) {
	addr := c.value + cm.bias
	if err := cm.undecoded[c.value]; err != nil {
		return bp.Plan{}, err
	}
	if c.size == 0 || c.size > uint64(len(body)) || entry >= addr && entry < addr+c.size {
		return bp.Plan{}, errEntryPoint
	}
	var plan bp.Plan
	var err error
	if sites != nil {
		plan, err = bp.PrepareDetourWith(body[:c.size], addr, slot, func(slot uint64) ([]byte, error) {
			return fast.Head(slot, addr, sites.Entry)
		})
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
func (cm *codeMap) clone(c cand, body []byte, slot uint64, sites *fast.Sites) (bp.Plan, error) {
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
	return bp.PrepareClone(body, addr, slot, !cm.exceptions(), func(slot uint64) ([]byte, error) {
		return fast.Head(slot, addr, sites.Entry)
	})
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

// isRet reports whether addr is one of the image's return breakpoints.
func (im *image) isRet(addr uint64) bool {
	for _, r := range im.rets {
		if r == addr {
			return true
		}
	}
	return false
}
