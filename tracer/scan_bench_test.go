package tracer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rtrace/internal/elfx"
	"rtrace/internal/testutil"
)

// benchModule opens the bench's build of a program (bench/build, when
// `make bench` built it) and a file holding its loadable bytes at their
// addresses, as /proc/PID/mem shows them at bias 0 (a sparse file).
func benchModule(b *testing.B, glob string) (*elfx.File, *os.File) {
	paths, _ := filepath.Glob(filepath.Join(testutil.Root(), "bench", "build", glob))
	if len(paths) == 0 {
		b.Skipf("no %s in bench/build: run make bench first", glob)
	}
	f, err := elfx.Open(paths[0])
	if err != nil {
		b.Fatal(err)
	}
	mem, err := os.Create(filepath.Join(b.TempDir(), "mem"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { mem.Close() })
	data, err := os.ReadFile(paths[0])
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range f.Loads {
		if _, err := mem.WriteAt(data[l.Offset:l.Offset+l.Filesz], int64(l.Vaddr)); err != nil {
			b.Fatal(err)
		}
	}
	return f, mem
}

// BenchmarkScanModule decodes every function of sqlite3 and plans its
// detours as at an exec stop: the largest part of the set-up of a big
// program.
func BenchmarkScanModule(b *testing.B) {
	f, mem := benchModule(b, "sqlite3-plain-*/sqlite3")
	cands, _ := exeCands(f, nil, true, false, nil, nil, nil)
	size := scratchSize(len(cands)+len(f.Imports)+hookSlots) + cloneRoom
	hi := uint64(0)
	for _, l := range f.Loads {
		hi = max(hi, l.Vaddr+l.Memsz)
	}
	scratch := scratchPlaces(f.MinVaddr(), hi, size)[0] // next to the module, as plantFuncs maps it
	b.ResetTimer()
	for range b.N {
		cm := scanModule(mem, f, 0, nil)
		p := planFuncs(cm, cands, scratch, size, f.Entry, true,
			&fastCode{table: 0x7e0000000000, rdfsbase: true, clones: true, stops: func(cand) bool { return false }})
		if len(p.entries) < len(cands)/2 {
			b.Fatalf("%d of %d functions planned", len(p.entries), len(cands))
		}
	}
}

// BenchmarkDecode decodes every function of Lua and sqlite3 as at an exec
// stop (scanModule), without planning.
func BenchmarkDecode(b *testing.B) {
	for _, glob := range []string{"lua-plain-*/src/lua", "sqlite3-plain-*/sqlite3"} {
		b.Run(strings.SplitN(glob, "-", 2)[0], func(b *testing.B) {
			f, mem := benchModule(b, glob)
			for b.Loop() {
				scanModule(mem, f, 0, nil)
			}
		})
	}
}
