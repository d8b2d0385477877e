package tracer

import (
	"cmp"
	"maps"
	"math"
	"os"
	"runtime"
	"slices"
	"sync"

	"rtrace/internal/elfx"
	"rtrace/tracer/bp"
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
