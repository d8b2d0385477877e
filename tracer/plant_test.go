package tracer

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"rtrace/internal/elfx"
	"rtrace/internal/testutil"
	"rtrace/tracer/bp"
	"rtrace/tracer/fast"
)

// The module of the plan tests: code at link-time [0x1000, 0x1200), loaded
// at bias, scratch mapped below it.
const (
	testBias    = 0x1000000
	testScratch = 0xf00000
)

// push %rbp; mov %rsp,%rbp; mov %edi,-4(%rbp); pop %rbp; ret: a detour
// displaces its first three instructions (7 bytes).
var o0 = []byte{0x55, 0x48, 0x89, 0xe5, 0x89, 0x7d, 0xfc, 0x5d, 0xc3}

// testCodeMap is a module whose code holds bodies at their link-time
// addresses (nops elsewhere).
func testCodeMap(bodies map[uint64][]byte) *codeMap {
	text := bytes.Repeat([]byte{0x90}, 0x200)
	for a, b := range bodies {
		copy(text[a-0x1000:], b)
	}
	f := &elfx.File{Path: "/bin/prog", Loads: []elfx.Load{{Vaddr: 0x1000, Memsz: 0x200, Filesz: 0x200, Exec: true}}}
	cm := &codeMap{f: f, bias: testBias,
		text: textImage{{start: 0x1000 + testBias, data: text}},
		// A symbol starts 2 bytes into "symbol_inside", a loop of
		// "branch_inside" jumps 3 bytes in, a probe sits at "probe_inside".
		starts:    []uint64{0x1000, 0x1020, 0x1040, 0x1042, 0x1060, 0x1080, 0x10a0, 0x10c0, 0x11f8},
		probes:    []uint64{testBias + 0x1080},
		undecoded: map[uint64]error{0x10c0: errors.New("cannot decode")},
	}
	cm.targets = newLandings(cm.text)
	cm.targets.add(testBias + 0x1063)
	return cm
}

