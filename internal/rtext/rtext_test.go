package rtext

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"rtrace/internal/trace"
)

// readAll decodes text into items.
func readAll(t testing.TB, text string) []trace.Item {
	t.Helper()
	items, err := decode([]byte(text))
	if err != nil {
		t.Fatalf("reading: %v", err)
	}
	return items
}

func decode(data []byte) ([]trace.Item, error) {
	rd := NewReader(bytes.NewReader(data))
	var items []trace.Item
	for {
		it, err := rd.Next()
		if err == io.EOF {
			return items, nil
		}
		if err != nil {
			return items, err
		}
		items = append(items, it)
	}
}

func encode(t testing.TB, items []trace.Item) string {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, it := range items {
		if err := w.Write(it); err != nil {
			t.Fatalf("writing %T: %v", it, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// goldenDir holds sp-rtrace's post-processor golden files; the text codec
// reads them from the post-processor's test data rather than a copy.
var goldenDir = filepath.Join("..", "..", "postproc", "testdata", "sp-rtrace-postproc")

func testdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goldenDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestGolden: text read and written again is what sp-rtrace-postproc
// printed for it with no options (module lines below the mappings).
func TestGolden(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"sample.txt", "sample.txt."},
		{"sample.txt.", "sample.txt."},
		{"sample.txt..r", "sample.txt..r"},
		{"sample.txt.lc.", "sample.txt.lc."},
	} {
		got := encode(t, readAll(t, testdata(t, tc.in)))
		if want := testdata(t, tc.want); got != want {
			t.Errorf("%s: got\n%s\nwant\n%s", tc.in, got, want)
		}
	}
}

func TestReadSample(t *testing.T) {
	items := readAll(t, testdata(t, "sample.txt"))
	h := items[0].(*trace.Header)
	wantTime := time.Date(2011, 6, 16, 15, 49, 48, 0, time.Local)
	if h.Version != "2.0" || h.Arch != "i686" || !h.Time.Equal(wantTime) || h.Process != "../bin/shmseg_test" ||
		h.Pid != 17913 || h.Filter != nil || h.Depth != 10 || h.Origin != "sp-rtrace 1.6" {
		t.Errorf("header %+v", h)
	}
	if m := items[2].(*trace.Module); *m != (trace.Module{ID: 1, Name: "shmsysv", Major: 1, Minor: 0}) {
		t.Errorf("module %+v", m)
	}
	if r := items[3].(*trace.Resource); *r != (trace.Resource{ID: 1, Name: "segment", Desc: "shared memory segment", Refcount: true}) {
		t.Errorf("resource %+v", r)
	}
	if r := items[5].(*trace.Resource); r.ID != 3 || r.Refcount || r.Name != "control" {
		t.Errorf("resource %+v", r)
	}
	if m := items[6].(*trace.Mapping); *m != (trace.Mapping{From: 0x136000, To: 0x28d000, Path: "/lib/libc-2.12.1.so"}) {
		t.Errorf("mapping %+v", m)
	}
	var calls []*trace.Call
	for _, it := range items {
		if c, ok := it.(*trace.Call); ok {
			calls = append(calls, c)
		}
	}
	if len(calls) != 7 {
		t.Fatalf("%d calls, want 7", len(calls))
	}
	c := calls[1]
	clock := 14*time.Hour + 54*time.Minute + 26*time.Second + 319*time.Millisecond
	if c.Index != 2 || c.Time != clock || c.Name != "shmat" || c.Res != 2 || !c.Alloc || c.Size != 1024 ||
		c.ID != 0xb7700000 || len(c.Frames) != 6 || c.Frames[0] != (trace.Frame{Addr: 0x804854a}) ||
		!reflect.DeepEqual(c.Args, []trace.Arg{{Name: "shmid", Value: "0x1088018"}, {Name: "cpid", Value: "17913"}}) {
		t.Errorf("call 2: %+v", c)
	}
	c = calls[3]
	if c.Index != 4 || c.Name != "shmctl" || c.Res != 3 || c.Alloc || c.ID != 0x1088018 || c.Frames != nil ||
		!reflect.DeepEqual(c.Args, []trace.Arg{{Name: "cmd", Value: "IPC_RMID"}}) {
		t.Errorf("call 4: %+v", c)
	}
}

// TestSharedFrames: calls without frames of their own share the next
// block, as compressed output is written; "# " summaries are dropped.
func TestSharedFrames(t *testing.T) {
	text := "version=2.0, pid=1, \n<1> : memory (bytes)\n" +
		"1. @3 malloc(16) = 0x10\n\t$a = 1\n2. malloc(16) = 0x20\n\t$b = 2\n" +
		"# allocation summary: 2 block(s) with total size 32\n\t0x400 main() at x.c:3\n\t0x401\n\n" +
		"3. free(0x10)\n\n4. free(0x20)\n## a comment\n5. free(0x30)\n\t0x500\n6. free(0x40)\n"
	items := readAll(t, text)
	var got []string
	for _, it := range items[2:] {
		switch it := it.(type) {
		case *trace.Call:
			got = append(got, strings.TrimSpace(strings.Join([]string{it.Name, fmtFrames(it.Frames), fmtArgs(it.Args)}, " ")))
		case *trace.Comment:
			got = append(got, "#"+it.Text)
		}
	}
	want := []string{"malloc 400,401 a", "malloc 400,401 b", "free", "free", "### a comment", "free 500", "free"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	c := items[2].(*trace.Call)
	if c.Context != 3 || c.Frames[0].Text != "main() at x.c:3" || c.Res != 1 {
		t.Errorf("call 1: %+v", c)
	}
	// Each call owns its frames.
	c.Frames[0].Text = "changed"
	if items[3].(*trace.Call).Frames[0].Text != "main() at x.c:3" {
		t.Error("calls share one frame slice")
	}
}

func fmtFrames(fs []trace.Frame) string {
	var s []string
	for _, f := range fs {
		s = append(s, strconv.FormatUint(f.Addr, 16))
	}
	return strings.Join(s, ",")
}

func fmtArgs(as []trace.Arg) string {
	var s []string
	for _, a := range as {
		s = append(s, a.Name)
	}
	return strings.Join(s, ",")
}

// TestCallLines: names with "::", "<", "(" and the forms that are not
// calls (they read back as comments).
func TestCallLines(t *testing.T) {
	res := []*trace.Resource{{ID: 1, Name: "memory"}, {ID: 2, Name: "fd"}, {ID: 3, Name: "a<fd"}}
	for _, tc := range []struct {
		line string
		want *trace.Call // nil: not a call
	}{
		{"1. malloc(16) = 0x10", &trace.Call{Index: 1, Time: -1, Name: "malloc", Res: 1, Alloc: true, Size: 16, ID: 0x10}},
		{"12. @1f [00:00:01.002] operator new[](unsigned long)<memory>(8) = 0xA0",
			&trace.Call{Index: 12, Context: 0x1f, Time: time.Second + 2*time.Millisecond, Name: "operator new[](unsigned long)", Res: 1, Alloc: true, Size: 8, ID: 0xa0}},
		{"3. std::vector<int>::push_back<fd>(0x3)", &trace.Call{Index: 3, Time: -1, Name: "std::vector<int>::push_back", Res: 2, ID: 3}},
		{"3. std::allocator<int>(0x3)", &trace.Call{Index: 3, Time: -1, Name: "std::allocator<int>", Res: 1, ID: 3}},
		{"3. x<a<fd>(0x3)", &trace.Call{Index: 3, Time: -1, Name: "x<a", Res: 2, ID: 3}},
		{"3. x<<>(0x3)", &trace.Call{Index: 3, Time: -1, Name: "x<<>", Res: 1, ID: 3}},
		{"4. @0 f(0x1)", &trace.Call{Index: 4, Time: -1, Name: "@0 f", Res: 1, ID: 1}},
		{"5. [1:2:3] f(0x1)", &trace.Call{Index: 5, Time: -1, Name: "[1:2:3] f", Res: 1, ID: 1}},
		{"6. f(-1) = 0x1", &trace.Call{Index: 6, Time: -1, Name: "f", Res: 1, Alloc: true, Size: 1<<64 - 1, ID: 1}},
		{"7. f(0x1) trailing", nil},
		{"7. f(1) = 0x1 trailing", nil},
		{"7. f(1) = 1", nil},
		{"7. f(x)", nil},
		{"7. (0x1)", nil},
		{"7. <memory>(0x1)", nil},
		{"x. f(0x1)", nil},
		{"7.f(0x1)", nil},
		{"7. f(0x10000000000000000)", nil},
	} {
		got, ok := parseCall(tc.line, res)
		if !ok {
			got = nil
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: got %+v, want %+v", tc.line, got, tc.want)
		}
	}
}

func TestWriterRestypeAndGroup(t *testing.T) {
	h := &trace.Header{Version: "2.0", Pid: 7, Depth: -1, Filter: []string{"leaks", "compress"}}
	one := []trace.Item{h, &trace.Resource{ID: 1, Name: "memory", Desc: "bytes"}, &trace.Module{ID: 1, Name: "memory", Major: 1},
		&trace.Call{Index: 1, Res: 1, Time: -1, Name: "malloc", Alloc: true, Size: 3, ID: 0x10}}
	want := "version=2.0, pid=7, filter=leaks|compress, \n<1> : memory (bytes)\n## tracing module: [1] memory (1.0)\n1. malloc(3) = 0x10\n\n"
	if got := encode(t, one); got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}

	var buf bytes.Buffer
	w := NewWriter(&buf)
	w.Write(h)
	w.Write(&trace.Resource{ID: 1, Name: "memory", Desc: "bytes"})
	w.Write(&trace.Resource{ID: 2, Name: "fd", Desc: "file descriptors", Refcount: true})
	w.WriteGroup([]*trace.Call{
		{Index: 1, Res: 1, Time: -1, Name: "malloc", Alloc: true, Size: 3, ID: 0x10, Args: []trace.Arg{{Name: "a", Value: "b"}}},
		{Index: 2, Res: 2, Time: -1, Name: "close", ID: 3, Frames: []trace.Frame{{Addr: 1}}},
	}, "# allocation summary: 2 block(s) with total size 3", []trace.Frame{{Addr: 0x400, Text: "main()"}})
	w.Close()
	want = "version=2.0, pid=7, filter=leaks|compress, \n<1> : memory (bytes)\n<2> : fd (file descriptors) [refcount]\n" +
		"1. malloc<memory>(3) = 0x10\n\t$a = b\n2. close<fd>(0x3)\n# allocation summary: 2 block(s) with total size 3\n\t0x400 main()\n\n"
	if buf.String() != want {
		t.Errorf("group: got\n%s\nwant\n%s", buf.String(), want)
	}
}

func TestNotText(t *testing.T) {
	for _, in := range []string{"", "\xf0\x10\x02\x00", "hello world\n1. f(0x1)\n"} {
		items, err := decode([]byte(in))
		var se *SyntaxError
		if in == "" {
			if err != nil || len(items) != 0 {
				t.Errorf("empty input: %v %v", items, err)
			}
			continue
		}
		if !errors.As(err, &se) || se.Line != 1 || len(items) != 0 {
			t.Errorf("%q: items %v, error %v", in, items, err)
		}
	}
}

func TestLongLine(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	items := readAll(t, "pid=1\n"+long+"\n1. f(0x"+strings.Repeat("0", 100<<10)+"1)")
	if len(items) != 3 || items[1].(*trace.Comment).Text != long || items[2].(*trace.Call).ID != 1 {
		t.Errorf("long lines: %d items", len(items))
	}
}

// TestTaskRoundTrip: a task event written as a "## task" line reads back as
// the event (the pprof encoder needs the process's end from text), and a
// line that only starts like one stays a comment.
func TestTaskRoundTrip(t *testing.T) {
	var b strings.Builder
	w := NewWriter(&b)
	for _, it := range []trace.Item{
		&trace.Header{Version: "3.0", Arch: "x86_64", Process: "p", Pid: 42},
		&trace.Task{Time: 1234, Tid: 42, Pid: 42, Exit: true},
		&trace.Task{Time: 1235, Tid: 43, Pid: 43, PPid: 42},
		&trace.Comment{Text: "## task 42 (pid 42) exited at soon"},
		&trace.Usage{Pid: 42, PeakRSS: 17 << 20},
	} {
		if err := w.Write(it); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rd := NewReader(strings.NewReader(b.String()))
	var got []trace.Item
	for {
		it, err := rd.Next()
		if err != nil {
			break
		}
		got = append(got, it)
	}
	if len(got) != 5 {
		t.Fatalf("read %d items from:\n%s", len(got), b.String())
	}
	if u, ok := got[4].(*trace.Usage); !ok || *u != (trace.Usage{Pid: 42, PeakRSS: 17 << 20}) {
		t.Errorf("item 4 = %#v, want the usage", got[4])
	}
	if task, ok := got[1].(*trace.Task); !ok || *task != (trace.Task{Time: 1234, Tid: 42, Pid: 42, Exit: true}) {
		t.Errorf("item 1 = %#v, want the task exit", got[1])
	}
	if task, ok := got[2].(*trace.Task); !ok || *task != (trace.Task{Time: 1235, Tid: 43, Pid: 43, PPid: 42}) {
		t.Errorf("item 2 = %#v, want the fork", got[2])
	}
	if _, ok := got[3].(*trace.Comment); !ok {
		t.Errorf("item 3 = %#v, want a comment", got[3])
	}
}
