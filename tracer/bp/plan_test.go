package bp

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"rtrace/internal/testutil"
)

func pad(code []byte) []byte { return append(code, make([]byte, 16)...) }

func TestPrepare(t *testing.T) {
	const addr, slot = 0x401000, 0x402000
	cases := []struct {
		name   string
		code   []byte
		act    Action
		resume uint64
		slot   string // disassembly of the slot
	}{
		{"endbr64", []byte{0xf3, 0x0f, 0x1e, 0xfa, 0x55}, Jump, addr + 4, ""},
		{"nop5", []byte{0x0f, 0x1f, 0x44, 0, 0}, Jump, addr + 5, ""},
		{"jmp rel32", []byte{0xe9, 0x10, 0, 0, 0}, Jump, addr + 5 + 0x10, ""},
		{"jmp rel8 back", []byte{0xeb, 0xfe}, Jump, addr, ""},
		{"push rbp", []byte{0x55, 0x48, 0x89, 0xe5}, OutOfLine, slot, "push %rbp; jmpq T0x401001"},
		{"push r12", []byte{0x41, 0x54}, OutOfLine, slot, "push %r12; jmpq T0x401002"},
		{"sub rsp", []byte{0x48, 0x83, 0xec, 0x10}, OutOfLine, slot, "sub $0x10,%rsp; jmpq T0x401004"},
		// mov 0x100(%rip),%rax at addr reads addr+7+0x100.
		{"rip-relative", []byte{0x48, 0x8b, 0x05, 0x00, 0x01, 0, 0}, OutOfLine, slot,
			"mov T0x401107,%rax; jmpq T0x401007"},
		{"je rel8", []byte{0x74, 0x03}, OutOfLine, slot, "je T0x401005; jmpq T0x401002"},
		// An indirect call through rip: push the return address, jmp *.
		{"call *rip", []byte{0xff, 0x15, 0x00, 0x01, 0, 0}, OutOfLine, slot,
			"lea -0x8(%rsp),%rsp; movl $T0x401006,(%rsp); movl $0x0,0x4(%rsp); jmpq *T0x401106; jmpq T0x401006"},
		// call *%rax
		{"call *rax", []byte{0xff, 0xd0}, OutOfLine, slot,
			"lea -0x8(%rsp),%rsp; movl $T0x401002,(%rsp); movl $0x0,0x4(%rsp); jmp *%rax; jmpq T0x401002"},
		// A call pushes its original return address, then jumps.
		{"call", []byte{0xe8, 0x00, 0x01, 0, 0}, OutOfLine, slot,
			"lea -0x8(%rsp),%rsp; movl $T0x401005,(%rsp); movl $0x0,0x4(%rsp); jmpq T0x401105; jmpq T0x401005"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := Prepare(pad(c.code), addr, slot)
			if err != nil {
				t.Fatal(err)
			}
			if p.Action != c.act || p.Resume != c.resume {
				t.Fatalf("action %d resume %#x, want %d %#x", p.Action, p.Resume, c.act, c.resume)
			}
			if c.act != OutOfLine {
				return
			}
			if got := testutil.Disasm(t, p.Slot, slot); got != c.slot {
				t.Fatalf("slot:\n got %s\nwant %s", got, c.slot)
			}
		})
	}
	for _, bad := range [][]byte{{0xcc}, {0xe2, 0x05}, {0x06}, {0xff, 0x54, 0x24, 0x08}} {
		if _, err := Prepare(pad(bad), addr, slot); !errors.Is(err, ErrUnsupported) {
			t.Errorf("% x: err %v, want ErrUnsupported", bad, err)
		}
	}
}

func TestPrepareFar(t *testing.T) {
	// The slot is out of rel32 range: the jump back is absolute.
	p, err := Prepare(pad([]byte{0x55}), 0x401000, 0x7f0000000000)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := testutil.Disasm(t, p.Slot[:7], 0x7f0000000000), "push %rbp; jmpq *(%rip)"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if _, err := Prepare(pad([]byte{0x48, 0x8b, 0x05, 0, 1, 0, 0}), 0x401000, 0x7f0000000000); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("rip-relative out of range: err %v", err)
	}
}

const detourPrologue = "mov %r11,-0x10(%rsp); mov (%rsp),%r11; int3; lea T0x3ff000,%r11; mov %r11,(%rsp); mov -0x10(%rsp),%r11; "