func TestPlanFuncs(t *testing.T) {
	cm := testCodeMap(map[uint64][]byte{
		0x1000: o0,
		0x1020: append([]byte{0xf3, 0x0f, 0x1e, 0xfa}, o0...), // endbr64 first
		0x1040: o0, 0x1060: o0, 0x1080: o0, 0x10a0: o0, 0x10c0: o0,
		0x10e0: {0xff, 0x25, 0x1a, 0x2f, 0, 0}, // jmp *0x2f1a(%rip): a PLT stub
		0x1100: {0xcc, 0x90},                   // already an int3
		0x1120: o0,
		0x11f8: {0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3, 0x90, 0x90}, // 8 bytes before the end of the text
	})
	cands := []cand{
		{name: "plain", value: 0x1000, size: 9},
		{name: "endbr", value: 0x1020, size: 13},
		{name: "symbol_inside", value: 0x1040, size: 9},
		{name: "branch_inside", value: 0x1060, size: 9},
		{name: "probe_inside", value: 0x1080, size: 9},
		{name: "holds_entry", value: 0x10a0, size: 9},
		{name: "undecoded", value: 0x10c0, size: 9},
		{name: "_setjmp", value: 0x10e0, size: 16, libcall: true},
		{name: "taken", value: 0x1100, size: 0},
		{name: "__gxx_personality_v0", value: 0x1120, size: 9, libcall: true},
		{name: "gone", value: 0x9000, size: 16},
		{name: "tail", value: 0x11f8, size: 8},
	}
	const entry = testBias + 0x10a4
	p := planFuncs(cm, cands, testScratch, 0x10000, entry, true, nil)

	type want struct {
		action     bp.Action
		patch      uint64 // link-time
		slot       string // OutOfLine: disassembly of the slot
		jump, pers bool
	}
	wants := map[string]want{
		"plain":         {action: bp.Detoured, patch: 0x1000},
		"endbr":         {action: bp.Detoured, patch: 0x1024},
		"symbol_inside": {action: bp.OutOfLine, patch: 0x1040, slot: "push %rbp; jmpq T0x1001041"},
		"branch_inside": {action: bp.OutOfLine, patch: 0x1060, slot: "push %rbp; jmpq T0x1001061"},
		"probe_inside":  {action: bp.OutOfLine, patch: 0x1080, slot: "push %rbp; jmpq T0x1001081"},
		"holds_entry":   {action: bp.OutOfLine, patch: 0x10a0, slot: "push %rbp; jmpq T0x10010a1"},
		"undecoded":     {action: bp.OutOfLine, patch: 0x10c0, slot: "push %rbp; jmpq T0x10010c1"},
		// setjmp is never detoured: an int3, and no int3 entry reported.
		"_setjmp":              {action: bp.OutOfLine, patch: 0x10e0, slot: "jmpq *T0x1004000; jmpq T0x10010e6", jump: true},
		"__gxx_personality_v0": {action: bp.Detoured, patch: 0x1120, pers: true},
		"tail":                 {action: bp.Detoured, patch: 0x11f8},
	}
	var got []string
	lastSlot := uint64(testScratch)
	for _, e := range p.entries {
		got = append(got, e.c.name)
		w, ok := wants[e.c.name]
		if !ok {
			t.Errorf("%s planted", e.c.name)
			continue
		}
		b := e.bp
		if b.Plan.Action != w.action || e.patch != w.patch+testBias || e.addr != e.c.value+testBias || e.jump != w.jump || e.personality != w.pers {
			t.Errorf("%s: action %d patch %#x addr %#x jump %v personality %v, want %d %#x %#x %v %v",
				e.c.name, b.Plan.Action, e.patch, e.addr, e.jump, e.personality, w.action, w.patch+testBias, e.c.value+testBias, w.jump, w.pers)
			continue
		}
		if b.Kind != bp.FuncEntry || b.Orig != cm.text.code(e.addr, 1)[0] {
			t.Errorf("%s: kind %d orig %#x", e.c.name, b.Kind, b.Orig)
		}
		// Where its slot is in the scratch, and that the scratch holds it.
		var slot uint64
		switch w.action {
		case bp.Detoured:
			slot = b.Plan.Trap - (bp.DetourHeadLen - 1)
			if b.Addr != b.Plan.Trap {
				t.Errorf("%s: breakpoint at %#x, want the trap %#x", e.c.name, b.Addr, b.Plan.Trap)
			}
			if got, want := testutil.Disasm(t, e.jmp, e.patch), fmt.Sprintf("jmpq T%#x", slot); got != want {
				t.Errorf("%s: patch %s, want %s", e.c.name, got, want)
			}
			if !bytes.Equal(e.orig, cm.text.code(e.patch, 5)) {
				t.Errorf("%s: orig % x", e.c.name, e.orig)
			}
			// The trampoline swaps the return address for the return
			// breakpoint: the first byte of the scratch.
			if tr := testutil.Disasm(t, b.Plan.Slot, slot); !strings.Contains(tr, fmt.Sprintf("lea T%#x,%%r11", testScratch)) {
				t.Errorf("%s: trampoline %s does not return to the scratch's first byte", e.c.name, tr)
			}
		default:
			slot = b.Plan.Resume
			if b.Addr != e.addr || !bytes.Equal(e.jmp, []byte{bp.Int3}) || !bytes.Equal(e.orig, cm.text.code(e.addr, 1)) {
				t.Errorf("%s: breakpoint at %#x, patch % x over % x", e.c.name, b.Addr, e.jmp, e.orig)
			}
			if got := testutil.Disasm(t, b.Plan.Slot, slot); got != w.slot {
				t.Errorf("%s: slot %s, want %s", e.c.name, got, w.slot)
			}
		}
		if slot%16 != 0 || slot <= lastSlot {
			t.Errorf("%s: slot at %#x after %#x", e.c.name, slot, lastSlot)
		}
		lastSlot = slot
		if off := slot - testScratch; !bytes.Equal(p.code[off:off+uint64(len(b.Plan.Slot))], b.Plan.Slot) {
			t.Errorf("%s: the scratch does not hold its slot", e.c.name)
		}
	}
	if want := "plain endbr symbol_inside branch_inside probe_inside holds_entry undecoded _setjmp __gxx_personality_v0 tail"; strings.Join(got, " ") != want {
		t.Errorf("planted %s\nwant    %s", strings.Join(got, " "), want)
	}
	// The return breakpoint, then the slots.
	if !bytes.Equal(p.code[:16], []byte{bp.Int3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}) || len(p.code)%16 != 0 {
		t.Errorf("scratch starts % x, %d bytes", p.code[:16], len(p.code))
	}
	if p.end() != testScratch+uint64(len(p.code)) {
		t.Errorf("end %#x, scratch %#x+%d", p.end(), testScratch, len(p.code))
	}
	wantInt3s := []Skip{
		{"symbol_inside", errSymbolInside.Error(), false},
		{"branch_inside", errBranchInside.Error(), false},
		{"probe_inside", errProbeInside.Error(), false},
		{"holds_entry", errEntryPoint.Error(), false},
		{"undecoded", "cannot decode", false},
	}
	if fmt.Sprint(p.int3s) != fmt.Sprint(wantInt3s) {
		t.Errorf("int3s %v\nwant  %v", p.int3s, wantInt3s)
	}
	if len(p.skipped) != 2 || p.skipped[0].Func != "taken" || !strings.Contains(p.skipped[0].Reason, "an int3 is there already") ||
		p.skipped[1] != (Skip{"gone", "no code at 0x1009000", false}) {
		t.Errorf("skipped %+v", p.skipped)
	}
	// The personality flag is the executable's own stubs'.
	if p := planFuncs(cm, cands[9:10], testScratch, 0x10000, entry, false, nil); len(p.entries) != 1 || p.entries[0].personality {
		t.Errorf("a library's personality stub: %+v", p.entries)
	}
}

