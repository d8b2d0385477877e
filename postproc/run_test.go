package postproc

import (
	"errors"
	"io"
	"strings"
	"testing"

	"rtrace/internal/rtext"
	"rtrace/internal/trace"
)

const head = "version=2.0, pid=1, \n"

// leakTrace exercises the leak rules: a non-refcount type (memory) and a
// refcount one (object).
const leakTrace = head + "<1> : memory (bytes)\n<2> : object (refs) [refcount]\n" +
	"1. malloc<memory>(10) = 0x10\n\t0x1\n\n" + // key taken over by 2: stays a leak
	"2. malloc<memory>(20) = 0x10\n\t0x1\n\n" +
	"3. free<memory>(0x10)\n\n" +
	"4. ref<object>(1) = 0x20\n\t0x2\n\n" +
	"5. ref<object>(1) = 0x20\n\t0x3\n\n" + // a reference more: dropped
	"6. unref<object>(0x20)\n\n" +
	"## between\n" +
	"7. malloc<memory>(30) = 0x30\n\t0x1\n\n" +
	"8. free<memory>(0x99)\n\n"

func TestLeaks(t *testing.T) {
	got := process(t, leakTrace, Options{Leaks: true})
	want := "version=2.0, pid=1, filter=leaks, \n<1> : memory (bytes)\n<2> : object (refs) [refcount]\n" +
		"1. malloc<memory>(10) = 0x10\n\t0x1\n\n" +
		"4. ref<object>(1) = 0x20\n\t0x2\n\n" +
		"## between\n" +
		"7. malloc<memory>(30) = 0x30\n\t0x1\n\n" +
		"# Resource - memory (bytes):\n# 2 block(s) leaked with total size of 40 bytes\n" +
		"# Resource - object (refs):\n# 1 block(s) leaked with total size of 1 bytes\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestCompress(t *testing.T) {
	got := process(t, leakTrace, Options{Leaks: true, Compress: true})
	want := "version=2.0, pid=1, filter=leaks|compress, \n<1> : memory (bytes)\n<2> : object (refs) [refcount]\n" +
		"4. ref<object>(1) = 0x20\n# allocation summary: 1 block(s) with total size 1\n\t0x2\n\n" +
		"1. malloc<memory>(10) = 0x10\n7. malloc<memory>(30) = 0x30\n# allocation summary: 2 block(s) with total size 40\n\t0x1\n\n" +
		"## between\n" + // read after call 6: after the group of call 1, not inside it
		"# Resource - memory (bytes):\n# 2 block(s) leaked with total size of 40 bytes\n" +
		"# Resource - object (refs):\n# 1 block(s) leaked with total size of 1 bytes\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	// Read back, the groups are calls in call order again, and -l -c
	// gives the same report.
	if again := process(t, got, Options{Leaks: true, Compress: true}); again != got {
		t.Errorf("-lc of -lc output: got\n%s\nwant\n%s", again, got)
	}
	plain := process(t, got, Options{})
	if want := "version=2.0, pid=1, filter=leaks, \n<1> : memory (bytes)\n<2> : object (refs) [refcount]\n" +
		"1. malloc<memory>(10) = 0x10\n\t0x1\n\n4. ref<object>(1) = 0x20\n\t0x2\n\n7. malloc<memory>(30) = 0x30\n\t0x1\n\n## between\n"; plain != want {
		t.Errorf("re-read: got\n%s\nwant\n%s", plain, want)
	}
}

