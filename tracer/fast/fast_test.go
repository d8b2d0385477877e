package fast

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rtrace/internal/testutil"
)

// The committed bytes are stub.S assembled, with no relocation left (a
// rip-relative reference to a global symbol assembles as 0 plus a
// relocation, which once sent every hijacked return into the entry code),
// and the offsets are its symbols'.
func TestBlobMatchesSource(t *testing.T) {
	as := testutil.RequireTool(t, "as")
	obj := filepath.Join(t.TempDir(), "stub.o")
	if out, err := exec.Command(as, "-o", obj, "stub.S").CombinedOutput(); err != nil {
		t.Fatalf("as: %v\n%s", err, out)
	}
	f, err := elf.Open(obj)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, s := range f.Sections {
		if s.Type == elf.SHT_RELA || s.Type == elf.SHT_REL {
			t.Errorf("stub.S assembles with relocations (%s): make the symbols it references local", s.Name)
		}
	}
	text, err := f.Section(".text").Data()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(text, blob) {
		t.Errorf("blob.go is not stub.S assembled: regenerate it (go generate ./tracer/fast)")
	}
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"entry": offEntry, "entry_args": offEntryArgs, "entry_lookup": offLookup, "entry_out": offEntryOut,
		"entry_miss_trap": offEntryMiss, "entry_unhooked_trap": offEntryUnhooked, "exit": offExit,
		"exit_miss": offExitMiss, "exit_empty": offExitEmpty, "exit_stop_trap": offExitStop, "held_trap": offHeldTrap,
		"res_entry": offResEntry, "res_lookup": offResLookup, "res_miss_trap": offResMiss, "res_unhooked_trap": offResUnhooked, "walk_stop_trap": offWalkStop,
		"alive": offAlive, "gadget": offGadget, "gadget_trap": offGadgetTrap, "newstates": offNewStates}
	for _, s := range syms {
		if w, ok := want[s.Name]; ok {
			if s.Value != w {
				t.Errorf("%s at %#x, blob.go says %#x", s.Name, s.Value, w)
			}
			delete(want, s.Name)
		}
	}
	for n := range want {
		t.Errorf("stub.S has no symbol %s", n)
	}
	for _, c := range []struct {
		name string
		off  int
	}{{"GUARD", offGuard}, {"DEPTH", offDepth}, {"UNHOOK", offUnhook}, {"SHARED", offShared}, {"WATCH", offWatch}, {"LASTCPU", offLastCPU}, {"REAL", offReal}, {"CTAIL", offCTail}, {"HEAD", offHead}, {"TAIL", offTail},
		{"LOST", offLost}, {"STALL", offStall}, {"HELD", offHeld}, {"WAITING", offWaiting}, {"FRAMES", offFrames}, {"MAXSTACK", MaxStack}, {"RING", offRing}, {"RINGCAP", RingCap},
		{"TMASK", (TableEntries - 1) * 16},
		{"INRES", offInRes}, {"INRESD", offInResD}, {"STACKLO", offStackLo}, {"STACKHI", offStackHi}, {"UNWIND", offUnwind}, {"BTDEPTH", offBTDepth},
		{"PCGEN", offPCGen}, {"RESDESC", offResDesc}, {"RESARG", offResArg}, {"ROOMNEED", offRoomNeed}, {"RESLOST", offResLost}, {"WALKN", offWalkN},
		{"WALKPC", offWalkPC}, {"WALKSP", offWalkSP}, {"WALKBP", offWalkBP}, {"WALKEX", offWalkEx}, {"RESPAY", offResPay}, {"INRESX", offInResX}, {"RESTSC", offResTSC}, {"INRESW", offInResW}, {"RELSINCE", offRelSince}, {"SIGRES", offSigRes}, {"COARSE", offCoarse}, {"WALKROWS", offWalkRows}, {"WALKBUF", offWalkBuf},
		{"WALKMAX", WalkMax}, {"SCACHE", offSCache}, {"SCENT", scEntry}, {"SCMAX", StackCacheMax}, {"PCCACHE", offPCCache},
		{"MEMOCUR", offMemoCur}, {"MEMOF", offMemoF}, {"MEMON", offMemoN}, {"SCGEN", offSCGen}, {"MEMO", offMemo}, {"MEMOS", memoEntries}, {"MEMOENT", memoEnt},
		{"DF_REL", DescRelease}, {"DF_OUT", DescOut}, {"DF_BT", DescBacktrace}, {"DF_ETIME", DescEntryTime}, {"DF_BOTH", DescBoth}, {"DF_RELF", DescReleaseFrame}, {"FLAGSTOP", FlagStop}, {"FLAGRES", FlagRes}, {"FLAGRET", FlagRet}, {"DF_RET", DescRet}, {"RESARGS", resArgsType},
		{"RESCALL", resType}, {"RESSTACK", resStackBit | resType}, {"HASSTACK", resHasStack}} {
		found := false
		for _, s := range syms {
			if s.Name == c.name {
				found = true
				if s.Value != uint64(c.off) {
					t.Errorf("stub.S sets %s = %#x, fast.go %#x", c.name, s.Value, c.off)
				}
			}
		}
		if !found {
			t.Errorf("stub.S does not set %s", c.name)
		}
	}
}