func TestPlanFuncsFull(t *testing.T) {
	cm := testCodeMap(map[uint64][]byte{0x1000: o0, 0x1020: o0, 0x1040: {0xc3}})
	// b is a resource module's function: its skip says so (a warning
	// names it).
	cands := []cand{{name: "a", value: 0x1000, size: 9}, {name: "b", value: 0x1020, size: 9, res: &resFn{rf: &resModules[0].Funcs[0]}}}
	// Room for the return breakpoint and one slot only.
	p := planFuncs(cm, cands, testScratch, 16+bp.MaxSlot+fast.DescSize, 0, true, nil)
	if len(p.entries) != 1 || p.entries[0].c.name != "a" || fmt.Sprint(p.skipped) != fmt.Sprint([]Skip{{"b", "no scratch room left", true}}) {
		t.Errorf("entries %d, skipped %v", len(p.entries), p.skipped)
	}
	if p := planFuncs(cm, nil, testScratch, 0x1000, 0, true, nil); len(p.code) != 16 || p.end() != testScratch+16 {
		t.Errorf("empty plan: %d bytes of code", len(p.code))
	}
}

// fakeMem is a process's memory: a sparse byte map whose write over
// failAt fails.
type fakeMem struct {
	b      map[uint64]byte
	failAt uint64
}

func (m *fakeMem) WriteAt(p []byte, off int64) (int, error) {
	if m.failAt >= uint64(off) && m.failAt < uint64(off)+uint64(len(p)) {
		return 0, errors.New("EIO")
	}
	for i, c := range p {
		m.b[uint64(off)+uint64(i)] = c
	}
	return len(p), nil
}

func (m *fakeMem) read(addr uint64, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = m.b[addr+uint64(i)]
	}
	return out
}

