package preproc

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"rtrace/internal/trace"
	"rtrace/internal/wire"
)

func stream(t *testing.T, items ...trace.Item) []byte {
	var b bytes.Buffer
	w := wire.NewWriter(&b)
	for _, it := range items {
		if err := w.Write(it); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	return b.Bytes()
}

func readAll(t *testing.T, path string) []trace.Item {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd, err := wire.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out []trace.Item
	for {
		it, err := rd.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, it)
	}
}

const maps1 = `55d0c0000000-55d0c0001000 r--p 00000000 08:01 1 /bin/leaky
55d0c0001000-55d0c0002000 r-xp 00001000 08:01 1 /bin/leaky
7f0000000000-7f0000100000 r-xp 00028000 08:01 2 /usr/lib/x86_64-linux-gnu/libc.so.6
7ffd00000000-7ffd00001000 r-xp 00000000 00:00 0 [vdso]
`

// TestRunNamesAndMaps: NLIB is answered with the executable mappings of
// the maps, each once; a second run in the same directory never
// overwrites the first file.
func TestRunNamesAndMaps(t *testing.T) {
	dir := t.TempDir()
	scans := 0
	o := Options{Dir: dir, Maps: func(pid int) ([]byte, error) {
		if pid != 42 {
			t.Errorf("maps of pid %d, want 42", pid)
		}
		scans++
		if scans > 1 {
			return nil, errors.New("gone")
		}
		return []byte(maps1), nil
	}}
	in := stream(t, &trace.Header{Pid: 42, Process: "leaky"}, &trace.Library{Name: "*"},
		&trace.Call{Res: 1, Alloc: true, Name: "malloc", Size: 10, ID: 0x1000}, &trace.Library{Name: "*"})
	path, err := Run(bytes.NewReader(in), o)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) != "42-0.rtrace" {
		t.Errorf("first file %s, want 42-0.rtrace", path)
	}
	items := readAll(t, path)
	var maps []trace.Mapping
	calls := 0
	for _, it := range items {
		switch v := it.(type) {
		case *trace.Mapping:
			maps = append(maps, *v)
		case *trace.Call:
			calls++
		case *trace.Library:
			t.Error("NLIB passed through")
		}
	}
	if len(maps) != 2 || maps[0].Path != "/bin/leaky" || maps[0].From != 0x55d0c0001000 || maps[1].To != 0x7f0000100000 {
		t.Errorf("mappings %+v", maps)
	}
	if calls != 1 {
		t.Errorf("%d calls, want 1", calls)
	}
	scans = 0
	path2, err := Run(bytes.NewReader(in), o)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path2) != "42-1.rtrace" {
		t.Errorf("second file %s, want 42-1.rtrace", path2)
	}
	if len(readAll(t, path)) != len(items) {
		t.Error("first file changed")
	}
}

// TestRunTruncated: a stream cut short keeps what was whole and reports
// the cut.
func TestRunTruncated(t *testing.T) {
	in := stream(t, &trace.Header{Pid: 7}, &trace.Call{Res: 1, Alloc: true, Name: "malloc", Size: 10, ID: 0x1000},
		&trace.Call{Res: 1, Name: "free", ID: 0x1000})
	path, err := Run(bytes.NewReader(in[:len(in)-6]), Options{Dir: t.TempDir(), Maps: func(int) ([]byte, error) { return nil, errors.New("x") }})
	if err == nil {
		t.Fatal("no error for a truncated stream")
	}
	calls := 0
	for _, it := range readAll(t, path) {
		if _, ok := it.(*trace.Call); ok {
			calls++
		}
	}
	if calls < 1 {
		t.Errorf("%d whole calls kept, want at least 1", calls)
	}
}

func FuzzExecMappings(f *testing.F) {
	f.Add([]byte(maps1))
	f.Add([]byte("0-1 r-xp 0 0:0 0 /x\nzz-1 r-xp\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, m := range ExecMappings(data) {
			if m.Path == "" || m.Path[0] != '/' {
				t.Errorf("mapping without a path: %+v", m)
			}
		}
	})
}
