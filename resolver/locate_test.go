package resolver

import (
	"bufio"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"rtrace/internal/testutil"
	"rtrace/internal/trace"
)

// TestLocate resolves the fixture's return addresses into pieces: the
// function, full source path and line Frame shows, and the mapping with
// the file offset /proc/pid/maps gives for it.
func TestLocate(t *testing.T) {
	src := func(name string) string { return filepath.Join(testutil.Root(), "testdata", name) }
	for _, b := range fixtureBuilds {
		t.Run(b.name, func(t *testing.T) {
			run := runFixture(t, b)
			r := run.resolver(Options{}, nil) // base names in Frame; Locate has full paths
			offsets := mapOffsets(t, run.exe)
			for _, c := range []struct {
				tag, fn, file, marker, module string
			}{
				{"mid", "mid", "resolve.c", "mid-call", run.exe},
				{"inlined", "twice", "resolve.c", "inlined-call", run.exe},
				{"main-lib", "main", "resolve.c", "main-lib", run.exe},
				{"lib", "lib_entry", "resolvelib.c", "lib-call", run.lib},
			} {
				addr := run.rets[c.tag]
				got := r.Locate(addr)
				want := trace.Location{Func: c.fn, File: src(c.file), Line: markerLine(t, c.file, c.marker), Module: c.module}
				if got.Func != want.Func || got.File != want.File || got.Line != want.Line || got.Module != want.Module {
					t.Errorf("Locate(%#x) (%s) = %+v, want %+v", addr, c.tag, got, want)
				}
				if addr < got.Start || addr >= got.Limit {
					t.Errorf("Locate(%#x) (%s): mapping [%#x, %#x) does not hold it", addr, c.tag, got.Start, got.Limit)
				}
				if off, ok := offsets[c.module]; !ok || got.Offset != off {
					t.Errorf("Locate(%#x) (%s): Offset %#x, /proc/pid/maps says %#x (known: %v)", addr, c.tag, got.Offset, off, ok)
				}
				// The answer is shared with Frame.
				if f, w := r.Frame(addr), wantFrames(t)[c.tag]; f != w {
					t.Errorf("Frame(%#x) after Locate = %q, want %q", addr, f, w)
				}
			}
			if got := r.Locate(0x10); got != (trace.Location{}) {
				t.Errorf("Locate(0x10), in no mapping = %+v, want zero", got)
			}
		})
	}
}

// TestLocateModuleOnly: a module without symbols gives its mapping and no
// function.
func TestLocateModuleOnly(t *testing.T) {
	run := runFixture(t, fixtureBuilds[0])
	exe := filepath.Join(t.TempDir(), "exe")
	stripCopy(t, run.exe, exe)
	r := run.resolver(Options{DebugDirs: []string{}}, map[string]string{run.exe: exe})
	got := r.Locate(run.rets["mid"])
	if got.Module != exe || got.Func != "" || got.File != "" || got.Line != 0 {
		t.Errorf("Locate in a stripped file = %+v, want module %s only", got, exe)
	}
}

// mapOffsets runs the fixture again and returns the file offset of each
// module's r-xp mapping: the same in every run, whatever ASLR does.
func mapOffsets(t *testing.T, exe string) map[string]uint64 {
	t.Helper()
	offsets := map[string]uint64{}
	sc := bufio.NewScanner(strings.NewReader(testutil.Run(t, "", exe)))
	for sc.Scan() {
		// map from-to perms offset dev inode path
		f := strings.Fields(sc.Text())
		if len(f) < 7 || f[0] != "map" {
			continue
		}
		off, err := strconv.ParseUint(f[3], 16, 64)
		if err != nil {
			t.Fatalf("fixture maps line %q: %v", sc.Text(), err)
		}
		offsets[strings.Join(f[6:], " ")] = off
	}
	return offsets
}