func TestPrepareDetour(t *testing.T) {
	const addr, slot, ret = 0x401000, 0x400000, 0x3ff000
	cases := []struct {
		name  string
		body  []byte
		patch uint64
		tramp string // after the prologue
	}{
		// push %rbp; mov %rsp,%rbp; mov %edi,-4(%rbp); je .+2; jmp .; ret
		{"O0 prologue", []byte{0x55, 0x48, 0x89, 0xe5, 0x89, 0x7d, 0xfc, 0x74, 0x02, 0xeb, 0xfe, 0xc3}, addr,
			"push %rbp; mov %rsp,%rbp; mov %edi,-0x4(%rbp); jmpq T0x401007"},
		// endbr64 stays in place; the jmp goes after it.
		{"endbr64", []byte{0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3}, addr + 4,
			"push %rbp; mov %rsp,%rbp; pop %rbp; jmpq T0x401009"},
		// test %edi,%edi; je +1; ret; xor %eax,%eax; ret
		{"jcc relocated", []byte{0x85, 0xff, 0x74, 0x01, 0xc3, 0x31, 0xc0, 0xc3}, addr,
			"test %edi,%edi; je T0x401005; retq; jmpq T0x401005"},
		// sub $8,%rsp; call +0x100; add $8,%rsp; ret
		{"call", []byte{0x48, 0x83, 0xec, 0x08, 0xe8, 0, 1, 0, 0, 0x48, 0x83, 0xc4, 0x08, 0xc3}, addr,
			"sub $0x8,%rsp; lea -0x8(%rsp),%rsp; movl $T0x401009,(%rsp); movl $0x0,0x4(%rsp); jmpq T0x401109; jmpq T0x401009"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := PrepareDetour(c.body, addr, slot, ret)
			if err != nil {
				t.Fatal(err)
			}
			if p.Action != Detoured || p.Patch != c.patch || p.Trap != slot+9 {
				t.Fatalf("action %d patch %#x trap %#x", p.Action, p.Patch, p.Trap)
			}
			if got, want := testutil.Disasm(t, p.Slot, slot), detourPrologue+c.tramp; got != want {
				t.Fatalf("trampoline:\n got %s\nwant %s", got, want)
			}
			if got, want := testutil.Disasm(t, p.Jmp, p.Patch), fmt.Sprintf("jmpq T%#x", slot); got != want {
				t.Fatalf("jmp: got %s, want %s", got, want)
			}
			off := p.Patch - addr
			if string(p.Orig) != string(c.body[off:off+5]) {
				t.Fatalf("orig % x, want % x", p.Orig, c.body[off:off+5])
			}
			if len(p.Slot) > MaxSlot {
				t.Fatalf("trampoline of %d bytes > MaxSlot", len(p.Slot))
			}
		})
	}
	bad := map[string][]byte{
		"too short": {0x31, 0xc0, 0xc3},
		"int3":      {0xcc, 0x90, 0x90, 0x90, 0x90, 0x90},
		"loop insn": {0xe2, 0xfe, 0x90, 0x90, 0x90, 0xc3},
	}
	for name, body := range bad {
		if _, err := PrepareDetour(body, addr, slot, ret); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: err %v, want ErrUnsupported", name, err)
		}
	}
}

func TestBranches(t *testing.T) {
	// xor %eax,%eax; inc %eax; cmp $9,%eax; jne (back to +2); call +0x10;
	// call *0x20(%rip); ret: a loop into what a detour would displace, a
	// call, and a call through a GOT slot.
	body := []byte{0x31, 0xc0, 0xff, 0xc0, 0x83, 0xf8, 0x09, 0x75, 0xf9, 0xe8, 0x10, 0, 0, 0, 0xff, 0x15, 0x20, 0, 0, 0, 0xc3}
	refs, err := Branches(body, 0x401000)
	if err != nil || fmt.Sprint(refs.Targets) != fmt.Sprint([]uint64{0x401002, 0x40101e}) || fmt.Sprint(refs.Slots) != fmt.Sprint([]uint64{0x401034}) || refs.Loads != nil {
		t.Fatalf("Branches = %+v, %v", refs, err)
	}
	// mov 0x10(%rip),%rax: a load, not a call slot.
	refs, err = Branches([]byte{0x48, 0x8b, 0x05, 0x10, 0, 0, 0}, 0x401000)
	if err != nil || fmt.Sprint(refs.Loads) != fmt.Sprint([]uint64{0x401017}) || refs.Slots != nil {
		t.Fatalf("Branches = %+v, %v", refs, err)
	}
	// An undecodable byte (0x06, push %es, is invalid in 64-bit mode) is
	// reported, and decoding goes on after it.
	refs, err = Branches([]byte{0x06, 0xeb, 0xfe}, 0x401000)
	if !errors.Is(err, ErrUnsupported) || fmt.Sprint(refs.Targets) != fmt.Sprint([]uint64{0x401001}) {
		t.Fatalf("Branches = %+v, %v", refs, err)
	}
}

