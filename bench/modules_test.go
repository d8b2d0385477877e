package bench

import (
	"debug/elf"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"testing"

	"rtrace/internal/trace"
	"rtrace/internal/wire"
)

// module is an ELF file placed in a made-up address space, as the
// generated traces of BenchmarkPostprocLeaks and BenchmarkResolveFrames map
// it: its executable mapping (the r-xp line of /proc/pid/maps) and its
// functions at their run-time addresses.
type module struct {
	trace.Mapping
	funcs []addrSpan // sorted by lo
}

// addrSpan is [lo, hi) at run time.
type addrSpan struct{ lo, hi uint64 }

// pageSize is the x86-64 page size, the unit of ELF segment mappings.
const pageSize = 0x1000

// loadModule reads the file at path and places it at base (ignored for a
// non-PIE executable, which is mapped at its link-time addresses). keep,
// when set, selects the functions by symbol name.
func loadModule(path string, base uint64, keep func(name string) bool) (*module, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if f.Type == elf.ET_EXEC {
		base = 0
	}
	m := &module{}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			from := p.Vaddr &^ (pageSize - 1)
			to := (p.Vaddr + p.Memsz + pageSize - 1) &^ (pageSize - 1)
			m.Mapping = trace.Mapping{From: base + from, To: base + to, Path: path}
			break
		}
	}
	if m.To == 0 {
		return nil, fmt.Errorf("%s: no executable PT_LOAD segment", path)
	}
	syms, err := f.Symbols()
	if err != nil || len(syms) == 0 {
		syms, err = f.DynamicSymbols()
	}
	if err != nil {
		return nil, fmt.Errorf("%s: reading symbols: %w", path, err)
	}
	seen := map[uint64]bool{}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Size < 2 || seen[s.Value] {
			continue
		}
		if keep != nil && !keep(s.Name) {
			continue
		}
		lo := base + s.Value
		if lo < m.From || lo+s.Size > m.To {
			continue
		}
		seen[s.Value] = true
		m.funcs = append(m.funcs, addrSpan{lo, lo + s.Size})
	}
	if len(m.funcs) == 0 {
		return nil, fmt.Errorf("%s: no function symbols to take addresses from", path)
	}
	sort.Slice(m.funcs, func(i, j int) bool { return m.funcs[i].lo < m.funcs[j].lo })
	return m, nil
}

// returnAddrs picks up to n distinct return addresses inside m's functions:
// a function, then an address in (lo, hi], so that addr-1 (the call
// instruction, which is what the resolver looks up) is in the function. It
// returns fewer when the functions are smaller than n bytes in all.
func (m *module) returnAddrs(rng *rand.Rand, n int) []uint64 {
	var room uint64
	for _, f := range m.funcs {
		room += f.hi - f.lo
	}
	n = int(min(uint64(n), room))
	seen := map[uint64]bool{}
	out := make([]uint64, 0, n)
	for len(out) < n {
		f := m.funcs[rng.IntN(len(m.funcs))]
		a := f.lo + 1 + rng.Uint64N(f.hi-f.lo)
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}

// findLibc returns the path of the C library the fixtures run with, or
// skips the benchmark.
func findLibc(b *testing.B) string {
	b.Helper()
	for _, p := range []string{"/usr/lib/x86_64-linux-gnu/libc.so.6", "/lib64/libc.so.6", "/usr/lib64/libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	b.Skip("no x86-64 libc.so.6 found to place in the generated traces")
	return ""
}

// leakyFuncs are the functions of testdata/leaky.c (a clone such as
// small_block.constprop.0 included): their frames resolve to source lines.
func leakyFuncs(name string) bool {
	base, _, _ := strings.Cut(name, ".")
	switch base {
	case "main", "small_block", "zeroed_block", "grown_block", "make_block", "block_size":
		return true
	}
	return false
}

// writeMemoryPreamble writes what a memory trace has before its calls: the
// tracing modules, the memory resource type and the mappings of mods.
func writeMemoryPreamble(w *wire.Writer, mods []*module) error {
	items := []trace.Item{
		&trace.Module{ID: 0, Name: "main", Major: 1},
		&trace.Module{ID: 1, Name: "memory", Major: 1},
		&trace.Resource{ID: 1, Name: "memory", Desc: "memory allocation in bytes"},
	}
	for _, m := range mods {
		items = append(items, &m.Mapping)
	}
	for _, it := range items {
		if err := w.Write(it); err != nil {
			return err
		}
	}
	return nil
}