func TestCommitPlan(t *testing.T) {
	cm := testCodeMap(map[uint64][]byte{0x1000: o0, 0x1020: o0})
	cm.targets = newLandings(cm.text)
	cm.targets.add(testBias + 0x1022) // "b" gets an int3
	cands := []cand{{name: "a", value: 0x1000, size: 9}, {name: "b", value: 0x1020, size: 9}}
	plan := func() *plantPlan { return planFuncs(cm, cands, testScratch, 0x1000, 0, true, nil) }
	// The process's text as it was.
	text := func() *fakeMem {
		m := &fakeMem{b: map[uint64]byte{}}
		for i, c := range cm.text[0].data {
			m.b[cm.text[0].start+uint64(i)] = c
		}
		return m
	}

	tr := &Tracer{}
	im := &image{bps: bp.NewTable(), funcs: []fn{{name: "earlier"}}}
	m, p := text(), plan()
	if err := tr.commitPlan(m, im, p); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.read(testScratch, len(p.code)), p.code) {
		t.Error("scratch not written")
	}
	a, b := p.entries[0], p.entries[1]
	if a.bp.Plan.Action != bp.Detoured || b.bp.Plan.Action != bp.OutOfLine {
		t.Fatalf("plan: %d %d", a.bp.Plan.Action, b.bp.Plan.Action)
	}
	if !bytes.Equal(m.read(a.patch, 5), a.jmp) || m.read(b.patch, 1)[0] != bp.Int3 {
		t.Errorf("entries: % x, % x", m.read(a.patch, 5), m.read(b.patch, 1))
	}
	if len(im.funcs) != 3 || im.funcs[1].name != "a" || im.funcs[1].addr != testBias+0x1000 || im.funcs[2].name != "b" {
		t.Errorf("funcs %+v", im.funcs)
	}
	// Breakpoints are found where the thread stops: the trap of a detour,
	// the entry of an int3.
	if x := im.bps.At(a.bp.Plan.Trap); x == nil || x.Func != 1 {
		t.Errorf("a's breakpoint: %+v", x)
	}
	if x := im.bps.At(testBias + 0x1020); x == nil || x.Func != 2 || x.Orig != 0x55 {
		t.Errorf("b's breakpoint: %+v", x)
	}
	if im.bps.Len() != 2 || fmt.Sprint(im.scratch) != fmt.Sprint([][2]uint64{{testScratch, testScratch + 0x1000}}) {
		t.Errorf("%d breakpoints, scratch %#x", im.bps.Len(), im.scratch)
	}

	// A failed write of b's int3 puts a's bytes back and leaves im alone.
	for _, failAt := range []uint64{testBias + 0x1020, testScratch} {
		im := &image{bps: bp.NewTable()}
		m := text()
		m.failAt = failAt
		before := m.read(testBias+0x1000, 0x40)
		err := tr.commitPlan(m, im, plan())
		if err == nil {
			t.Fatalf("failing at %#x: no error", failAt)
		}
		if !bytes.Equal(m.read(testBias+0x1000, 0x40), before) {
			t.Errorf("failing at %#x: text left patched: % x", failAt, m.read(testBias+0x1000, 0x40))
		}
		if len(im.funcs) != 0 || im.bps.Len() != 0 || len(im.scratch) != 0 {
			t.Errorf("failing at %#x: image changed: %d funcs, %d breakpoints", failAt, len(im.funcs), im.bps.Len())
		}
	}
}

func TestScratchSize(t *testing.T) {
	// The return breakpoint's 16 bytes, the fast engine's code, then slots
	// (each with room for a descriptor), in whole pages.
	code := (16 + fast.CodeSize + 4095) &^ 4095 // the pages the code starts
	fit := int(code-16-fast.CodeSize) / (bp.MaxSlot + fast.DescSize)
	cases := []struct {
		slots int
		want  uint64
	}{
		{0, code},
		{1, (16 + fast.CodeSize + bp.MaxSlot + fast.DescSize + 4095) &^ 4095},
		{fit, code},
		{fit + 1, code + 4096},
		{hookSlots, (16 + fast.CodeSize + hookSlots*(bp.MaxSlot+fast.DescSize) + 4095) &^ 4095},
	}
	for _, c := range cases {
		if got := scratchSize(c.slots); got != c.want {
			t.Errorf("scratchSize(%d) = %d, want %d", c.slots, got, c.want)
		}
	}
	// A scratch of that size holds the slots of that many functions,
	// whatever their plan.
	bodies := map[uint64][]byte{}
	var cands []cand
	for i := range 24 {
		a := 0x1000 + uint64(i)*16
		// call +0x100: the largest relocation (a call becomes a push of
		// its return address and a jmp).
		bodies[a] = []byte{0xe8, 0, 1, 0, 0, 0xc3}
		cands = append(cands, cand{name: fmt.Sprint("f", i), value: a, size: 6})
	}
	cm := testCodeMap(bodies)
	cm.starts, cm.probes = nil, nil
	for _, entry := range []uint64{0, testBias + 0x1000} {
		p := planFuncs(cm, cands, testScratch, scratchSize(len(cands)), entry, true, nil)
		if len(p.entries) != len(cands) || len(p.skipped) != 0 || uint64(len(p.code)) > scratchSize(len(cands)) {
			t.Errorf("entry %#x: %d planted, skipped %v, %d bytes", entry, len(p.entries), p.skipped, len(p.code))
		}
	}
}

