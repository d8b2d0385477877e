package resolver

import (
	"debug/elf"
	"testing"

	"rtrace/internal/elfx"
)

// TestLoadBias checks the bias computed from PT_LOAD against a real
// process: each function address the fixture printed must be its symbol
// value plus the bias of the r-xp mapping /proc/self/maps gave for it.
func TestLoadBias(t *testing.T) {
	for _, b := range fixtureBuilds {
		t.Run(b.name, func(t *testing.T) {
			run := runFixture(t, b)
			r := run.resolver(Options{}, nil)
			for name, addr := range run.syms {
				m := r.mappingAt(addr)
				if m == nil {
					t.Fatalf("%s at %#x: in no r-xp mapping of %v", name, addr, run.maps)
				}
				f, err := elfx.Open(m.Path)
				if err != nil {
					t.Fatal(err)
				}
				bias, err := loadBias(f.Loads, m.From, m.To)
				if err != nil {
					t.Fatal(err)
				}
				var value uint64
				for _, fn := range f.Funcs {
					if fn.Name == name {
						value = fn.Value
					}
				}
				if value == 0 {
					t.Fatalf("%s: no symbol %s", m.Path, name)
				}
				if value+bias != addr {
					t.Errorf("%s in %s: value %#x + bias %#x = %#x, process has it at %#x", name, m.Path, value, bias, value+bias, addr)
				}
				pie := f.Type == elf.ET_DYN
				if !pie && bias != 0 {
					t.Errorf("%s: non-PIE executable with bias %#x", m.Path, bias)
				}
				// sp-rtrace took the mapping start as the bias of objects
				// linked at 0: wrong for split segments, whose text
				// starts a page or more in.
				if pie && bias == m.From {
					t.Errorf("%s: bias equals the mapping start; the fixture does not test split segments", m.Path)
				}
			}
		})
	}
}

func TestLoadBiasTable(t *testing.T) {
	for _, c := range []struct {
		name     string
		loads    []elfx.Load
		from, to uint64
		want     uint64
		err      bool
	}{
		{"non-PIE split", []elfx.Load{{Vaddr: 0x400000, Memsz: 0x500}, {Vaddr: 0x401000, Offset: 0x1000, Memsz: 0x315, Exec: true}}, 0x401000, 0x402000, 0, false},
		{"PIE split", []elfx.Load{{Memsz: 0x748}, {Vaddr: 0x1000, Offset: 0x1000, Memsz: 0x315, Exec: true}}, 0x55ac147ce000, 0x55ac147cf000, 0x55ac147cd000, false},
		{"one RX segment from 0", []elfx.Load{{Memsz: 0x5000, Exec: true}, {Vaddr: 0x6000, Offset: 0x5000, Memsz: 0x100}}, 0x7f0000000000, 0x7f0000005000, 0x7f0000000000, false},
		{"text not page aligned", []elfx.Load{{Memsz: 0x800}, {Vaddr: 0x1850, Offset: 0x850, Memsz: 0x2000, Exec: true}}, 0x7f0000001000, 0x7f0000004000, 0x7f0000000000, false},
		{"two exec segments, second mapped", []elfx.Load{{Vaddr: 0x1000, Memsz: 0x1000, Exec: true}, {Vaddr: 0x10000, Memsz: 0x3000, Exec: true}}, 0x7f0000010000, 0x7f0000013000, 0x7f0000000000, false},
		{"no exec segment", []elfx.Load{{Memsz: 0x800}}, 0x1000, 0x2000, 0, true},
	} {
		got, err := loadBias(c.loads, c.from, c.to)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("%s: loadBias = %#x, %v; want %#x, error %v", c.name, got, err, c.want, c.err)
		}
	}
}
