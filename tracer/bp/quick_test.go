package bp

import (
	"debug/elf"
	"fmt"
	"os"
	"testing"

	"golang.org/x/arch/x86/x86asm"
)

// asX86asm is what Branches took from x86asm for the instruction at the
// start of b: ok false when x86asm does not decode it.
func asX86asm(b []byte) (in quickInst, ok bool) {
	inst, err := x86asm.Decode(b, 64)
	if err != nil {
		return in, false
	}
	return fromX86asm(inst), true
}

// sameAsX86asm checks quick against x86asm on the instruction at the
// start of b: where quick answers, x86asm must decode the same.
func sameAsX86asm(b []byte) (handled bool, err error) {
	q, ok := quick(b)
	if !ok {
		return false, nil
	}
	x, xok := asX86asm(b)
	if !xok {
		return true, fmt.Errorf("% x: quick decodes %+v, x86asm does not", b[:min(len(b), 15)], q)
	}
	if q != x {
		return true, fmt.Errorf("% x: quick %+v, x86asm %+v", b[:min(len(b), q.len, 15)], q, x)
	}
	return true, nil
}

// quickBinaries are objects every test machine has.
var quickBinaries = []string{
	"/usr/lib/x86_64-linux-gnu/libc.so.6",
	"/usr/lib/x86_64-linux-gnu/libm.so.6",
	"/lib64/ld-linux-x86-64.so.2",
	"/bin/bash",
	"/usr/bin/gcc",
	"/usr/bin/make",
	"/usr/bin/git",
}

// Every instruction of real code, decoded one after the other as Branches
// does: where quick answers, it answers as x86asm, and it answers for
// most.
func TestQuickMatchesX86asm(t *testing.T) {
	tested := 0
	for _, path := range quickBinaries {
		f, err := elf.Open(path)
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			t.Fatal(err)
		}
		sec := f.Section(".text")
		if sec == nil {
			f.Close()
			continue
		}
		text, err := sec.Data()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		tested++
		insts, handled, bad := 0, 0, 0
		for off := 0; off < len(text); {
			x, ok := asX86asm(text[off:])
			if !ok {
				if _, err := sameAsX86asm(text[off:]); err != nil && bad < 10 {
					t.Errorf("%s+%#x: %v", path, off, err)
					bad++
				}
				off++
				continue
			}
			insts++
			h, err := sameAsX86asm(text[off:])
			if err != nil && bad < 10 {
				t.Errorf("%s+%#x: %v", path, off, err)
				bad++
			}
			if h {
				handled++
			}
			off += x.len
		}
		t.Logf("%s: quick decodes %d of %d instructions (%.1f%%)", path, handled, insts, 100*float64(handled)/float64(insts))
		if float64(handled) < 0.8*float64(insts) { // libm: x87 goes to x86asm
			t.Errorf("%s: quick decodes only %d of %d instructions", path, handled, insts)
		}
	}
	if tested == 0 {
		t.Fatal("none of the binaries to decode is on this machine")
	}
}

func FuzzQuick(f *testing.F) {
	for _, s := range [][]byte{
		{0xe8, 1, 2, 3, 4}, {0xff, 0x25, 1, 0, 0, 0}, {0x48, 0x8b, 0x05, 0x10, 0, 0, 0},
		{0x66, 0x0f, 0x1f, 0x44, 0, 0}, {0xf3, 0x0f, 0x1e, 0xfa}, {0x48, 0xb8, 1, 2, 3, 4, 5, 6, 7, 8},
		{0xc7, 0x05, 1, 0, 0, 0, 2, 0, 0, 0}, {0x0f, 0x84, 0, 1, 0, 0}, {0x66, 0x0f, 0x3a, 0x0f, 0xc1, 8},
		{0xf6, 0x05, 1, 0, 0, 0, 0x80}, {0xf2, 0xe9, 0, 0, 0, 0},
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := sameAsX86asm(b); err != nil {
			t.Fatal(err)
		}
	})
}

// BenchmarkBranches decodes libc's code as scanModule does: the ns/op is
// per byte of code.
func BenchmarkBranches(b *testing.B) {
	f, err := elf.Open("/usr/lib/x86_64-linux-gnu/libc.so.6")
	if err != nil {
		b.Skip(err)
	}
	defer f.Close()
	text, err := f.Section(".text").Data()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		Branches(text, 0x1000)
	}
}
