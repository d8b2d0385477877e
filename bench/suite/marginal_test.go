package suite

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// row is a tool's measured row: its median wall time and the events it
// divided by.
func row(tool string, wall time.Duration, events int64) Row {
	return Row{Tool: tool, Stats: Stats{Runs: 5, Wall: wall}, counted: events}
}

// Two sizes of one program, made from known costs: untraced 4 and 30 ms;
// a tool with 45 ms of start-up and 27 ns an event, one with 44 ms and
// 125 ns; 38,000 and 1,700,000 events.
func pairReports() []*Report {
	cost := func(base time.Duration, startup time.Duration, ns float64, n int64) time.Duration {
		return base + startup + time.Duration(ns*float64(n))
	}
	mk := func(name, short string, base time.Duration, n int64) *Report {
		return &Report{W: &Workload{Name: name, Short: short}, Rows: []Row{
			row("untraced", base, 0),
			row("rtrace", cost(base, 45*time.Millisecond, 27, n), n),
			row("uftrace -pg", cost(base, 44*time.Millisecond, 125, n), n),
		}}
	}
	return []*Report{
		mk("lua", "", 4*time.Millisecond, 38000),
		mk("lua-long", "lua", 30*time.Millisecond, 1700000),
	}
}

func TestMarginals(t *testing.T) {
	ms := Marginals(pairReports())
	if len(ms) != 2 {
		t.Fatalf("got %d marginal rows, want rtrace and uftrace -pg: %+v", len(ms), ms)
	}
	want := map[string][2]float64{"rtrace": {45e6, 27}, "uftrace -pg": {44e6, 125}}
	for _, m := range ms {
		w, ok := want[m.Tool]
		if !ok || m.Short != "lua" || m.Long != "lua-long" {
			t.Errorf("unexpected row %+v", m)
			continue
		}
		if math.Abs(float64(m.Startup)-w[0]) > 1e3 || math.Abs(m.PerEvent-w[1]) > 0.01 {
			t.Errorf("%s: start-up %v, %.2f ns/event; want %v, %.0f", m.Tool, m.Startup, m.PerEvent, time.Duration(w[0]), w[1])
		}
		if m.PG != 125 {
			t.Errorf("%s: uftrace -pg's cost %.2f, want 125", m.Tool, m.PG)
		}
	}
	var out bytes.Buffer
	PrintMarginals(&out, ms)
	if !strings.Contains(out.String(), "0.22×") {
		t.Errorf("the table does not give rtrace's ratio (27/125 = 0.22×):\n%s", out.String())
	}
}

func TestMarginalsNeedBothSizes(t *testing.T) {
	reps := pairReports()
	// A tool that failed on the long workload, and a long one whose short
	// workload did not run, give no row.
	reps[1].Rows[1].Err = errors.New("rtrace failed")
	if ms := Marginals(reps); len(ms) != 1 || ms[0].Tool != "uftrace -pg" {
		t.Errorf("a failed rtrace row still gives a marginal cost: %+v", ms)
	}
	if ms := Marginals(reps[1:]); len(ms) != 0 {
		t.Errorf("no short workload, still %d rows", len(ms))
	}
	// As many events at both sizes: no cost per event to tell.
	reps = pairReports()
	reps[1].Rows[1].counted = reps[0].Rows[1].counted
	for _, m := range Marginals(reps) {
		if m.Tool == "rtrace" {
			t.Errorf("equal event counts give a cost: %+v", m)
		}
	}
}

func TestThreadScaling(t *testing.T) {
	one := &Report{W: &Workload{Name: "fib-long"}, Rows: []Row{row("untraced", 20*time.Millisecond, 0), row("rtrace", 150*time.Millisecond, 100)}}
	th := &Report{W: &Workload{Name: "fib-threads-long", OneThread: "fib-long"}, Rows: []Row{row("untraced", 22*time.Millisecond, 0), row("rtrace", 138*time.Millisecond, 100)}}
	lines := ThreadScaling([]*Report{one, th})
	if len(lines) != 1 || !strings.Contains(lines[0], "untraced 22.0ms vs 20.0ms (1.10×)") || !strings.Contains(lines[0], "rtrace 138.0ms vs 150.0ms (0.92×)") {
		t.Errorf("ThreadScaling = %q", lines)
	}
}