// Code writes the table's address in its first word and reads the key
// with rdfsbase or from %fs:0.
func TestCode(t *testing.T) {
	for _, c := range []struct {
		rdfsbase bool
		want     string
	}{
		{false, "mov %fs:,%rcx"}, // x86asm prints %fs:0x0 so
		{true, "rdfsbase %rcx; nopl (%rax)"},
	} {
		code := Code(0x7f0012345000, 0x7f0054321008, c.rdfsbase)
		if got := binary.LittleEndian.Uint64(code); got != 0x7f0012345000 {
			t.Errorf("table word %#x", got)
		}
		if got := binary.LittleEndian.Uint64(code[offAlive:]); got != 0x7f0054321008 {
			t.Errorf("lifeline word's address %#x", got)
		}
		if got := testutil.Disasm(t, code[offLookup:offLookup+9], 0); got != c.want {
			t.Errorf("rdfsbase %v: key read as %q, want %q", c.rdfsbase, got, c.want)
		}
		if uint64(len(code)) != CodeSize || CodeSize%16 != 0 {
			t.Errorf("code of %d bytes, CodeSize %d", len(code), CodeSize)
		}
	}
}

func TestHead(t *testing.T) {
	const slot, fn, entry = 0x10000, 0x11234, 0x8040
	h, err := Head(slot, fn, entry)
	if err != nil {
		t.Fatal(err)
	}
	want := "mov %rax,-0x10(%rsp); lea T0x11234,%rax; callq T0x8040; mov -0x10(%rsp),%rax; movq $0x0,-0x8(%rsp)"
	if got := testutil.Disasm(t, h, slot); got != want || len(h) != HeadLen {
		t.Errorf("head (%d bytes):\n%s\nwant\n%s", len(h), got, want)
	}
	if _, err := Head(slot, fn+1<<33, entry); err == nil {
		t.Error("a function out of rel32 range: no error")
	}
	if _, err := Head(slot, fn, entry+1<<33); err == nil {
		t.Error("an entry out of rel32 range: no error")
	}
}

// The table finds what it holds as the code's probe does, reuses freed
// entries, and refuses key 0 and a table past half full.
func TestTable(t *testing.T) {
	var tb Table
	keys := []uint64{0x7f00000a0740, 0x7f00000a1740, 0x7f0000123000}
	seen := map[uint64]bool{}
	for i, k := range keys {
		e, ok := tb.Insert(k, uint64(0x1000*(i+1)))
		if !ok || e.Key != k || e.Off%16 != 0 || seen[e.Off] {
			t.Fatalf("insert %#x: %+v %v", k, e, ok)
		}
		seen[e.Off] = true
	}
	for i, k := range keys {
		if st, ok := tb.Lookup(k); !ok || st != uint64(0x1000*(i+1)) {
			t.Errorf("lookup %#x: %#x %v", k, st, ok)
		}
	}
	e, ok := tb.Remove(keys[1])
	if !ok || e.Key != tombstone || e.State != 0 {
		t.Errorf("remove: %+v %v", e, ok)
	}
	if _, ok := tb.Lookup(keys[1]); ok {
		t.Error("a removed key is found")
	}
	// What was written into the process: the live entries and the tombstone.
	offs := tb.Offsets()
	slices.Sort(offs)
	var want []uint64
	for off := range seen {
		want = append(want, off)
	}
	slices.Sort(want)
	if !slices.Equal(offs, want) {
		t.Errorf("offsets %#x, want %#x", offs, want)
	}
	if _, ok := tb.Insert(0, 1); ok {
		t.Error("key 0 (no TLS yet) registered")
	}
	// Keys hashing to one index: the probe goes past a tombstone.
	var same []uint64
	for k := uint64(8); len(same) < 3; k += 8 {
		if index(k) == index(0x10) {
			same = append(same, k)
		}
	}
	var tc Table
	for i, k := range same {
		tc.Insert(k, uint64(i+1))
	}
	tc.Remove(same[0])
	if st, ok := tc.Lookup(same[2]); !ok || st != 3 {
		t.Errorf("a key past a tombstone: %#x %v", st, ok)
	}
	var full Table
	for k := uint64(1); ; k++ {
		if _, ok := full.Insert(k*64, k); !ok {
			if full.used != TableEntries/2 {
				t.Errorf("refused at %d entries, want %d", full.used, TableEntries/2)
			}
			break
		}
	}
}

