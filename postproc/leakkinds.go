package postproc

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"rtrace/internal/trace"
)

// Leak kinds (docs/REPORTS.md, "Leak kinds"): a raw trace holds the
// memory scan rtrace made at its process's end (HeapRegions, HeapWords:
// tracer/heapscan.go); with the blocks still live at the end it tells,
// as memcheck's leak check does (valgrind: memcheck/mc_leakcheck.c),
// which of them the program could still reach, from its data, bss,
// stacks and registers, through pointers to their starts (still
// reachable), only through pointers into them (possibly lost), only from
// other lost blocks (indirectly lost), or not at all (definitely lost).

// LeakKind is one of memcheck's kinds of a block not freed at exit.
type LeakKind uint8

const (
	KindUnknown LeakKind = iota // no scan: the trace does not say
	KindDefinite
	KindIndirect
	KindPossible
	KindReachable
)

// kindNames are the kinds as memcheck says them, and its
// --show-leak-kinds words for them.
var kindNames = [...]struct{ text, word string }{
	KindDefinite:  {"definitely lost", "definite"},
	KindIndirect:  {"indirectly lost", "indirect"},
	KindPossible:  {"possibly lost", "possible"},
	KindReachable: {"still reachable", "reachable"},
}

func (k LeakKind) String() string {
	if k == KindUnknown || int(k) >= len(kindNames) {
		return "unknown"
	}
	return kindNames[k].text
}

// leakArg is the argument a leak's kind goes in, in the text form
// ("$leak = definitely lost"): it travels through rtrace resolve and
// later stages as sp-rtrace's function arguments do.
const leakArg = "leak"

// ParseLeakKinds reads memcheck's --show-leak-kinds set: a comma list of
// definite, indirect, possible, reachable, or all, or none. It returns
// the kinds shown as a bit set (1 << kind).
func ParseLeakKinds(s string) (uint8, error) {
	switch s {
	case "all":
		return allKinds, nil
	case "none":
		return 0, nil
	}
	var set uint8
	for _, w := range strings.Split(s, ",") {
		k := kindByWord(strings.TrimSpace(w))
		if k == KindUnknown {
			return 0, fmt.Errorf("%q: want all, none, or a comma list of definite, indirect, possible, reachable", w)
		}
		set |= 1 << k
	}
	return set, nil
}

// allKinds is every kind, and the blocks of unknown kind.
const allKinds = 1<<KindUnknown | 1<<KindDefinite | 1<<KindIndirect | 1<<KindPossible | 1<<KindReachable

func kindByWord(w string) LeakKind {
	for k, n := range kindNames {
		if n.word != "" && n.word == w {
			return LeakKind(k)
		}
	}
	return KindUnknown
}

// kindOf reads the kind a call's leak argument names (KindUnknown: none).
func kindOf(c *trace.Call) LeakKind {
	for _, a := range c.Args {
		if a.Name == leakArg {
			for k, n := range kindNames {
				if n.text != "" && n.text == a.Value {
					return LeakKind(k)
				}
			}
		}
	}
	return KindUnknown
}

// setKind names k in c's leak argument.
func setKind(c *trace.Call, k LeakKind) {
	for i, a := range c.Args {
		if a.Name == leakArg {
			c.Args[i].Value = k.String()
			return
		}
	}
	c.Args = append(c.Args, trace.Arg{Name: leakArg, Value: k.String()})
}

// heapScan is a process's memory scan as read.
type heapScan struct {
	regions []trace.HeapRegion
	words   []trace.HeapWord
}

// take adds a scan item of process pid (0: any) to s; items of another
// process are left out (a trace file is one process's).
func (s *heapScan) take(it trace.Item, pid int) {
	switch v := it.(type) {
	case *trace.HeapRegions:
		if pid == 0 || v.Pid == pid {
			// A new scan (a process scanned again) replaces the last.
			s.regions, s.words = append([]trace.HeapRegion(nil), v.Regions...), nil
		}
	case *trace.HeapWords:
		if (pid == 0 || v.Pid == pid) && s.regions != nil {
			s.words = append(s.words, v.Words...)
		}
	}
}

// scanBlock is a live block in the classification.
type scanBlock struct {
	start, size uint64
	kind        LeakKind
	// lo, hi: its words, vals[lo:hi] (words inside a block are one run
	// in address order); more: those of a run that came apart (blocks
	// that overlap: a corrupt trace).
	lo, hi int
	more   []uint64
}