// Calls holds the targets of calls of every encoding: e8, the 67 e8 the
// linker relaxes a -fno-plt call to, bnd's f2 e8; not jumps.
func TestBranchesCalls(t *testing.T) {
	body := []byte{
		0xe8, 0x10, 0, 0, 0, // call +0x10
		0x67, 0xe8, 0x20, 0, 0, 0, // addr32 call +0x20
		0xf2, 0xe8, 0x30, 0, 0, 0, // bnd call +0x30
		0xe9, 0x40, 0, 0, 0, // jmp +0x40
		0x0f, 0x84, 0x50, 0, 0, 0, // je +0x50
	}
	refs := Refs{WantCalls: true}
	if err := refs.Add(body, 0x1000); err != nil {
		t.Fatal(err)
	}
	want := []uint64{0x1000 + 5 + 0x10, 0x1000 + 11 + 0x20, 0x1000 + 17 + 0x30}
	if fmt.Sprint(refs.Calls) != fmt.Sprint(want) || len(refs.Targets) != 5 {
		t.Errorf("Calls %#x, want %#x; Targets %#x", refs.Calls, want, refs.Targets)
	}
	if refs, _ := Branches(body, 0x1000); refs.Calls != nil {
		t.Errorf("Calls kept without WantCalls: %#x", refs.Calls)
	}
}

func FuzzPrepare(f *testing.F) {
	f.Add([]byte{0x48, 0x8b, 0x05, 0, 1, 0, 0}, uint64(0x401000), uint64(0x7f0000000000))
	f.Add([]byte{0x74, 0x03}, uint64(0x401000), uint64(0x402000))
	f.Add([]byte{0x55, 0x48, 0x89, 0xe5, 0x89, 0x7d, 0xfc, 0x74, 0x02, 0xeb, 0xfe, 0xc3}, uint64(0x401000), uint64(0x400000))
	f.Add([]byte{0x48, 0x83, 0xec, 0x08, 0xe8, 0, 1, 0, 0, 0x48, 0x83, 0xc4, 0x08, 0xc3}, uint64(0x401000), uint64(0x400000))
	f.Fuzz(func(t *testing.T, code []byte, addr, slot uint64) {
		if p, err := Prepare(code, addr, slot); err == nil && len(p.Slot) > MaxSlot {
			t.Fatalf("slot of %d bytes", len(p.Slot))
		}
		Branches(code, addr)
		if p, err := PrepareDetour(code, addr, slot, slot-0x1000); err == nil {
			if len(p.Slot) > MaxSlot || len(p.Jmp) != 5 || len(p.Orig) != 5 || p.Trap != slot+9 {
				t.Fatalf("detour: slot %d bytes, jmp % x, orig % x, trap %#x", len(p.Slot), p.Jmp, p.Orig, p.Trap)
			}
		}
	})
}