func TestSortOrders(t *testing.T) {
	text := head + "1. a(1) = 0x1\n\t0x1\n\n2. b(5) = 0x2\n\t0x2\n\n3. c(2) = 0x3\n\t0x3\n\n4. d(2) = 0x4\n\t0x3\n\n5. e(1) = 0x5\n\t0x3\n\n"
	for _, tc := range []struct{ sort, want string }{
		{"", "a b c,d,e"}, // size-asc: 1, 5, 5 (ties keep order)
		{SortSizeAsc, "a b c,d,e"},
		{SortSize, "b c,d,e a"},
		{SortCount, "c,d,e a b"},
		{SortCountAsc, "a b c,d,e"},
	} {
		out := process(t, text, Options{Compress: true, Sort: tc.sort})
		var groups []string
		var names []string
		for _, line := range strings.Split(out, "\n") {
			switch {
			case len(line) > 3 && line[0] >= '1' && line[0] <= '9':
				names = append(names, line[3:4])
			case strings.HasPrefix(line, "# allocation summary"):
				groups = append(groups, strings.Join(names, ","))
				names = nil
			}
		}
		if got := strings.Join(groups, " "); got != tc.want {
			t.Errorf("-s %q: groups %q, want %q", tc.sort, got, tc.want)
		}
	}
}

func TestSelections(t *testing.T) {
	text := head + "<1> : memory (bytes)\n<2> : fd (descriptors)\n@ 1 : one\n@ 2 : two\n" +
		": /lib/libx.so => 0x1000-0x2000\n" +
		"1. malloc<memory>(1) = 0x1\n\t$a = b\n\t0x1010\n\t0x9000\n\n" +
		"2. @1 open<fd>(1) = 0x3\n\t0x9010\n\t0x1500\n\n" +
		"3. @2 malloc<memory>(2) = 0x2\n\t0x9020\n\n" +
		"4. @3 close<fd>(0x3)\n\n"
	calls := func(opts Options) string {
		var idx []string
		for _, line := range strings.Split(process(t, text, opts), "\n") {
			if len(line) > 2 && line[1] == '.' {
				idx = append(idx, line[:1])
			}
		}
		return strings.Join(idx, "")
	}
	one, zero := uint32(1), uint32(0)
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"none", Options{}, "1234"},
		{"-C 1", Options{Context: &one}, "24"},
		{"-C 0", Options{Context: &zero}, "1"},
		{"-R 2", Options{Resource: 2}, "24"},
		{"include", Options{Include: map[int]bool{1: true, 3: true}}, "13"},
		{"exclude", Options{Exclude: map[int]bool{1: true, 3: true}}, "24"},
		{"absolute range", Options{CallAddress: []AddrRange{{Start: 0x9010, Size: 0x11}}}, "23"},
		{"library range", Options{CallAddress: []AddrRange{{Lib: "libx.so", Start: 0x500, Size: 4}}}, "2"},
		{"-l -C 1", Options{Leaks: true, Context: &one}, ""}, // 2 is released by 4, out of context
	} {
		if got := calls(tc.opts); got != tc.want {
			t.Errorf("%s: calls %q, want %q", tc.name, got, tc.want)
		}
	}

	// -R with one type left: no "<restype>" (one type), the other line gone.
	out := process(t, text, Options{Resource: 2})
	if strings.Contains(out, "memory") || !strings.Contains(out, "2. @1 open(1) = 0x3\n") {
		t.Errorf("-R 2:\n%s", out)
	}
	// -C drops the other context lines; -b cuts frames and sets the depth;
	// -a drops arguments.
	two := 1
	out = process(t, text, Options{Context: &one, Depth: &two, RemoveArgs: true})
	if strings.Contains(out, "@ 2 : two") || !strings.Contains(out, "pid=1, backtrace depth=1, \n") ||
		!strings.Contains(out, "2. @1 open<fd>(1) = 0x3\n\t0x9010\n\n") {
		t.Errorf("-C 1 -b 1 -a:\n%s", out)
	}
	if out := process(t, text, Options{RemoveArgs: true}); strings.Contains(out, "$a") {
		t.Errorf("-a kept the arguments:\n%s", out)
	}
}

