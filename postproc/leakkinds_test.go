package postproc

import (
	"encoding/binary"
	"slices"
	"testing"

	"rtrace/internal/trace"
)

// A synthetic heap at 0x10000 (the brk heap), data at 0x1000 (roots) and
// an anonymous mapping at 0x20000 with no block in it (roots too) or with
// one (a heap's: its words count inside blocks only).
func TestClassify(t *testing.T) {
	blk := func(addr, size uint64) *trace.Call {
		return &trace.Call{Alloc: true, ID: addr, Size: size}
	}
	regions := []trace.HeapRegion{
		{Start: 0x1000, End: 0x2000, Kind: trace.RegionRoot},
		{Start: 0x10000, End: 0x18000, Kind: trace.RegionHeap},
		{Start: 0x20000, End: 0x21000, Kind: trace.RegionAnon},
		{Start: 0x7f000, End: 0x80000, Kind: trace.RegionStack},
	}
	a, b, c, d := blk(0x10010, 32), blk(0x10040, 32), blk(0x10070, 40), blk(0x100b0, 16)
	for _, tc := range []struct {
		name   string
		blocks []*trace.Call
		words  []trace.HeapWord
		allocs []uint64
		want   []LeakKind // of blocks
	}{
		{"no pointers", []*trace.Call{a, b}, nil, nil, []LeakKind{KindDefinite, KindDefinite}},
		{"a global at a, a at b", []*trace.Call{a, b},
			[]trace.HeapWord{{At: 0x1008, Val: a.ID}, {At: a.ID + 8, Val: b.ID}}, nil, []LeakKind{KindReachable, KindReachable}},
		{"a register and the stack", []*trace.Call{a, b},
			[]trace.HeapWord{{At: 0, Val: a.ID}, {At: 0x7f010, Val: b.ID}}, nil, []LeakKind{KindReachable, KindReachable}},
		{"an interior pointer: possibly, and what it holds", []*trace.Call{a, b},
			[]trace.HeapWord{{At: 0x1008, Val: a.ID + 4}, {At: a.ID, Val: b.ID}}, nil, []LeakKind{KindPossible, KindPossible}},
		{"possibly, then a start pointer from a reachable block", []*trace.Call{a, b, c},
			[]trace.HeapWord{{At: 0x1000, Val: b.ID + 8}, {At: 0x1008, Val: a.ID}, {At: a.ID, Val: b.ID}, {At: b.ID, Val: c.ID}}, nil,
			[]LeakKind{KindReachable, KindReachable, KindReachable}},
		{"a lost list: its head definitely, the rest indirectly", []*trace.Call{a, b, c},
			[]trace.HeapWord{{At: a.ID, Val: b.ID}, {At: b.ID, Val: c.ID}}, nil, []LeakKind{KindDefinite, KindIndirect, KindIndirect}},
		{"a list led from its end up: an earlier leader taken in", []*trace.Call{a, b, c},
			[]trace.HeapWord{{At: b.ID, Val: a.ID}, {At: c.ID, Val: b.ID + 3}}, nil, []LeakKind{KindIndirect, KindIndirect, KindDefinite}},
		{"a cycle: one definitely, one indirectly", []*trace.Call{a, b},
			[]trace.HeapWord{{At: a.ID, Val: b.ID}, {At: b.ID, Val: a.ID}}, nil, []LeakKind{KindDefinite, KindIndirect}},
		{"a word in freed heap memory is no root", []*trace.Call{a},
			[]trace.HeapWord{{At: 0x10100, Val: a.ID}}, nil, []LeakKind{KindDefinite}},
		{"an anonymous mapping without blocks holds roots", []*trace.Call{a},
			[]trace.HeapWord{{At: 0x20010, Val: a.ID}}, nil, []LeakKind{KindReachable}},
		{"one with a block of the trace is a heap's", []*trace.Call{a},
			[]trace.HeapWord{{At: 0x20010, Val: a.ID}}, []uint64{0x20800}, []LeakKind{KindDefinite}},
		{"a stack a block of the trace is in is a heap's (an old stack pointer)", []*trace.Call{a},
			[]trace.HeapWord{{At: 0x7f010, Val: a.ID}}, []uint64{0x7f800}, []LeakKind{KindDefinite}},
		{"glibc's pointer at the next chunk is not the program's", []*trace.Call{c},
			[]trace.HeapWord{{At: 0x1000, Val: c.ID + 32}}, nil, []LeakKind{KindDefinite}},
		{"a zero-size block: its start only", []*trace.Call{blk(0x10200, 0), d},
			[]trace.HeapWord{{At: 0x1000, Val: 0x10200}, {At: 0x1008, Val: d.ID + 16}}, nil, []LeakKind{KindReachable, KindDefinite}},
		{"of two allocations at one address, the newer", []*trace.Call{blk(0x10010, 8), a},
			[]trace.HeapWord{{At: 0x1000, Val: a.ID + 16}}, nil, []LeakKind{KindUnknown, KindPossible}},
	} {
		got := classify(tc.blocks, &heapScan{regions: regions, words: tc.words}, tc.allocs)
		for i, c := range tc.blocks {
			if got[i] != tc.want[i] {
				t.Errorf("%s: block %d (%#x): %v, want %v", tc.name, i, c.ID, got[i], tc.want[i])
			}
		}
	}
	if got := classify([]*trace.Call{a}, nil, nil); len(got) != 1 || got[0] != KindUnknown {
		t.Errorf("no scan: kinds %v, want unknown", got)
	}
}

