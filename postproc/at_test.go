package postproc

import (
	"strings"
	"testing"
	"time"

	"rtrace/internal/trace"
)

// TestSummaryAtMoments: a moment given to the millisecond takes every
// call of that millisecond, as the text format shows the calls' times (a
// raw trace and its text cut alike); a finer one cuts at the nanosecond;
// + counts from the first memory call; a trace without times is refused.
func TestSummaryAtMoments(t *testing.T) {
	at := func(h, ns int) time.Duration { return time.Duration(h)*time.Hour + time.Duration(ns) }
	items := func(times ...time.Duration) []trace.Item {
		its := []trace.Item{&trace.Header{Version: "3.3"}, &trace.Resource{ID: 1, Name: "memory"}}
		for i, tm := range times {
			its = append(its, &trace.Call{Index: i + 1, Time: tm, Res: 1, Alloc: true, Size: 16 << i, ID: uint64(0x1000 * (i + 1))})
		}
		return its
	}
	timed := items(at(10, 100_000), at(10, 900_000), at(10, 2_000_000))
	for _, c := range []struct {
		moment string
		calls  string
	}{
		{"10:00:00.000", "calls to allocation functions: 2 ("},
		{"10:00:00.0001", "calls to allocation functions: 1 ("},
		{"10:00:00.001", "calls to allocation functions: 2 ("},
		{"10:00:00.002", "calls to allocation functions: 3 ("},
		{"+0", "calls to allocation functions: 2 ("},
		{"+0.0000005", "calls to allocation functions: 1 ("},
		{"9:59:59", "calls to allocation functions: 0 ("},
	} {
		ms, err := ParseMoments(c.moment)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := Summarize(&sliceReader{items: timed}, &b, Options{Summary: true, At: ms}); err != nil {
			t.Fatalf("--at %s: %v", c.moment, err)
		}
		if !strings.Contains(b.String(), c.calls) || !strings.Contains(b.String(), "memory allocated at "+c.moment+": ") {
			t.Errorf("--at %s: want %q in\n%s", c.moment, c.calls, b.String())
		}
	}
	ms, _ := ParseMoments("+1")
	untimed := items(-1, -1)
	if err := Summarize(&sliceReader{items: untimed}, &strings.Builder{}, Options{Summary: true, At: ms}); err != errNoTimes {
		t.Errorf("a trace without times: %v", err)
	}
	for _, bad := range []string{"+inf", "NaN", "1e30", "+1,+2,+3", "+2,+1", "1:2:3:4"} {
		if _, err := ParseMoments(bad); err == nil {
			t.Errorf("ParseMoments(%q): no error", bad)
		}
	}
}