// The scratch goes below the module, further down, above past the heap's
// room, then anywhere; never below 64 KiB (mmap_min_addr).
func TestScratchPlaces(t *testing.T) {
	got := scratchPlaces(0x400000, 0x500000, 0x400000) // a big non-PIE program: no room below
	want := []uint64{0x4500000, 0x8500000, 0xc500000, 0x10500000, 0}
	if !slices.Equal(got, want) {
		t.Errorf("non-PIE: %#x, want %#x", got, want)
	}
	got = scratchPlaces(0x555555554000, 0x555555560000, 0x3000)
	if len(got) != 9 || got[0] != 0x555555451000 || got[1] != got[0]-1<<24 || got[8] != 0 {
		t.Errorf("PIE: %#x", got)
	}
	for _, p := range got[:8] {
		if d := int64(p) - int64(0x555555554000); d < -1<<31 || d > 1<<31 {
			t.Errorf("%#x is out of rel32 reach of the module", p)
		}
	}
}

func TestScratchHint(t *testing.T) {
	cases := []struct {
		lo, size, want uint64
	}{
		{0x555555554000, 0x3000, 0x555555451000},
		{0x400000, 0x2000, 0x2fe000},
		{0x401234, 0x1000, 0x300000}, // page-aligned
		{0x10000, 0x1000, 0},         // no room below: anywhere
		{0x100000, 0x1000, 0},
	}
	for _, c := range cases {
		if got := scratchHint(c.lo, c.size); got != c.want {
			t.Errorf("scratchHint(%#x, %#x) = %#x, want %#x", c.lo, c.size, got, c.want)
		}
	}
}

