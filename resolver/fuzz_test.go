package resolver

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// FuzzParseObject feeds random bytes to the resolver as a module file: the
// ELF and DWARF parse and the lookups that follow must not panic.
func FuzzParseObject(f *testing.F) {
	if b, err := os.ReadFile("/bin/true"); err == nil {
		f.Add(b[:min(len(b), 8192)])
	}
	// A small program with DWARF, whole, when a compiler is there.
	if _, err := exec.LookPath("gcc"); err == nil {
		if b, err := os.ReadFile(buildFixtureLib(f)); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := parseObject(bytes.NewReader(data))
		if o == nil {
			if err == nil {
				t.Fatal("no object and no error")
			}
			return
		}
		o.warn = func(error) {}
		pcs := []uint64{0, 1, 0x1000, 0x401000, ^uint64(0)}
		for _, fn := range o.syms.funcs {
			pcs = append(pcs, fn.Value, fn.Value+fn.Size/2)
		}
		for _, s := range o.syms.text {
			pcs = append(pcs, s.lo, s.hi-1)
		}
		if o.dw != nil {
			for _, c := range o.dw.cus {
				pcs = append(pcs, c.lo, c.hi-1)
			}
		}
		for i, pc := range pcs {
			if i > 256 {
				break
			}
			name, file, line := o.lookup(pc)
			frameText(name, file, line, "/m", i%2 == 0)
		}
		loadBias(o.loads, 0x7f0000000000, 0x7f0000001000)
	})
}

// buildFixtureLib returns the path of resolvelib.c built with DWARF.
func buildFixtureLib(tb testing.TB) string {
	_, lib := buildFixture(tb, fixtureBuilds[1])
	return lib
}

// FuzzMapBuildIDs feeds random map text to the build id reader.
func FuzzMapBuildIDs(f *testing.F) {
	f.Add([]byte("55a9952c7000-55a9952cc000 r-xp 00000000 00:00 0    /tmp/prog build-id:6230b7479d8a746f86c72de907503205b265c309\n" +
		"7ffc99133000-7ffc99154000 rw-p 00000000 00:00 0   [stack]\n"))
	f.Add([]byte("1000-2000 r-xp 0 0 0 /a b build-id: build-id:x\n build-id:\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for path, id := range mapBuildIDs(data) {
			if path == "" || id == "" || strings.ContainsAny(id, " \t\n") {
				t.Fatalf("path %q id %q", path, id)
			}
		}
	})
}