func TestWord(t *testing.T) {
	for _, c := range []struct {
		typ, depth int
		addr       uint64
	}{{TypeEntry, 0, 0x401136}, {TypeExit, 4095, 0x7fffffffe000}, {TypeExit, 17, 0x55555555a1b2}} {
		typ, depth, addr := Unword(Word(c.typ, c.depth, c.addr))
		if typ != c.typ || depth != c.depth || addr != c.addr {
			t.Errorf("%+v: unpacked %d %d %#x", c, typ, depth, addr)
		}
	}
}

// Drain hands on what the producer published, frees the room, and counts
// the records the ring had no room for once.
func TestStateDrain(t *testing.T) {
	st := NewState(make([]byte, StateSize), 0x7f0000000000)
	put := func(i uint64, r Rec) {
		off := offRing + int(i%RingCap)*recSize
		binary.LittleEndian.PutUint64(st.mem[off:], r.TSC)
		binary.LittleEndian.PutUint64(st.mem[off+8:], r.Word)
	}
	// Wrap around the end of the ring.
	st.store(offHead, RingCap-2)
	st.store(offTail, RingCap-2)
	for i := range uint64(4) {
		put(RingCap-2+i, Rec{100 + i, Word(TypeEntry, int(i), 0x1000)})
	}
	st.store(offHead, RingCap+2)
	st.store(offLost, 5)
	recs, lost := drainCopy(st, 3)
	if len(recs) != 3 || recs[0].TSC != 100 || recs[2].TSC != 102 || lost != 0 {
		t.Fatalf("first drain: %v lost %d", recs, lost)
	}
	// The 5 lost came after every record the ring held when they were
	// counted, and before what the thread writes once there is room.
	st.Emit(Rec{104, Word(TypeExit, 3, 0x1000)})
	recs, lost = drainCopy(st, 100)
	if len(recs) != 1 || recs[0].TSC != 103 || lost != 5 || !st.Pending() {
		t.Fatalf("second drain: %v lost %d pending %v", recs, lost, st.Pending())
	}
	recs, lost = drainCopy(st, 100)
	if len(recs) != 1 || recs[0].TSC != 104 || lost != 0 || st.Pending() {
		t.Fatalf("third drain: %v lost %d pending %v", recs, lost, st.Pending())
	}
	// A loss with nothing before it in the ring, then another.
	st.store(offLost, 7)
	if recs, lost = drainCopy(st, 100); len(recs) != 0 || lost != 2 {
		t.Fatalf("loss alone: %v lost %d", recs, lost)
	}
	// Resource calls dropped after the ring was read empty: pending until
	// taken, so a thread that writes nothing more (or ends) has them
	// reported.
	if st.Pending() {
		t.Fatal("pending with nothing to read")
	}
	st.store(offResLost, 3)
	if !st.Pending() {
		t.Fatal("3 dropped resource calls, not pending")
	}
	if n := st.TakeResLost(); n != 3 || st.Pending() {
		t.Fatalf("TakeResLost = %d, pending %v after", n, st.Pending())
	}
	st.store(offResLost, 4)
	if n := st.TakeResLost(); n != 1 {
		t.Fatalf("TakeResLost = %d, want the 1 since", n)
	}
}

