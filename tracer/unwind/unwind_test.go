package unwind

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

const stackBase = 0x7ff000000000

// TestFramePointers follows an rbp chain through pcs in no module.
func TestFramePointers(t *testing.T) {
	s := newStack(stackBase, 0x1000)
	// Three frame-pointer frames: [bp] = caller's bp, [bp+8] = return address.
	bp0, bp1, bp2 := uint64(stackBase+0x40), uint64(stackBase+0x100), uint64(stackBase+0x400)
	s.put(bp0, bp1)
	s.put(bp0+8, 0x400200)
	s.put(bp1, bp2)
	s.put(bp1+8, 0x400300)
	s.put(bp2, 0) // outermost: rbp 0, as _start leaves it
	s.put(bp2+8, 0x400400)
	regs := Regs{PC: 0x400100, SP: stackBase + 0x10, BP: bp0}

	u := New()
	mem := s.mem()
	got := u.Backtrace(mem, regs, 64, nil)
	want := []uint64{0x400100, 0x400200, 0x400300, 0x400400}
	if !slices.Equal(got, want) {
		t.Fatalf("backtrace = %x, want %x", got, want)
	}
	if mem.reads != 1 {
		t.Errorf("%d reads of the target's memory, want 1 (the stack window)", mem.reads)
	}

	if got := u.Backtrace(s.mem(), regs, 2, nil); !slices.Equal(got, want[:2]) {
		t.Errorf("depth 2: %x, want %x", got, want[:2])
	}
	if got := u.Backtrace(s.mem(), regs, 0, []uint64{7}); !slices.Equal(got, []uint64{7}) {
		t.Errorf("depth 0 changed out: %x", got)
	}
	if got := u.Backtrace(s.mem(), Regs{}, 8, nil); len(got) != 0 {
		t.Errorf("pc 0: %x, want nothing", got)
	}
}

// TestFramePointerGarbage stops on chains that cannot be frames.
func TestFramePointerGarbage(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(s *stackBuilder) Regs
		want  int // frames
	}{
		{"bp below sp", func(s *stackBuilder) Regs {
			return Regs{PC: 0x400100, SP: stackBase + 0x100, BP: stackBase + 0x40}
		}, 1},
		{"bp zero", func(s *stackBuilder) Regs {
			return Regs{PC: 0x400100, SP: stackBase, BP: 0}
		}, 1},
		{"bp misaligned", func(s *stackBuilder) Regs {
			return Regs{PC: 0x400100, SP: stackBase, BP: stackBase + 0x41}
		}, 1},
		{"bp loops to itself", func(s *stackBuilder) Regs {
			s.put(stackBase+0x40, stackBase+0x40)
			s.put(stackBase+0x48, 0x400200)
			return Regs{PC: 0x400100, SP: stackBase, BP: stackBase + 0x40}
		}, 2},
		{"bp unreadable", func(s *stackBuilder) Regs {
			return Regs{PC: 0x400100, SP: stackBase, BP: 0x10000}
		}, 1},
		{"return address zero", func(s *stackBuilder) Regs {
			s.put(stackBase+0x40, stackBase+0x80)
			return Regs{PC: 0x400100, SP: stackBase, BP: stackBase + 0x40}
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(stackBase, 0x1000)
			regs := tc.setup(s)
			got := New().Backtrace(s.mem(), regs, 64, nil)
			if len(got) != tc.want || got[0] != regs.PC {
				t.Errorf("backtrace = %x, want %d frames from %x", got, tc.want, regs.PC)
			}
		})
	}
}

