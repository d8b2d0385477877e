package tracer

import (
	"os"
	"path/filepath"
	"testing"

	"rtrace/internal/elfx"
	"rtrace/internal/testutil"
)

// BenchmarkScanModule decodes every function of sqlite3 (bench/build, when
// `make bench` built it) as at an exec stop: the largest part of the
// set-up of a big program.
func BenchmarkScanModule(b *testing.B) {
	paths, _ := filepath.Glob(filepath.Join(testutil.Root(), "bench", "build", "sqlite3-plain-*", "sqlite3"))
	if len(paths) == 0 {
		b.Skip("no sqlite3 in bench/build: run make bench first")
	}
	f, err := elfx.Open(paths[0])
	if err != nil {
		b.Fatal(err)
	}
	// The memory of the process, as /proc/PID/mem shows it at bias 0: the
	// file's loadable bytes at their addresses (a sparse file).
	mem, err := os.Create(filepath.Join(b.TempDir(), "mem"))
	if err != nil {
		b.Fatal(err)
	}
	defer mem.Close()
	data, err := os.ReadFile(paths[0])
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range f.Loads {
		if _, err := mem.WriteAt(data[l.Offset:l.Offset+l.Filesz], int64(l.Vaddr)); err != nil {
			b.Fatal(err)
		}
	}
	cands, _ := exeCands(f, nil, true, false, nil)
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
			&fastCode{table: 0x7e0000000000, rdfsbase: true, clones: true, stops: func(string) bool { return false }})
		if len(p.entries) < len(cands)/2 {
			b.Fatalf("%d of %d functions planned", len(p.entries), len(cands))
		}
	}
}
