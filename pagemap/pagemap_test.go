package pagemap

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rtrace/internal/rtext"
	"rtrace/internal/trace"
)

// TestSample: the reports of testdata/sample, a made-up sp-rtrace text
// trace with a page map in the original module's layout, written by the
// original sp-rtrace-pagemap and compared (docs/REPORTS.md, "Page maps"):
// these goldens are its output but for what rtrace does otherwise on
// purpose: the blocks freed in the trace are not drawn (call 7, so the
// heap's first page is ' ' in -d and its lowest block is call 2), "in
// RAM" counts the pages present (the original counted all but the
// swapped), and a frame's name is in one pair of parentheses.
func TestSample(t *testing.T) {
	for _, c := range []struct {
		golden string
		o      Options
	}{
		{"pages.golden", Options{Report: Pages, Summary: true, Top: 2, Bottom: 2}},
		{"density.golden", Options{Report: Density}},
		{"count.golden", Options{Report: Count, Summary: true, Name: "heap"}},
	} {
		f, err := os.Open("testdata/sample/trace.txt")
		if err != nil {
			t.Fatal(err)
		}
		d, err := Read(rtext.NewReader(f), "testdata/sample")
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := Write(&b, d, c.o); err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("testdata/sample", c.golden))
		if err != nil {
			t.Fatal(err)
		}
		if b.String() != string(want) {
			t.Errorf("%s: got\n%s\nwant\n%s", c.golden, b.String(), want)
		}
	}
}

// TestMarks: each page's character, with and without the kernel's flags.
func TestMarks(t *testing.T) {
	a := &Area{From: 0x10000, To: 0x10000 + 9*pageSize, Perm: "rw-p", Pages: []trace.Page{
		{},                       // not present: clean
		{Info: trace.PageZero},   // not present, zero
		{Info: trace.PageMemory}, // anonymous in RAM: dirty
		{Info: trace.PageMemory | trace.PageZero},
		{Info: trace.PageMemory | trace.PageFile}, // page cache: clean
		{Info: trace.PageSwap},
		{Info: trace.PageSwap | trace.PageZero},
		{Info: trace.PageMemory, Kernel: true, KFlags: 1 << 3},                              // uptodate only: clean
		{Info: trace.PageMemory | trace.PageFile, Kernel: true, KFlags: 1 << 4, KCount: 12}, // dirty
	}}
	if got, want := a.marks(Pages), ". #0.SZ.#"; got != want {
		t.Errorf("pages %q, want %q", got, want)
	}
	a.Pages[2].Info |= trace.PageExclusive
	if got, want := a.marks(Count), "001++000*"; got != want {
		t.Errorf("count %q, want %q", got, want)
	}
	// Density: 100 bytes, and half of a block of three pages from the
	// page's middle (5: 2,148 bytes); two pages of it; its last half page
	// and a block of 410 bytes that starts in the page before, counted
	// here, where the carried part ends (6: 2,458 bytes).
	a.Blocks = []*Block{{&trace.Call{ID: 0x10000, Size: 100}}, {&trace.Call{ID: 0x10000 + pageSize/2, Size: 3 * pageSize}}, {&trace.Call{ID: 0x10000 + 2*pageSize, Size: 410}}}
	if got, want := a.marks(Density), "5##6     "; got != want {
		t.Errorf("density %q, want %q", got, want)
	}
}

// TestFilterFlags: page-types' view of the kernel's flags.
func TestFilterFlags(t *testing.T) {
	for in, want := range map[uint64]uint64{
		1<<7 | 1<<35 | 1<<6:   1<<7 | 1<<49 | 1<<50, // a slab's private and active are slob_free and slub_frozen
		1 << 9:                1 << 48,              // reclaim without writeback: readahead
		1<<9 | 1<<8:           1<<9 | 1<<8,
		1<<33 | 1<<3:          1 << 3, // the hackers' bits go
		1<<15 | 1<<12:         1 << 12,
		1<<15 | 1<<17 | 1<<12: 1<<15 | 1<<17 | 1<<12,
	} {
		if got := filterFlags(in); got != want {
			t.Errorf("filterFlags(%#x) = %#x, want %#x", in, got, want)
		}
	}
}

// TestReadErrors: a trace without a page map, files that are not there
// or not whole say so.
func TestReadErrors(t *testing.T) {
	dir := t.TempDir()
	read := func(text string) error {
		_, err := Read(rtext.NewReader(strings.NewReader(text)), dir)
		return err
	}
	head := "version=3.3, arch=x86_64, timestamp=2026.11.28 10:00:00, process=p, pid=1, \n"
	if err := read(head); err == nil || !strings.Contains(err.Error(), "--module pagemap") {
		t.Errorf("no page map: %v", err)
	}
	withFiles := head + "& maps : m\n& pageflags : f\n"
	if err := read(withFiles); err == nil || !strings.Contains(err.Error(), "is not there") {
		t.Errorf("no files: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "m"), []byte("1000-3000 rw-p 00000000 00:00 0\n"), 0o644)
	var h [headerSize]byte
	binary.LittleEndian.PutUint64(h[0:], 0x1000)
	binary.LittleEndian.PutUint64(h[8:], 0x3000)
	binary.LittleEndian.PutUint64(h[16:], 3*recordSize) // 2 pages
	os.WriteFile(filepath.Join(dir, "f"), h[:], 0o644)
	if err := read(withFiles); err == nil || !strings.Contains(err.Error(), "not whole") {
		t.Errorf("a bad header: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "m"), []byte("3000-1000 rw-p\n"), 0o644)
	if err := read(withFiles); err == nil || !strings.Contains(err.Error(), "not a maps line") {
		t.Errorf("a bad maps line: %v", err)
	}
}

// FuzzPageMap: any maps and pageflags files read without a panic, and
// every report of what they give is drawn.
func FuzzPageMap(f *testing.F) {
	maps, _ := os.ReadFile("testdata/sample/1234-pagemap-maps-0")
	flags, _ := os.ReadFile("testdata/sample/1234-pagemap-pageflags-0")
	f.Add(maps, flags)
	f.Add([]byte("1000-2000 rw-p 0 0 0\n"), []byte{})
	f.Fuzz(func(t *testing.T, maps, flags []byte) {
		areas, err := ParseMaps(maps)
		if err != nil {
			return
		}
		pages := 0
		for _, a := range areas {
			if pages += a.size(); pages > 1<<16 {
				return // a report would draw too many pages
			}
		}
		kernel, _ := placePages(areas, flags)
		d := &Data{Areas: areas, Kernel: kernel}
		for _, r := range []string{Pages, Density, Count} {
			if err := Write(&bytes.Buffer{}, d, Options{Report: r, Summary: true, Top: 1, Bottom: 1}); err != nil {
				t.Fatal(err)
			}
		}
	})
}
