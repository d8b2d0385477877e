package preproc

import (
	"bytes"
	"errors"
	"fmt"
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
	paths, err := Run(bytes.NewReader(in), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 1 {
		t.Fatalf("files %v, want one", paths)
	}
	path := paths[0]
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
	paths2, err := Run(bytes.NewReader(in), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths2) != 1 || filepath.Base(paths2[0]) != "42-1.rtrace" {
		t.Errorf("second file %v, want 42-1.rtrace", paths2)
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
	paths, err := Run(bytes.NewReader(in[:len(in)-6]), Options{Dir: t.TempDir(), Maps: func(int) ([]byte, error) { return nil, errors.New("x") }})
	if err == nil {
		t.Fatal("no error for a truncated stream")
	}
	if len(paths) != 1 {
		t.Fatalf("files %v, want one", paths)
	}
	calls := 0
	for _, it := range readAll(t, paths[0]) {
		if _, ok := it.(*trace.Call); ok {
			calls++
		}
	}
	if calls < 1 {
		t.Errorf("%d whole calls kept, want at least 1", calls)
	}
}

const maps2 = `55d0c0000000-55d0c0001000 r-xp 00000000 08:01 3 /bin/other
`

// TestRunSplitsProcesses: each process of a stream gets its own file: a
// fork's child starts with its parent's mappings and its own calls (and
// its threads'), an exec starts a new file for the new image, an exit
// ends the process's file. A parent's leak is not hidden by its child's
// free of the copy.
func TestRunSplitsProcesses(t *testing.T) {
	dir := t.TempDir()
	in := stream(t, &trace.Header{Pid: 42, Process: "/bin/leaky"},
		&trace.Module{ID: 1, Name: "memory"}, &trace.Resource{ID: 1, Name: "memory"},
		&trace.Session{Pid: 42, SID: "a", Exe: "/bin/leaky", Maps: []byte(maps1)},
		&trace.Call{Tid: 42, Res: 1, Alloc: true, Name: "malloc", Size: 100, ID: 0x1000},
		&trace.Task{Tid: 43, Pid: 43, PPid: 42},
		&trace.Call{Tid: 43, Res: 1, Name: "free", ID: 0x1000},
		&trace.Task{Tid: 44, Pid: 43},
		&trace.Call{Tid: 44, Res: 1, Alloc: true, Name: "malloc", Size: 7, ID: 0x2000},
		&trace.Session{Pid: 43, SID: "b", Exe: "/bin/other", Maps: []byte(maps2)},
		&trace.Call{Tid: 43, Res: 1, Alloc: true, Name: "malloc", Size: 9, ID: 0x3000},
		&trace.Task{Tid: 43, Pid: 43, Exit: true},
		&trace.Call{Tid: 42, Res: 1, Alloc: true, Name: "calloc", Size: 5, ID: 0x4000},
		&trace.Library{Name: "*"})
	paths, err := Run(bytes.NewReader(in), Options{Dir: dir, Maps: func(int) ([]byte, error) { return nil, errors.New("gone") }})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	if fmt.Sprint(names) != "[42-0.rtrace 43-0.rtrace 43-1.rtrace]" {
		t.Fatalf("files %v", names)
	}
	type file struct {
		pid                int
		process            string
		preamble           int
		maps, calls, exits []string
	}
	want := []file{
		{42, "/bin/leaky", 2, []string{"/bin/leaky", "/usr/lib/x86_64-linux-gnu/libc.so.6"}, []string{"malloc 0x1000", "calloc 0x4000"}, nil},
		{43, "/bin/leaky", 2, []string{"/bin/leaky", "/usr/lib/x86_64-linux-gnu/libc.so.6"}, []string{"free 0x1000", "malloc 0x2000"}, nil},
		{43, "/bin/other", 2, []string{"/bin/other"}, []string{"malloc 0x3000"}, []string{"43"}},
	}
	for i, p := range paths {
		var got file
		for _, it := range readAll(t, p) {
			switch v := it.(type) {
			case *trace.Header:
				got.pid, got.process = v.Pid, v.Process
			case *trace.Module, *trace.Resource:
				got.preamble++
			case *trace.Mapping:
				got.maps = append(got.maps, v.Path)
			case *trace.Call:
				got.calls = append(got.calls, fmt.Sprintf("%s %#x", v.Name, v.ID))
			case *trace.Task:
				if v.Exit {
					got.exits = append(got.exits, fmt.Sprint(v.Pid))
				}
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want[i]) {
			t.Errorf("%s: %+v\nwant %+v", names[i], got, want[i])
		}
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

// FuzzRun: any stream, forks and execs included, splits without a panic
// and writes every file it names.
func FuzzRun(f *testing.F) {
	seed := func(items ...trace.Item) []byte {
		var b bytes.Buffer
		w := wire.NewWriter(&b)
		for _, it := range items {
			w.Write(it)
		}
		w.Close()
		return b.Bytes()
	}
	f.Add(seed(&trace.Header{Pid: 42}, &trace.Module{ID: 1, Name: "memory"},
		&trace.Session{Pid: 42, SID: "a", Exe: "/bin/x", Maps: []byte(maps1)},
		&trace.Task{Tid: 43, Pid: 43, PPid: 42}, &trace.Task{Tid: 44, Pid: 43},
		&trace.Call{Tid: 44, Res: 1, Alloc: true, Name: "malloc", Size: 1, ID: 1},
		&trace.Session{Pid: 43, SID: "b", Exe: "/bin/y", Maps: []byte(maps2)},
		&trace.Task{Tid: 43, Pid: 43, Exit: true}, &trace.Library{Name: "*"}))
	f.Add(seed(&trace.Header{Pid: 1}, &trace.Task{Tid: 1, Pid: 1, Exit: true}, &trace.Task{Tid: 1, Pid: 1, PPid: 1}))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		paths, _ := Run(bytes.NewReader(data), Options{Dir: dir, Maps: func(int) ([]byte, error) { return nil, errors.New("gone") }})
		if len(paths) > 1+len(data)/8 {
			t.Errorf("%d files from %d bytes", len(paths), len(data))
		}
		for _, p := range paths {
			if _, err := os.Stat(p); err != nil {
				t.Error(err)
			}
		}
	})
}