// PrepareClone copies a whole function: its branches to itself go to the
// copy, a call of its own entry stays a call of the entry, and what the
// copy cannot hold is refused.
func TestPrepareClone(t *testing.T) {
	const addr, slot = 0x401000, 0x300000
	head := func(uint64) ([]byte, error) { return []byte{0x90}, nil } // a nop stands for the stub head
	// push %rbx; 1: mov %edi,%ebx; dec %edi; jne 1b; call addr; pop %rbx; ret
	body := []byte{0x53, 0x89, 0xfb, 0xff, 0xcf, 0x75, 0xfa, 0xe8, 0xf4, 0xff, 0xff, 0xff, 0x5b, 0xc3}
	p, err := PrepareClone(body, addr, slot, true, head)
	if err != nil {
		t.Fatal(err)
	}
	want := "nop; push %rbx; mov %edi,%ebx; dec %edi; jne T0x300002; callq T0x401000; pop %rbx; retq; jmpq T0x40100e"
	if got := testutil.Disasm(t, p.Slot, slot); got != want {
		t.Errorf("copy:\n%s\nwant\n%s", got, want)
	}
	if p.Action != Detoured || p.Patch != addr || !bytes.Equal(p.Orig, body[:5]) || testutil.Disasm(t, p.Jmp, addr) != "jmpq T0x300000" {
		t.Errorf("plan %+v", p)
	}
	if _, err := PrepareClone(body, addr, slot, false, head); !errors.Is(err, ErrUnsupported) {
		t.Errorf("a call in a module with C++ exceptions: %v", err)
	}
	for name, b := range map[string][]byte{
		"jump table":            {0x53, 0xff, 0xe0, 0x5b, 0xc3, 0x90}, // jmp *%rax
		"into an instruction":   {0x53, 0x89, 0xfb, 0x75, 0xfd, 0xc3}, // jne into the mov
		"loop has a rel8 only":  {0x53, 0x89, 0xfb, 0xe2, 0xfc, 0xc3}, // loop 1b
		"too short for the jmp": {0x53, 0xc3},
	} {
		if _, err := PrepareClone(b, addr, slot, true, head); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TailJump finds glibc's setjmp wrappers' jump to __sigsetjmp, and
// nothing in a function that does its own work.
func TestTailJump(t *testing.T) {
	cases := []struct {
		name string
		code []byte
		addr uint64
		to   uint64
		ok   bool
	}{
		{"setjmp", []byte{0xbe, 0x01, 0, 0, 0, 0xe9, 0x66, 0xff, 0xff, 0xff}, 0x3bd80, 0x3bcf0, true},
		{"_setjmp", []byte{0x31, 0xf6, 0xe9, 0x59, 0xff, 0xff, 0xff}, 0x3bd90, 0x3bcf0, true},
		{"endbr64, jmp rel8", []byte{0xf3, 0x0f, 0x1e, 0xfa, 0xeb, 0x10}, 0x1000, 0x1016, true},
		{"__sigsetjmp's own work", []byte{0x48, 0x89, 0x1f, 0x48, 0x89, 0xe8, 0x64, 0x48, 0x33, 0x04, 0x25, 0x30, 0, 0, 0}, 0x3bcf0, 0, false},
		{"a conditional branch first", []byte{0x74, 0x02, 0xe9, 0, 0, 0, 0}, 0x1000, 0, false},
		{"a call first", []byte{0xe8, 0, 0, 0, 0, 0xe9, 0, 0, 0, 0}, 0x1000, 0, false},
		{"indirect jump", []byte{0xff, 0xe0}, 0x1000, 0, false},
		{"empty", nil, 0x1000, 0, false},
	}
	for _, c := range cases {
		to, ok := TailJump(c.code, c.addr)
		if to != c.to || ok != c.ok {
			t.Errorf("%s: %#x %v, want %#x %v", c.name, to, ok, c.to, c.ok)
		}
	}
}

func TestReturns(t *testing.T) {
	// glibc 2.36's backtrace, from `leave`: a jmp within, a ret, a call
	// that does not return.
	tail := []byte{
		0xeb, 0x03, // jmp +3 (inside)
		0x90, 0x90, 0x90,
		0xc9,                         // leave
		0xc3,                         // ret
		0xe8, 0x7f, 0x27, 0x00, 0x00, // call __stack_chk_fail
	}
	cases := []struct {
		name string
		code []byte
		rets []uint64
		ok   bool
	}{
		{"backtrace's end", tail, []uint64{0x1006}, true},
		{"two returns", []byte{0x74, 0x01, 0xc3, 0x31, 0xc0, 0xc3}, []uint64{0x1002, 0x1005}, true},
		{"a tail call", []byte{0x74, 0x01, 0xc3, 0xe9, 0, 0x10, 0, 0}, nil, false},
		{"a conditional tail call", []byte{0x0f, 0x84, 0, 0x10, 0, 0, 0xc3}, nil, false},
		{"an indirect jump", []byte{0xff, 0xe0, 0xc3}, nil, false},
		{"no return", []byte{0xe8, 0, 0, 0, 0}, nil, false},
		{"undecodable", []byte{0x0f, 0x0b, 0xff}, nil, false},
	}
	for _, c := range cases {
		rets, ok := Returns(c.code, 0x1000)
		if !slices.Equal(rets, c.rets) || ok != c.ok {
			t.Errorf("%s: %#x %v, want %#x %v", c.name, rets, ok, c.rets, c.ok)
		}
	}
}