func TestParseLeakKinds(t *testing.T) {
	for s, want := range map[string]uint8{"all": allKinds, "none": 0, "definite": 1 << KindDefinite,
		"definite,indirect": 1<<KindDefinite | 1<<KindIndirect, "reachable, possible": 1<<KindReachable | 1<<KindPossible} {
		if got, err := ParseLeakKinds(s); err != nil || got != want {
			t.Errorf("%q: %b, %v; want %b", s, got, err, want)
		}
	}
	for _, s := range []string{"", "lost", "definite,", "unknown"} {
		if _, err := ParseLeakKinds(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

// FuzzClassify: any blocks and scan classify without a panic, every
// block gets a kind, and one a root points at the start of is reachable.
func FuzzClassify(f *testing.F) {
	f.Add([]byte{0x10, 0, 0x20, 1, 0x30, 0x18, 0, 0}, []byte{0, 0x10, 0x40, 0x18})
	f.Add([]byte{}, []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, blocks, words []byte) {
		regions := []trace.HeapRegion{{Start: 0x0, End: 0x100, Kind: trace.RegionRoot}, {Start: 0x100, End: 0x400, Kind: trace.RegionHeap},
			{Start: 0x400, End: 0x500, Kind: trace.RegionAnon}}
		var bs []*trace.Call
		for i := 0; i+1 < len(blocks); i += 2 {
			bs = append(bs, &trace.Call{Alloc: true, ID: 0x100 + uint64(blocks[i])*2, Size: uint64(blocks[i+1])})
		}
		var ws []trace.HeapWord
		at := uint64(0)
		for i := 0; i+1 < len(words); i += 2 {
			at += uint64(words[i]) * 8
			ws = append(ws, trace.HeapWord{At: at, Val: 0x100 + uint64(words[i+1])*2})
		}
		got := classify(bs, &heapScan{regions: regions, words: ws}, []uint64{binary.LittleEndian.Uint64(append(words, make([]byte, 8)...)) % 0x600})
		newest := map[uint64]*trace.Call{}
		for _, c := range bs {
			newest[c.ID] = c
		}
		for i, c := range bs {
			if k := got[i]; (newest[c.ID] == c) != (k != KindUnknown) {
				t.Fatalf("block %#x: kind %v", c.ID, k)
			}
		}
		for _, w := range ws {
			if w.At > 0 && w.At < 0x100 {
				if c := newest[w.Val]; c != nil && got[slices.Index(bs, c)] != KindReachable {
					t.Fatalf("block %#x: a root at %#x points at its start, kind %v", c.ID, w.At, got[slices.Index(bs, c)])
				}
			}
		}
	})
}