// The shadow stack as the tracer changes it: push (a forked child's copy),
// pop, and a depth the process corrupted.
func TestStateFrames(t *testing.T) {
	st := NewState(make([]byte, StateSize), 0)
	for i := range 3 {
		st.Push(Frame{Ret: 0x401000 + uint64(i), Slot: 0x7ffd000 - 16*uint64(i), Addr: 0x401100 + uint64(i)})
	}
	if fr := st.Frame(2); fr.Depth != 2 || fr.Addr != 0x401102 || fr.Slot != 0x7ffd000-32 {
		t.Errorf("frame 2: %+v", fr)
	}
	if fr := st.Pop(); fr.Ret != 0x401002 || st.Depth() != 2 {
		t.Errorf("pop: %+v depth %d", fr, st.Depth())
	}
	st.store(offDepth, 1<<40)
	if d := st.Depth(); d != MaxStack {
		t.Errorf("corrupt depth read as %d", d)
	}
	st.Reset()
	if st.Depth() != 0 || st.Pending() {
		t.Error("reset state not empty")
	}
}

// FuzzState: whatever the process wrote in its state, rtrace's reads do
// not fail.
func FuzzState(f *testing.F) {
	f.Add(uint64(0), uint64(0), uint64(0), uint64(0))
	f.Add(uint64(1<<63), uint64(3), uint64(RingCap*5), uint64(1<<62))
	st := NewState(make([]byte, StateSize), 0)
	f.Fuzz(func(t *testing.T, head, tail, depth, lost uint64) {
		st.Reset()
		st.store(offHead, head)
		st.store(offTail, tail)
		st.store(offDepth, depth)
		st.store(offLost, lost)
		if recs, _ := drainCopy(st, 1<<10); len(recs) > 1<<10 {
			t.Fatalf("%d records past the limit", len(recs))
		}
		// Whatever the head said, one more drain empties the ring.
		for range RingCap>>10 + 1 {
			drainCopy(st, 1<<10)
		}
		if st.Pending() {
			t.Fatalf("head %#x tail %#x: still pending after a ring's worth of drains", head, tail)
		}
		for st.Depth() > 0 {
			st.Pop()
		}
	})
}

// drainCopy drains at most most records of st into a new slice.
func drainCopy(st *State, most int) (recs []Rec, lost uint64) {
	lost = st.Drain(most, func(part []Rec) { recs = append(recs, part...) })
	return recs, lost
}

// The clock converts TSC readings to the monotonic clock's nanoseconds,
// and a new piece starts where the previous one ends.
func TestClockPieces(t *testing.T) {
	c, err := NewClock()
	if err != nil {
		testutil.RequireCapability(t, "no usable TSC clock: %v", err)
	}
	first := c.Scale()
	tsc, ns := pair()
	if d := int64(first.Nanos(tsc)) - ns; d < -100_000 || d > 100_000 {
		t.Errorf("a TSC reading converts %d ns away from the clock read with it", d)
	}
	c.mu.Lock()
	c.next = 1 // due: the next Scale starts a piece
	c.mu.Unlock()
	second := c.Scale()
	if second == first {
		t.Fatal("no new piece")
	}
	at := second.tsc0
	if a, b := first.Nanos(at), second.Nanos(at); a != b && a != b+1 && a+1 != b {
		t.Errorf("at the new piece's start, %d ns by the first piece and %d by the second", a, b)
	}
	if c.next <= second.ns0 {
		t.Errorf("the next piece is due at %d, not after this one's start %d", c.next, second.ns0)
	}
}