// With the fast engine, the scratch starts with the return breakpoint, the
// syscall gadget and the shared code; a detoured function's trampoline is
// its stub (fast.Head, then the displaced instructions and the jump back);
// a function left with an int3 gets a stub that goes on where the int3's
// plan resumes; the personality routine and setjmp keep an int3 (the
// tracer decides at each call).
func TestPlanFuncsFast(t *testing.T) {
	cm := testCodeMap(map[uint64][]byte{
		0x1000: o0,
		0x1040: o0,
		0x10e0: {0xff, 0x25, 0x1a, 0x2f, 0, 0},
		0x1120: o0,
	})
	cands := []cand{
		{name: "plain", value: 0x1000, size: 9},
		{name: "symbol_inside", value: 0x1040, size: 9},
		{name: "_setjmp", value: 0x10e0, size: 16, libcall: true},
		{name: "__gxx_personality_v0", value: 0x1120, size: 9, libcall: true},
	}
	// Two direct calls of symbol_inside: one in free code, one where the
	// detour of plain goes (displaced with plain's first bytes instead).
	copy(cm.text[0].data[0x180:], []byte{0xe8, 0xbb, 0xfe, 0xff, 0xff})
	cm.callers = []bp.Site{{At: testBias + 0x1001, Target: testBias + 0x1040}, {At: testBias + 0x1180, Target: testBias + 0x1040}}
	p := planFuncs(cm, cands, testScratch, 0x10000, 0, true, &fastCode{table: 0x7f0000000000})
	if p.sites == nil || p.sites.Base != testScratch+16 {
		t.Fatalf("sites %+v", p.sites)
	}
	if !bytes.Equal(p.code[16:16+fast.CodeSize], fast.Code(0x7f0000000000, 0, false)) {
		t.Error("the shared code is not at the scratch's start")
	}
	entry := fmt.Sprintf("callq T%#x", p.sites.Entry)
	for _, e := range p.entries {
		off := int(e.stub - testScratch)
		switch e.c.name {
		case "plain":
			if e.bp.Plan.Action != bp.Detoured || e.stub == 0 || e.bp.Addr != e.stub {
				t.Errorf("plain: %+v stub %#x", e.bp.Plan, e.stub)
				continue
			}
			want := "mov %rax,-0x10(%rsp); lea T0x1001000,%rax; " + entry + "; mov -0x10(%rsp),%rax; movq $0x0,-0x8(%rsp); push %rbp; mov %rsp,%rbp; mov %edi,-0x4(%rbp); jmpq T0x1001007"
			if got := testutil.Disasm(t, p.code[off:off+len(e.bp.Plan.Slot)], e.stub); got != want {
				t.Errorf("plain's stub:\n%s\nwant\n%s", got, want)
			}
			if got := testutil.Disasm(t, e.jmp, e.patch); got != fmt.Sprintf("jmpq T%#x", e.stub) {
				t.Errorf("plain's entry: %s", got)
			}
		case "symbol_inside":
			if e.bp.Plan.Action != bp.OutOfLine || e.stub == 0 || e.stub == e.bp.Plan.Resume {
				t.Errorf("symbol_inside: %+v stub %#x", e.bp.Plan, e.stub)
				continue
			}
			want := "mov %rax,-0x10(%rsp); lea T0x1001040,%rax; " + entry + fmt.Sprintf("; mov -0x10(%%rsp),%%rax; movq $0x0,-0x8(%%rsp); jmpq T%#x", e.bp.Plan.Resume)
			if got := testutil.Disasm(t, p.code[off:off+fast.HeadLen+5], e.stub); got != want {
				t.Errorf("symbol_inside's stub:\n%s\nwant\n%s", got, want)
			}
			if len(e.redirects) != 1 || e.redirects[0].at != testBias+0x1181 {
				t.Fatalf("symbol_inside's call sites rewritten: %+v, want the one at +0x1180 only", e.redirects)
			}
			call := append([]byte{0xe8}, e.redirects[0].new[:]...)
			if got := testutil.Disasm(t, call, testBias+0x1180); got != fmt.Sprintf("callq T%#x", e.stub) {
				t.Errorf("the call site becomes %s, want a call of the stub %#x", got, e.stub)
			}
		case "_setjmp", "__gxx_personality_v0":
			if e.bp.Plan.Action == bp.Detoured {
				t.Errorf("%s detoured", e.c.name)
			}
		}
	}
	if len(p.entries) != 4 || len(p.int3s) != 1 || p.int3s[0].Func != "symbol_inside" || !strings.HasSuffix(p.int3s[0].Reason, "(its 1 direct call site(s) call its stub without a stop)") {
		t.Errorf("%d entries, int3 entries %v", len(p.entries), p.int3s)
	}
}

// coalesce writes each page's patches at once, with the text between them.
func TestCoalesce(t *testing.T) {
	data := make([]byte, 0x3000)
	for i := range data {
		data[i] = byte(i)
	}
	text := textImage{{start: 0x10000, data: data}}
	w := func(at uint64, b ...byte) write { return write{at, b} }
	cases := []struct {
		name    string
		patches []write
		want    []write
	}{
		{"one page", []write{w(0x10010, 0xe9, 1, 2, 3, 4), w(0x10003, 0xcc)},
			[]write{w(0x10003, append(append([]byte{0xcc}, data[4:0x10]...), 0xe9, 1, 2, 3, 4)...)}},
		{"two pages", []write{w(0x10ff0, 0xcc), w(0x11000, 0xcc)}, []write{w(0x10ff0, 0xcc), w(0x11000, 0xcc)}},
		{"adjacent", []write{w(0x10000, 1, 2), w(0x10002, 3)}, []write{w(0x10000, 1, 2, 3)}},
		{"overlapping", []write{w(0x10004, 9), w(0x10000, 1, 2, 3, 4, 5)}, []write{w(0x10004, 9), w(0x10000, 1, 2, 3, 4, 5)}},
		{"outside the text", []write{w(0x20000, 1), w(0x20010, 2)}, []write{w(0x20000, 1), w(0x20010, 2)}},
	}
	for _, c := range cases {
		if got := coalesce(text, c.patches); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: %x, want %x", c.name, got, c.want)
		}
	}
}