// TestCallAddressBias: a library range is link-time; it moves with the
// library's load bias, read from the ELF file.
func TestCallAddressBias(t *testing.T) {
	m := newAddrMatcher([]AddrRange{{Lib: "/usr/lib/libfoo.so.1", Start: 0x1a40, Size: 0x3c}})
	m.execVaddr = func(path string) (uint64, bool) { return 0x1000, path == "/usr/lib/libfoo.so.1" }
	m.addMapping(trace.Mapping{From: 0x7f0000001000, To: 0x7f0000005000, Path: "/usr/lib/libfoo.so.1"})
	m.addMapping(trace.Mapping{From: 0x1000, To: 0x5000, Path: "/usr/lib/libbar.so"})
	for addr, want := range map[uint64]bool{0x7f0000001a40: true, 0x7f0000001a7b: true, 0x7f0000001a7c: false, 0x1a40: false} {
		if got := m.match([]trace.Frame{{Addr: addr}}); got != want {
			t.Errorf("%#x: match %v, want %v", addr, got, want)
		}
	}
	// Without the file: a non-PIE object keeps its addresses.
	m = newAddrMatcher([]AddrRange{{Lib: "prog", Start: 0x8048500, Size: 0x10}})
	m.execVaddr = func(string) (uint64, bool) { return 0, false }
	m.addMapping(trace.Mapping{From: 0x8048000, To: 0x8049000, Path: "/tmp/prog"})
	if !m.match([]trace.Frame{{Addr: 0x8048505}}) {
		t.Error("non-PIE range not matched")
	}
}

// fakeResolver names every address.
type fakeResolver struct{ maps []trace.Mapping }

func (r *fakeResolver) AddMapping(m trace.Mapping) { r.maps = append(r.maps, m) }
func (r *fakeResolver) Frame(addr uint64) string   { return "f() from /lib/x" }

func TestResolve(t *testing.T) {
	text := head + ": /lib/x => 0x1000-0x2000\n1. malloc(1) = 0x1\n\t0x1010\n\t0x1020 known()\n\n"
	res := &fakeResolver{}
	got := process(t, text, Options{Resolve: true, Resolver: res})
	want := "version=2.0, pid=1, filter=resolve, \n: /lib/x => 0x1000-0x2000\n1. malloc(1) = 0x1\n\t0x1010 f() from /lib/x\n\t0x1020 known()\n\n"
	if got != want || len(res.maps) != 1 {
		t.Errorf("got\n%s\nwant\n%s(%d mappings)", got, want, len(res.maps))
	}
	err := Run(rtext.NewReader(strings.NewReader(text)), rtext.NewWriter(io.Discard), Options{Resolve: true})
	if !errors.Is(err, ErrNoResolver) {
		t.Errorf("no resolver: %v", err)
	}
}

// itemWriter collects items: a trace.Writer that is no GroupWriter.
type itemWriter struct {
	items  []trace.Item
	closed bool
}

func (w *itemWriter) Write(it trace.Item) error { w.items = append(w.items, it); return nil }
func (w *itemWriter) Close() error              { w.closed = true; return nil }

func TestGroupFallback(t *testing.T) {
	w := &itemWriter{}
	text := head + "1. a(1) = 0x1\n2. b(2) = 0x2\n\t0x5\n\n"
	if err := Run(rtext.NewReader(strings.NewReader(text)), w, Options{Compress: true}); err != nil {
		t.Fatal(err)
	}
	if len(w.items) != 4 || !w.closed {
		t.Fatalf("items %v, closed %v", w.items, w.closed)
	}
	if c := w.items[1].(*trace.Comment); c.Text != "# allocation summary: 2 block(s) with total size 3" {
		t.Errorf("summary %q", c.Text)
	}
	for _, it := range w.items[2:] {
		if c := it.(*trace.Call); len(c.Frames) != 1 || c.Frames[0].Addr != 5 {
			t.Errorf("call %+v", c)
		}
	}
}

// brokenReader yields items, then an error.
type brokenReader struct{ items []trace.Item }

var errCut = errors.New("stream cut")

func (r *brokenReader) Next() (trace.Item, error) {
	if len(r.items) == 0 {
		return nil, errCut
	}
	it := r.items[0]
	r.items = r.items[1:]
	return it, nil
}

