package postproc

import (
	"io"
	"strings"
	"testing"
	"time"

	"rtrace/internal/trace"
)

// TestHeapSummary: heaptrack's rules on a made-up trace. A release is a
// temporary allocation when the block's size and backtrace are the last
// allocation's, with no release since (accumulatedtracedata.cpp,
// lastAllocationPtr): so is one of two blocks of the same site freed
// after both were made. A release of an unknown block changes nothing; an
// allocation taking over a live id leaves the old block leaked, not live.
func TestHeapSummary(t *testing.T) {
	s := newHeapSummary()
	bt := func(a uint64) []trace.Frame { return []trace.Frame{{Addr: a}} }
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, it := range []trace.Item{
		&trace.Header{Version: "3.3"},
		&trace.Resource{ID: 1, Name: "memory"},
		&trace.Resource{ID: 2, Name: "file"},
		&trace.Call{Time: ms(1000), Res: 1, Alloc: true, Size: 16, ID: 0xa, Frames: bt(1)},
		&trace.Call{Time: ms(1001), Res: 1, ID: 0xa}, // temporary
		&trace.Call{Time: ms(1002), Res: 1, Alloc: true, Size: 16, ID: 0xb, Frames: bt(1)},
		&trace.Call{Time: ms(1003), Res: 1, Alloc: true, Size: 16, ID: 0xc, Frames: bt(1)},
		&trace.Call{Time: ms(1004), Res: 1, ID: 0xb}, // temporary: the key is the last allocation's
		&trace.Call{Time: ms(1005), Res: 1, ID: 0xc}, // a release since: not
		&trace.Call{Time: ms(1006), Res: 1, ID: 0xdead},
		&trace.Call{Time: ms(1007), Res: 2, Alloc: true, Size: 1, ID: 3}, // a file: not memory
		&trace.Call{Time: ms(1010), Res: 1, Alloc: true, Size: 3000, ID: 0xd, Frames: bt(2)},
		&trace.Call{Time: ms(1100), Res: 1, Alloc: true, Size: 500, ID: 0xd, Frames: bt(3)}, // takes 0xd over
		&trace.Usage{Pid: 1, PeakRSS: 4 << 20},
	} {
		if c, ok := it.(*trace.Call); ok {
			s.call(c)
		} else {
			s.item(it)
		}
	}
	want := `total runtime: 0.10s.
calls to allocation functions: 5 (50/s)
temporary memory allocations: 2 (20/s)
peak heap memory consumption: 3.00K after 0.010s
peak RSS (including rtrace overhead): 4.19M
total memory leaked: 3.50K in 2 blocks
total heap usage: 5 allocs, 3 frees, 3,548 bytes allocated`
	if got := strings.Join(s.lines(), "\n"); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestFormatBytes: heaptrack_print's sizes (heaptrack_print.cpp,
// formatBytes), its quirk at exactly 1000 included.
func TestFormatBytes(t *testing.T) {
	for n, want := range map[uint64]string{0: "0B", 999: "999B", 1000: "1000.00B", 1524: "1.52K", 159640: "159.64K",
		4194304: "4.19M", 15_980_000: "15.98M", 3 << 40: "3.30T"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
	for n, want := range map[uint64]string{0: "0", 999: "999", 1000: "1,000", 50442546: "50,442,546"} {
		if got := commas(n); got != want {
			t.Errorf("commas(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestSummarySections: what each backtrace held at the peak is its live
// bytes when the heap was at its largest, though the site changed after
// (brought up to date lazily, heapSummary.siteOf).
func TestSummarySections(t *testing.T) {
	s := newHeapSummary()
	s.keepSites()
	a, b := []trace.Frame{{Addr: 0xa}}, []trace.Frame{{Addr: 0xb}}
	s.item(&trace.Resource{ID: 1, Name: "memory"})
	for _, c := range []*trace.Call{
		{Res: 1, Alloc: true, Size: 100, ID: 1, Frames: a},
		{Res: 1, Alloc: true, Size: 50, ID: 2, Frames: b}, // peak 150: a 100, b 50
		{Res: 1, ID: 1},
		{Res: 1, Alloc: true, Size: 10, ID: 3, Frames: b},
		{Res: 1, Alloc: true, Size: 30, ID: 4, Frames: a}, // 90: no new peak
		{Res: 1, ID: 4},
	} {
		s.call(c)
	}
	var out strings.Builder
	s.sections(&out, nil)
	_, peak, _ := strings.Cut(out.String(), "PEAK MEMORY CONSUMERS\n")
	peak, _, _ = strings.Cut(peak, "\n\n")
	if want := "100B peak memory consumed over 2 calls from\n\t0xa\n50B peak memory consumed over 2 calls from\n\t0xb"; peak != want {
		t.Errorf("peak consumers:\n%s\nwant\n%s", peak, want)
	}
	_, leaks, _ := strings.Cut(out.String(), "MEMORY LEAKS\n")
	if !strings.HasPrefix(leaks, "60B leaked in 2 blocks of 2 calls from\n\t0xb\n\n") {
		t.Errorf("leaks:\n%s", leaks)
	}
	_, temp, _ := strings.Cut(out.String(), "MOST TEMPORARY ALLOCATIONS\n")
	if !strings.HasPrefix(temp, "1 temporary allocations of 2 allocations in total (50.00%) from\n\t0xa\n\n") {
		t.Errorf("temporary:\n%s", temp)
	}
}

// TestSummaryTimeSteps: a call reported after a later one (a step back in
// time) is not a day later; a call after midnight is.
func TestSummaryTimeSteps(t *testing.T) {
	for _, c := range []struct {
		times []time.Duration
		want  string
	}{
		{[]time.Duration{1000 * time.Millisecond, 999 * time.Millisecond, 1100 * time.Millisecond}, "total runtime: 0.10s."},
		{[]time.Duration{24*time.Hour - time.Second, time.Second}, "total runtime: 2.00s."},
	} {
		s := newHeapSummary()
		s.item(&trace.Resource{ID: 1, Name: "memory"})
		for i, tm := range c.times {
			s.call(&trace.Call{Time: tm, Res: 1, Alloc: true, Size: 1, ID: uint64(i + 1)})
		}
		if got := s.lines()[0]; got != c.want {
			t.Errorf("%v: %q, want %q", c.times, got, c.want)
		}
	}
}

// TestSuppressedOtherResources: a suppressed leak of another resource
// (a file descriptor) is said apart; the memory totals stay memory's.
func TestSuppressedOtherResources(t *testing.T) {
	in := &sliceReader{items: []trace.Item{
		&trace.Header{Version: "3.3", Pid: 7, Binary: true},
		&trace.Resource{ID: 1, Name: "memory"},
		&trace.Resource{ID: 2, Name: "file"},
		&trace.Call{Index: 1, Res: 1, Alloc: true, Size: 8, ID: 0x10, Frames: []trace.Frame{{Text: "mine() at a.c:1"}}},
		&trace.Call{Index: 2, Res: 2, Alloc: true, Size: 1, ID: 3, Frames: []trace.Frame{{Text: "f() from /lib/libfoo.so"}}},
		&trace.Call{Index: 3, Res: 2, Alloc: true, Size: 1, ID: 4, Frames: []trace.Frame{{Text: "f() from /lib/libfoo.so"}}},
	}}
	w := &itemWriter{}
	if err := Run(in, w, Options{Leaks: true, Suppressions: []string{"libfoo"}}); err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, it := range w.items {
		if c, ok := it.(*trace.Comment); ok {
			notes = append(notes, c.Text)
		}
	}
	all := strings.Join(notes, "\n")
	if !strings.Contains(all, "## total memory leaked: 8B in 1 blocks\n") || strings.Contains(all, "## suppressed leaks: ") ||
		!strings.Contains(all, "## suppressed leaks of other resources: 2 (libfoo: 2)") {
		t.Errorf("notes:\n%s", all)
	}
}

// sliceReader yields items, then io.EOF.
type sliceReader struct{ items []trace.Item }

func (r *sliceReader) Next() (trace.Item, error) {
	if len(r.items) == 0 {
		return nil, io.EOF
	}
	it := r.items[0]
	r.items = r.items[1:]
	return it, nil
}