// TestStackWindow checks that loads come from one read of the stack, that
// the window shrinks when the stack mapping is small, and that loads
// outside it still work.
func TestStackWindow(t *testing.T) {
	// 1 KiB of stack: the 16 KiB read is partial (the fake faults past
	// the region, as the kernel at the end of a mapping).
	s := newStack(stackBase, 1024)
	far := newStack(stackBase+1<<20, 64) // a frame far above the window
	s.put(stackBase+0x40, far.base)
	s.put(stackBase+0x48, 0x400200)
	far.put(far.base, 0)
	far.put(far.base+8, 0x400300)
	mem := s.mem()
	mem.add(far.base, far.data)

	got := New().Backtrace(mem, Regs{PC: 0x400100, SP: stackBase, BP: stackBase + 0x40}, 8, nil)
	if want := []uint64{0x400100, 0x400200, 0x400300}; !slices.Equal(got, want) {
		t.Fatalf("backtrace = %x, want %x", got, want)
	}
	if mem.reads != 3 { // the window, then [far] and [far+8]
		t.Errorf("%d reads, want 3", mem.reads)
	}

	// A target whose reads fail unless small: the window halves.
	picky := &pickyMem{fakeMem: s.mem(), max: 512}
	got = New().Backtrace(picky, Regs{PC: 0x400100, SP: stackBase, BP: stackBase + 0x40}, 2, nil)
	if want := []uint64{0x400100, 0x400200}; !slices.Equal(got, want) {
		t.Fatalf("picky: backtrace = %x, want %x", got, want)
	}
	if picky.reads != 4 { // 4K, 2K, 1K fail; 512 works
		t.Errorf("picky: %d reads, want 4", picky.reads)
	}

	// A deep stack: frames past the first window extend it (4 KiB, then
	// 4 KiB more, then 8 KiB more), rather than reading words one by one.
	deep := newStack(stackBase, 64<<10)
	var want []uint64
	bp := uint64(stackBase + 0x100)
	for i := range 20 {
		next := bp + 0x300
		if i == 19 {
			next = 0
		}
		deep.put(bp, next)
		deep.put(bp+8, 0x400000+uint64(i)*0x10)
		want = append(want, 0x400000+uint64(i)*0x10)
		bp = next
	}
	mem = deep.mem()
	got = New().Backtrace(mem, Regs{PC: 0x3ffff0, SP: stackBase, BP: stackBase + 0x100}, 64, nil)
	if want := append([]uint64{0x3ffff0}, want...); !slices.Equal(got, want) {
		t.Fatalf("deep: backtrace = %x, want %x", got, want)
	}
	if mem.reads != 3 || mem.bytes != 16<<10 { // 20 frames of 0x300 bytes: 15 KiB
		t.Errorf("deep: %d reads of %d bytes, want 3 of 16 KiB", mem.reads, mem.bytes)
	}
}

// pickyMem fails reads larger than max.
type pickyMem struct {
	*fakeMem
	max int
}

func (p *pickyMem) ReadMemory(buf []byte, addr uint64) (int, error) {
	if len(buf) > p.max {
		p.reads++
		return 0, errFault
	}
	return p.fakeMem.ReadMemory(buf, addr)
}

// TestCFI walks the synthetic module's rows: rsp- and rbp-based CFAs,
// expressions, a row change inside a function, frame pointers where no FDE
// covers the pc, and the outermost frame.
func TestCFI(t *testing.T) {
	S := uint64(stackBase)
	s := newStack(S, 0x1000)
	// frame 0 in A: CFA = S+16, RA at S+8, rbp at S.
	s.put(S+8, 0x1150)
	s.put(S, S+0x40)
	// frame 1 in B: CFA = rbp+16 = S+0x50, RA at S+0x48, rbp at S+0x40.
	s.put(S+0x48, 0x1250)
	s.put(S+0x40, S+0xb0)
	// frame 2 in C: SP = S+0x50; CFA = [SP+8] = S+0x80, RA at CFA-8.
	s.put(S+0x58, S+0x80)
	s.put(S+0x78, 0x1605)
	// frame 3 in G past 0x1604: CFA = SP+32 = S+0xa0, RA at S+0x98.
	s.put(S+0x98, 0x1850)
	// frame 4 at 0x1850, no FDE: frame pointers, rbp = S+0xb0.
	s.put(S+0xb0, 0)
	s.put(S+0xb8, 0x1350)
	// frame 5 in D: outermost.
	u := synthUnwinder(t)
	got := u.Backtrace(s.mem(), Regs{PC: 0x1050, SP: S, BP: 0xdead}, 64, nil)
	want := []uint64{0x1050, 0x1150, 0x1250, 0x1605, 0x1850, 0x1350}
	if !slices.Equal(got, want) {
		t.Fatalf("backtrace = %x, want %x", got, want)
	}
	// Twice: the second walk comes from the row cache.
	if got := u.Backtrace(s.mem(), Regs{PC: 0x1050, SP: S, BP: 0xdead}, 64, nil); !slices.Equal(got, want) {
		t.Fatalf("cached backtrace = %x, want %x", got, want)
	}
}