// TestResDecoder replays resource record groups as res.S writes them, cut
// anywhere between parts: calls come out whole, in order, with the stack
// a STACK put in their slot or the one the slot kept (a cache hit).
func TestResDecoder(t *testing.T) {
	s1 := []uint64{0x401000, 0x401100, 0x401200}
	s2 := []uint64{0x402000}
	var recs []Rec
	recs = append(recs, ResWords(100, 7, []uint64{16, 0x5000}, s1, 3, true)...)
	recs = append(recs, Rec{TSC: 101, Word: Word(TypeEntry, 0, 0x1234)}) // a function record between
	recs = append(recs, ResWords(102, 7, []uint64{32, 0x6000}, s1, 3, false)...)
	recs = append(recs, ResWords(103, 9, []uint64{0x5000}, nil, 0, false)...)
	recs = append(recs, ResWords(104, 8, []uint64{1, 2, 3, 0, 0x7000}, s2, 200, true)...)
	recs = append(recs, ResWords(105, 7, []uint64{48, 0x8000}, s2, 3, true)...) // slot 3 takes another stack
	// -A/-R values (args.S): three argument registers, then a return value.
	recs = append(recs, ValueWords(Word(TypeEntry, 1, 0x1234), 5, false, []uint64{11, 12, 13})...)
	recs = append(recs, ValueWords(Word(TypeExit, 1, 0x1234), 1<<20, true, []uint64{21, 22})...)
	want := []string{
		"100 7 [16 20480] [4198400 4198656 4198912]",
		"102 7 [32 24576] [4198400 4198656 4198912]",
		"103 9 [20480 0] []",
		"104 8 [1 2 3 0 28672 0] [4202496]",
		"105 7 [48 32768] [4202496]",
		fmt.Sprintf("values %d 5 0 [11 12 13]", Word(TypeEntry, 1, 0x1234)),
		fmt.Sprintf("values %d %d 1 [21 22]", Word(TypeExit, 1, 0x1234), 1<<20),
	}
	show := func(c *ResCall) string {
		if c.Values {
			return fmt.Sprintf("values %d %d %d %v", c.TSC, c.ID, c.Slot, c.Words)
		}
		return fmt.Sprintf("%d %d %v %v", c.TSC, c.ID, c.Words, c.Stack)
	}
	for cut := 0; cut <= len(recs); cut++ {
		var d ResDecoder
		var got []string
		others := 0
		for _, part := range [][]Rec{recs[:cut], recs[cut:]} {
			// As the drain reads them: a group whole in the part at once
			// (Group), the others record by record.
			for i := 0; i < len(part); i++ {
				r := part[i]
				if !d.Pending() && !IsRes(r.Word) {
					others++
					continue
				}
				var g ResCall
				if n, ok := d.Group(part, i, &g); ok {
					got = append(got, show(&g))
					i += n - 1
					continue
				}
				c, whole, bad := d.Feed(r)
				if bad {
					t.Fatalf("cut %d: a group decoded as bad", cut)
				}
				if whole {
					got = append(got, show(&c))
				}
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) || others != 1 {
			t.Fatalf("cut %d: %d other records, calls\n%s\nwant\n%s", cut, others, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	var d ResDecoder
	if _, _, bad := d.Feed(Rec{Word: uint64(WalkMax+1)<<16 | resStackBit | resType}); !bad {
		t.Error("a stack deeper than WalkMax decoded")
	}
}

// exactNanos is the conversion in exact arithmetic, truncated toward
// zero as the floating point formula truncated: s.ns0 plus the ticks
// since s.tsc0 times the rate.
func exactNanos(s Scale, tsc uint64) int64 {
	n := int64(tsc - s.tsc0)
	p := new(big.Rat).Mul(new(big.Rat).SetInt64(n), new(big.Rat).SetFloat64(s.nsPerTick))
	q := new(big.Int).Quo(p.Num(), p.Denom()) // truncated toward zero
	return s.ns0 + q.Int64()
}

// sameNanos checks Scale.Nanos against exactNanos, and against the
// floating point formula it replaced: equal, but where the floating
// point product rounded across an integer (one apart then).
func sameNanos(t *testing.T, s Scale, tsc uint64) {
	t.Helper()
	got := int64(s.Nanos(tsc))
	if want := exactNanos(s, tsc); got != want {
		t.Fatalf("Nanos(%d) at %g ns per tick from (%d, %d) = %d, exactly %d", tsc, s.nsPerTick, s.tsc0, s.ns0, got, want)
	}
	n := float64(int64(tsc - s.tsc0))
	fl := s.ns0 + int64(n*s.nsPerTick)
	exact := new(big.Rat).Mul(new(big.Rat).SetFloat64(n), new(big.Rat).SetFloat64(s.nsPerTick))
	rounded := new(big.Rat).SetFloat64(n * s.nsPerTick)
	if fl != got && exact.Cmp(rounded) == 0 {
		t.Fatalf("Nanos(%d) = %d, floating point %d from an exact product", tsc, got, fl)
	}
}

// TestScaleNanos: the fixed-point conversion truncates as the floating
// point one did, at the TSC rates of real machines and the tests' own,
// before and after a piece's start, up to days of ticks.
func TestScaleNanos(t *testing.T) {
	for _, rate := range []float64{0.4, 1, 0.25, 1 / 2.45, 1 / 3.7, 0.333333, 2.5, 10} {
		for _, tsc0 := range []uint64{0, 1000, 1 << 40} {
			s := newScale(tsc0, 5_000_000_000, rate)
			for _, d := range []int64{0, 1, 2, 3, 7, 1049, 1050, 1051, 1052, 1e6 + 3, 1e9 + 7, 3.6e12 + 11, 3e14 + 5, -1, -1051, -1052, -1e9} {
				sameNanos(t, s, tsc0+uint64(d))
			}
		}
	}
	if got := FixedClock(0.4).Nanos(1050); got != 420 {
		t.Errorf("FixedClock(0.4).Nanos(1050) = %d, want 420", got)
	}
}

// FuzzScaleNanos: the same for any rate of a plausible TSC (10 MHz to 20
// GHz) and any reading within 10^15 ticks (days) of the piece's start.
func FuzzScaleNanos(f *testing.F) {
	f.Add(0.4, uint64(1000), int64(1052))
	f.Add(1/2.45, uint64(1<<40), int64(-1e9))
	f.Fuzz(func(t *testing.T, rate float64, tsc0 uint64, d int64) {
		if !(rate >= 0.05 && rate <= 100) || d > 1e15 || d < -1e15 {
			return
		}
		sameNanos(t, newScale(tsc0, 1<<40, rate), tsc0+uint64(d))
	})
}

// TestResourceTimesOrdered: the TSC a resource call's record carries is
// read by rdtscp (NOWTSC), which waits for the loads before it: a
// release of a block another thread handed over must not read a time
// from before that thread allocated it (docs/FAST-PATH.md, "Resource calls
// in time order"). Every TSC reading in res.S but the function records'
// of frames a jump left (res_dead) goes through NOWTSC, and so does the
// exit of a resource call's frame.
func TestResourceTimesOrdered(t *testing.T) {
	src := func(name string) []string {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(string(b), "\n")
	}
	insn := func(line string) string {
		line, _, _ = strings.Cut(line, "#")
		if _, rest, ok := strings.Cut(line, ":"); ok && !strings.Contains(line, "(") {
			line = rest // a label
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			return ""
		}
		return f[0]
	}
	stub := src("stub.S")
	var macro []string
	for i, l := range stub {
		if strings.TrimSpace(l) == ".macro NOWTSC" {
			for _, m := range stub[i+1:] {
				if strings.TrimSpace(m) == ".endm" {
					break
				}
				macro = append(macro, insn(m))
			}
		}
	}
	if !slices.Contains(macro, "rdtscp") || slices.Contains(macro, "rdtsc") {
		t.Errorf("NOWTSC reads the TSC with %q, want rdtscp only", macro)
	}
	label := ""
	for i, l := range src("res.S") {
		if s := strings.TrimSpace(l); strings.HasSuffix(s, ":") && !strings.HasPrefix(s, "#") && (s[0] < '0' || s[0] > '9') {
			label = strings.TrimSuffix(s, ":") // named labels only
		}
		if insn(l) == "rdtsc" && label != "res_dead" {
			t.Errorf("res.S:%d (after %s) reads the TSC with rdtsc, not NOWTSC", i+1, label)
		}
	}
	// exit: the resource frame's path (FLAGRES) reaches NOWTSC.
	for i, l := range stub {
		if strings.Contains(l, "testq $FLAGRES, FRAMES-32+24(%rdi,%rcx)") {
			window := strings.Join(stub[i:i+8], "\n")
			if !strings.Contains(window, "NOWTSC") {
				t.Errorf("stub.S:%d: a resource frame's return does not read its time with NOWTSC:\n%s", i+1, window)
			}
		}
	}
}