// TestReadError: a stream cut short still gives its report, and the
// error; the report says so in its first line after the header (-l, -c:
// written at the end) or its last (streamed).
func TestReadError(t *testing.T) {
	items := func() []trace.Item {
		return []trace.Item{
			&trace.Header{Pid: 3, Depth: -1, Filter: []string{"compress", "resolve", "other"}},
			&trace.Call{Index: 1, Time: -1, Name: "malloc", Alloc: true, Size: 8, ID: 0x10},
		}
	}
	incomplete := func(it trace.Item) bool {
		c, ok := it.(*trace.Comment)
		return ok && strings.HasPrefix(c.Text, "## INCOMPLETE: the input ends early (stream cut)")
	}
	w := &itemWriter{}
	err := Run(&brokenReader{items: items()}, w, Options{Leaks: true})
	if !errors.Is(err, errCut) || len(w.items) != 3 || !w.closed || !incomplete(w.items[1]) {
		t.Fatalf("error %v, items %v", err, w.items)
	}
	ws := &itemWriter{}
	if err := Run(&brokenReader{items: items()[:1]}, ws, Options{}); !errors.Is(err, errCut) || len(ws.items) != 2 || !incomplete(ws.items[1]) {
		t.Errorf("streamed: error %v, items %v", err, ws.items)
	}
	if h := w.items[0].(*trace.Header); strings.Join(h.Filter, "|") != "leaks|resolve" {
		t.Errorf("filter %q", h.Filter)
	}
	for _, in := range []trace.Reader{&brokenReader{}, rtext.NewReader(strings.NewReader(""))} {
		w := &itemWriter{}
		if err := Run(in, w, Options{}); err == nil || len(w.items) != 0 {
			t.Errorf("%T: error %v for an input without header, wrote %v", in, err, w.items)
		}
	}
	in := &brokenReader{items: []trace.Item{&trace.Comment{Text: "x"}}}
	if err := Run(in, &itemWriter{}, Options{}); err == nil || !strings.Contains(err.Error(), "not a header") {
		t.Errorf("headless input: %v", err)
	}
}

// TestSortTravels: the order -s chose reaches the stages after it. The
// header names it (filter=...|sort-size); resolve's pass (Keep) and a
// later -c without -s keep it, a later -s changes it; sp-rtrace's default
// order (size-asc) is not named, so its golden files hold.
func TestSortTravels(t *testing.T) {
	in := "version=2.0, pid=1, \n<1> : memory (memory allocation in bytes)\n" +
		"1. malloc(100) = 0x1\n\t0x10\n\n2. malloc(5) = 0x2\n\t0x20\n\n3. malloc(6) = 0x3\n\t0x20\n\n4. malloc(7) = 0x4\n\t0x20\n\n"
	order := func(out string) string {
		var sizes []string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "# allocation summary:") {
				sizes = append(sizes, strings.Fields(l)[len(strings.Fields(l))-1])
			}
		}
		return strings.Join(sizes, ",")
	}
	bySize := process(t, in, Options{Leaks: true, Compress: true, Sort: SortSize})
	if !strings.Contains(bySize, "filter=leaks|compress|sort-size, ") || order(bySize) != "100,18" {
		t.Fatalf("-l -c -s size:\n%s", bySize)
	}
	if again := process(t, bySize, Options{Keep: true}); again != bySize {
		t.Errorf("resolve's pass re-sorted it:\n%s\nwas\n%s", again, bySize)
	}
	if o := order(process(t, bySize, Options{Compress: true})); o != "100,18" {
		t.Errorf("a later -c: %s", o)
	}
	if o := order(process(t, bySize, Options{Compress: true, Sort: SortCount})); o != "18,100" {
		t.Errorf("a later -c -s count: %s", o)
	}
	if def := process(t, in, Options{Leaks: true, Compress: true}); strings.Contains(def, "sort-") || order(def) != "18,100" {
		t.Errorf("the default order:\n%s", def)
	}
}
