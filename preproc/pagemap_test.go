package preproc

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"rtrace/internal/trace"
)

// TestPageMapFiles: a process's page map becomes sp-rtrace's two files,
// named in its trace: the maps as given, and for each writable mapping a
// header {from, to, size} before its first page and {info, kflags,
// kcount} a page, 24 bytes each; a second page map of the process gets
// the next number.
func TestPageMapFiles(t *testing.T) {
	dir := t.TempDir()
	sp := NewSplitter(Options{Dir: dir, Maps: func(int) ([]byte, error) { return nil, nil }})
	maps := "1000-3000 rw-p 00000000 00:00 0 [heap]\n4000-5000 r-xp 00000000 08:01 1 /bin/p\n"
	for _, it := range []trace.Item{
		&trace.Header{Version: "3.3", Pid: 7, Process: "p"},
		&trace.PageMap{Pid: 7, Maps: maps},
		&trace.PageFlags{Pid: 7, At: 0x1000, Pages: []trace.Page{{Info: trace.PageMemory | trace.PageZero}}},
		&trace.PageFlags{Pid: 7, At: 0x2000, Pages: []trace.Page{{Info: trace.PageMemory, Kernel: true, KFlags: 1 << 4, KCount: 2}}},
		&trace.PageMap{Pid: 7, Maps: maps},
	} {
		if err := sp.Write(it); err != nil {
			t.Fatal(err)
		}
	}
	paths, err := sp.Close()
	if err != nil || len(paths) != 1 {
		t.Fatalf("%v %v", paths, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "7-pagemap-maps-0")); err != nil || string(b) != maps {
		t.Errorf("maps %q %v", b, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "7-pagemap-pageflags-0"))
	if err != nil || len(b) != PageHeaderSize+2*PageRecordSize {
		t.Fatalf("pageflags: %d bytes, %v", len(b), err)
	}
	u64 := func(off int) uint64 { return binary.LittleEndian.Uint64(b[off:]) }
	if u64(0) != 0x1000 || u64(8) != 0x3000 || uint32(u64(16)) != 2*PageRecordSize {
		t.Errorf("header %x %x %x", u64(0), u64(8), u64(16))
	}
	r1, r2 := PageHeaderSize, PageHeaderSize+PageRecordSize
	if uint32(u64(r1)) != trace.PageMemory|trace.PageZero || u64(r1+8) != 0 || uint32(u64(r2)) != trace.PageMemory || u64(r2+8) != 1<<4 || uint32(u64(r2+16)) != 2 {
		t.Errorf("records % x", b[PageHeaderSize:])
	}
	if fi, err := os.Stat(filepath.Join(dir, "7-pagemap-pageflags-1")); err != nil || fi.Size() != 0 {
		t.Errorf("the second page map: %v", err)
	}
	var files []trace.File
	for _, it := range readAll(t, paths[0]) {
		if f, ok := it.(*trace.File); ok {
			files = append(files, *f)
		}
	}
	want := []trace.File{{Name: "maps", Path: "7-pagemap-maps-0"}, {Name: "pageflags", Path: "7-pagemap-pageflags-0"}, {Name: "maps", Path: "7-pagemap-maps-1"}, {Name: "pageflags", Path: "7-pagemap-pageflags-1"}}
	if len(files) != len(want) {
		t.Fatalf("files %v, want %v", files, want)
	}
	for i := range want {
		if files[i] != want[i] {
			t.Errorf("files %v, want %v", files, want)
		}
	}
}