// classify gives each of blocks (the memory blocks live at the end, as
// their allocations) its kind from scan, memcheck's way, in blocks'
// order. The blocks of an address another, newer, allocation took over
// (a release the trace lost) stay unknown. allocs are the addresses of
// every memory block the trace allocated: an anonymous mapping with one
// in it is a heap's.
func classify(blocks []*trace.Call, scan *heapScan, allocs []uint64) []LeakKind {
	out := make([]LeakKind, len(blocks))
	if scan == nil || scan.regions == nil {
		return out
	}
	// The blocks by address; of two at one address, the newer.
	order := make([]int, len(blocks))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(blocks[a].ID, blocks[b].ID) })
	var bs []scanBlock
	var idx []int // the block of bs[i] in blocks
	for i, j := range order {
		if i+1 < len(order) && blocks[order[i+1]].ID == blocks[j].ID {
			continue // taken over by the next
		}
		bs = append(bs, scanBlock{start: blocks[j].ID, size: blocks[j].Size})
		idx = append(idx, j)
	}
	find := func(v uint64) int {
		i, _ := slices.BinarySearchFunc(bs, v+1, func(b scanBlock, t uint64) int {
			if b.start < t {
				return -1
			}
			return 1
		})
		i-- // the last block starting at or below v
		if i < 0 {
			return -1
		}
		b := &bs[i]
		if v == b.start || v-b.start < b.size {
			return i
		}
		return -1
	}
	// Which regions' words are roots: all but the heaps' (the brk heap,
	// and the anonymous mappings a block of the trace is in), whose words
	// count only inside live blocks.
	slices.Sort(allocs)
	heapish := make([]bool, len(scan.regions))
	for i, r := range scan.regions {
		switch r.Kind {
		case trace.RegionHeap:
			heapish[i] = true
		case trace.RegionAnon, trace.RegionStack:
			// A stack pointer of a thread gone long ago may lie in what
			// is an arena now: a mapping with a block of the trace is a
			// heap's, whatever the tracer took it for.
			j, _ := slices.BinarySearch(allocs, r.Start)
			heapish[i] = j < len(allocs) && allocs[j] < r.End
		}
	}
	var roots, vals []uint64
	ri := 0
	for _, w := range scan.words {
		if w.At == 0 {
			roots = append(roots, w.Val) // a register
			continue
		}
		for ri < len(scan.regions) && scan.regions[ri].End <= w.At {
			ri++
		}
		// Regions and words both go up; a word outside every region
		// (a corrupt scan) is left out.
		if ri == len(scan.regions) || w.At < scan.regions[ri].Start {
			continue
		}
		if !heapish[ri] {
			roots = append(roots, w.Val)
		} else if b := find(w.At); b >= 0 {
			blk := &bs[b]
			switch {
			case blk.hi == 0:
				blk.lo, blk.hi = len(vals), len(vals)+1
				vals = append(vals, w.Val)
			case blk.hi == len(vals):
				blk.hi++
				vals = append(vals, w.Val)
			default:
				blk.more = append(blk.more, w.Val)
			}
		}
	}
	// Reachable from the roots: through start pointers from reachable
	// places (still reachable), else possibly (lc_push_without_clique_if_a_chunk_ptr).
	var stack []int
	push := func(v uint64, definite bool) {
		b := find(v)
		if b < 0 || bs[b].kind == KindReachable || v == nextChunk(&bs[b]) {
			return
		}
		if v == bs[b].start && definite {
			bs[b].kind = KindReachable
			stack = append(stack, b)
		} else if bs[b].kind == KindUnknown {
			bs[b].kind = KindPossible
			stack = append(stack, b)
		}
	}
	mark := func() {
		for len(stack) > 0 {
			b := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			definite := bs[b].kind == KindReachable
			for _, v := range vals[bs[b].lo:bs[b].hi] {
				push(v, definite)
			}
			for _, v := range bs[b].more {
				push(v, definite)
			}
		}
	}
	for _, v := range roots {
		push(v, true)
		mark()
	}
	// The rest are lost: each not yet in a clique leads one, in address
	// order, and what it reaches that no clique holds is indirectly lost
	// (a leader reached later too: lc_push_with_clique_if_a_chunk_ptr).
	for i := range bs {
		if bs[i].kind != KindUnknown {
			continue
		}
		stack = append(stack[:0], i)
		for len(stack) > 0 {
			b := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, v := range slices.Concat(vals[bs[b].lo:bs[b].hi], bs[b].more) {
				c := find(v)
				if c < 0 || c == i || bs[c].kind != KindUnknown || v == nextChunk(&bs[c]) {
					continue
				}
				bs[c].kind = KindIndirect
				stack = append(stack, c)
			}
		}
	}
	for i := range bs {
		k := bs[i].kind
		if k == KindUnknown {
			k = KindDefinite
		}
		out[idx[i]] = k
	}
	return out
}

// nextChunk is where glibc's malloc puts the header of the chunk after
// block b's (malloc/malloc.c: a chunk of a request of n bytes takes
// max(32, n+8 rounded up to 16) from 16 bytes before the block): the last
// 8 bytes of a request of 8 mod 16 bytes are that header's first word, and
// glibc's own pointers at the next chunk (its arena's top, its bins)
// point there. An interior pointer there is glibc's, not the program's:
// it neither makes a block possibly lost nor takes it into a clique.
func nextChunk(b *scanBlock) uint64 {
	return b.start - 16 + max(32, (b.size+8+15)&^15)
}

// kindTotals counts blocks and bytes by kind.
type kindTotals [len(kindNames)]total

// lines are memcheck's LEAK SUMMARY lines of t ("definitely lost: 90
// bytes in 4 blocks"), and its suppressed line.
func (t *kindTotals) lines(sup *suppressed) []string {
	var out []string
	for _, k := range []LeakKind{KindDefinite, KindIndirect, KindPossible, KindReachable} {
		out = append(out, fmt.Sprintf("%s: %s bytes in %s blocks", k, commas(t[k].size), commas(t[k].n)))
	}
	return append(out, fmt.Sprintf("suppressed: %s bytes in %s blocks", commas(sup.bytes), commas(sup.blocks)))
}