// TestCFIRows checks single steps on edge rows.
func TestCFIRows(t *testing.T) {
	S := uint64(stackBase)
	for _, tc := range []struct {
		name string
		pc   uint64
		want []uint64
	}{
		// The row at pc-1 = 0x1603 is the entry row: CFA = rsp+8.
		{"G before advance", 0x1604, []uint64{0x1604, 0x1111}},
		// 0x1604: CFA = rsp+32.
		{"G after advance", 0x1605, []uint64{0x1605, 0x4444}},
		// A call that ends G returns to 0x1700, where no FDE starts: G's
		// row must be used, not frame pointers.
		{"return address at FDE end", 0x1700, []uint64{0x1700, 0x4444}},
		{"outermost", 0x1350, []uint64{0x1350}},
		{"sp does not grow", 0x1450, []uint64{0x1450}},
		// A malformed program (the panic is recovered): frame pointers.
		{"bad program", 0x1550, []uint64{0x1550, 0x2222}},
		// Not in any module: frame pointers.
		{"unknown module", 0x9000, []uint64{0x9000, 0x2222}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(S, 0x1000)
			s.put(S, 0x1111)
			s.put(S+0x18, 0x4444)
			s.put(S+0x100, 0)      // [bp]
			s.put(S+0x108, 0x2222) // [bp+8]
			got := synthUnwinder(t).Backtrace(s.mem(), Regs{PC: tc.pc, SP: S, BP: S + 0x100}, 2, nil)
			if !slices.Equal(got, tc.want) {
				t.Errorf("backtrace = %x, want %x", got, tc.want)
			}
		})
	}
}

// TestModules checks module registration, replacement and removal, and the
// warning for a module without CFI.
func TestModules(t *testing.T) {
	var warn bytes.Buffer
	u := New()
	u.Warn = &warn
	u.AddModule("/nonexistent/a.so", 0x10000, 0x10000, 0x20000)
	u.AddModule("/nonexistent/b.so", 0x30000, 0x30000, 0x40000)
	u.AddModule("/nonexistent/c.so", 0x50000, 0x50000, 0x60000)
	if m := u.find(0x35000); m == nil || m.key.path != "/nonexistent/b.so" {
		t.Fatalf("find(0x35000) = %v", m)
	}
	if u.find(0x20000) != nil || u.find(0xffff) != nil {
		t.Error("find outside the modules found one")
	}
	// Overlapping b: replaces it.
	u.AddModule("/nonexistent/d.so", 0x38000, 0x38000, 0x48000)
	if m := u.find(0x35000); m != nil {
		t.Errorf("b still registered: %v", m.key)
	}
	if m := u.find(0x45000); m == nil || m.key.path != "/nonexistent/d.so" {
		t.Errorf("find(0x45000) = %v", m)
	}
	u.RemoveModule(0x38000)
	if u.find(0x45000) != nil {
		t.Error("d still registered after RemoveModule")
	}

	// A module without CFI is unwound with frame pointers, and warned
	// about once.
	s := newStack(stackBase, 0x100)
	s.put(stackBase+0x40, 0)
	s.put(stackBase+0x48, 0x10200)
	for range 3 {
		got := u.Backtrace(s.mem(), Regs{PC: 0x10100, SP: stackBase, BP: stackBase + 0x40}, 8, nil)
		if want := []uint64{0x10100, 0x10200}; !slices.Equal(got, want) {
			t.Fatalf("backtrace = %x, want %x", got, want)
		}
	}
	if n := strings.Count(warn.String(), "a.so"); n != 1 {
		t.Errorf("%d warnings about a.so, want 1:\n%s", n, warn.String())
	}
	u.RemoveModule(0x10000)
	if len(u.cfis) != 0 {
		t.Errorf("CFI cache kept %d entries of removed modules", len(u.cfis))
	}
}