func TestLandings(t *testing.T) {
	l := newLandings(textImage{{start: 0x1000, data: make([]byte, 0x10)}, {start: 0x2000, data: make([]byte, 0x10)}})
	l.add(0x1004)
	l.add(0x1004)
	l.add(0x200f)
	l.add(0x3000) // outside the text
	for range 300 {
		l.add(0x2008)
	}
	for _, c := range []struct {
		addr uint64
		want int
	}{{0x1004, 2}, {0x1005, 0}, {0x200f, 1}, {0x2008, maxLandings}, {0x3000, 0}, {0xfff, 0}} {
		if got := l.at(c.addr); got != c.want {
			t.Errorf("at(%#x) = %d, want %d", c.addr, got, c.want)
		}
	}
	for _, c := range []struct {
		lo, hi uint64
		want   bool
	}{{0x1004, 0x1009, false}, {0x1003, 0x1005, true}, {0x1000, 0x1004, false}, {0x2007, 0x2010, true}, {0x2009, 0x200f, false}} {
		if got := l.within(c.lo, c.hi); got != c.want {
			t.Errorf("within(%#x, %#x) = %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
}

// A function whose own loop jumps inside its first 5 bytes gets a copy of
// its body, unless another function's branch lands there too; its own
// branches to one byte may be several.
func TestCloneLandings(t *testing.T) {
	loop := []byte{
		0x31, 0xc0, // xor %eax,%eax
		0xff, 0xc0, // inc %eax (the loop's head: +2)
		0x83, 0xf8, 0x0a, // cmp $10,%eax
		0x75, 0xf9, // jne +2
		0xc3, // ret
	}
	twice := []byte{
		0x31, 0xc0, // xor %eax,%eax
		0xff, 0xc0, // inc %eax (+2)
		0x83, 0xf8, 0x05, // cmp $5,%eax
		0x74, 0xf9, // je +2
		0x83, 0xf8, 0x0a, // cmp $10,%eax
		0x75, 0xf4, // jne +2
		0xc3, // ret
	}
	sites := fast.SitesAt(testScratch + 16)
	for _, body := range [][]byte{loop, twice} {
		c := cand{name: "loop", value: 0x1000, size: uint64(len(body))}
		own, err := bp.Branches(body, testBias+0x1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, other := range []int{0, 1} {
			cm := testCodeMap(map[uint64][]byte{0x1000: body})
			cm.targets = newLandings(cm.text)
			for _, a := range own.Targets {
				cm.targets.add(a) // its own branches
			}
			for range other {
				cm.targets.add(testBias + 0x1002) // another function's
			}
			code := cm.text.code(testBias+0x1000, c.size)
			head := func(slot uint64) ([]byte, error) { return fast.Head(slot, testBias+0x1000, sites.Entry) }
			if _, err := cm.detour(c, code, testScratch+0x100, testScratch, 0, head); err != errBranchInside {
				t.Fatalf("detour: %v, want %v", err, errBranchInside)
			}
			_, err := cm.clone(c, code, testScratch+0x100, head)
			if other == 0 && err != nil {
				t.Errorf("%d own branches only: clone: %v", len(own.Targets), err)
			}
			if other == 1 && err != errBranchInside {
				t.Errorf("%d own branches and another function's: clone: %v, want %v", len(own.Targets), err, errBranchInside)
			}
		}
	}
}

// clearTable zeroes the entries it is given in a copy of the thread
// table, and past clearAllOver of them the whole table.
func TestClearTable(t *testing.T) {
	table := make([]byte, fast.TableSize)
	fill := func() {
		for i := range table {
			table[i] = 0xff
		}
	}
	addr := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(table))))
	fill()
	offs := []uint64{0, 5 * 16, (fast.TableEntries - 1) * 16}
	if err := clearTable(os.Getpid(), addr, offs); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(table); i += 16 {
		cleared := slices.Contains(offs, uint64(i))
		for _, b := range table[i : i+16] {
			if (b == 0) != cleared {
				t.Fatalf("entry at %#x: %x, cleared %v", i, table[i:i+16], cleared)
			}
		}
	}
	fill()
	many := make([]uint64, clearAllOver+1)
	for i := range many {
		many[i] = uint64(i) * 32
	}
	if err := clearTable(os.Getpid(), addr, many); err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(table, func(b byte) bool { return b != 0 }); i >= 0 {
		t.Errorf("past %d entries: byte %#x left %#x", clearAllOver, i, table[i])
	}
}
