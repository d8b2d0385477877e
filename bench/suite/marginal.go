package suite

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// A tracer's wall time on a workload is the untraced run's, plus its
// start-up (fixed: starting itself and the program, setting the program
// up, writing the trace's files), plus a cost per event. On a short
// workload the start-up is most of it (Lua's: 4 ms untraced, 45 ms of
// start-up for rtrace and uftrace alike), so a table's ns/event, which
// divides both by the events, says more about start-up than about
// events. Two sizes of one program separate the two: the difference of
// the costs above the untraced runs, over the difference of the events,
// is the cost of an event; what is left at the short size is the
// start-up.

// Marginal is one tool's cost on one program, from its short and long
// workloads.
type Marginal struct {
	Short, Long string // the workloads
	Tool        string
	Startup     time.Duration // above the untraced run, at no events
	PerEvent    float64       // ns
	// PG is uftrace -pg's cost per event on the same pair, 0 when it did
	// not run both.
	PG float64
}

// Marginals pairs each report whose workload names a Short one with that
// one's report, and gives each tool that ran both its marginal cost.
func Marginals(reps []*Report) []Marginal {
	var ms []Marginal
	for _, p := range counterparts(reps, func(w *Workload) string { return w.Short }) {
		short, long := p[1], p[0]
		var pair []Marginal
		pg := 0.0
		for _, rl := range long.Rows {
			if rl.Tool == "untraced" {
				continue
			}
			m, ok := marginal(short, long, rl.Tool)
			if !ok {
				continue
			}
			if rl.Tool == "uftrace -pg" {
				pg = m.PerEvent
			}
			pair = append(pair, m)
		}
		for i := range pair {
			pair[i].PG = pg
		}
		ms = append(ms, pair...)
	}
	return ms
}

// marginal is tool's cost from the two reports, if it ran both and the
// long one traced more events.
func marginal(short, long *Report, tool string) (Marginal, bool) {
	bs, bl := rowNamed(short, "untraced"), rowNamed(long, "untraced")
	rs, rl := rowNamed(short, tool), rowNamed(long, tool)
	if bs == nil || bl == nil || rs == nil || rl == nil || rs.counted <= 0 || rl.counted <= rs.counted {
		return Marginal{}, false
	}
	over := func(r, base *Row) float64 { return float64(r.Wall - base.Wall) }
	per := (over(rl, bl) - over(rs, bs)) / float64(rl.counted-rs.counted)
	return Marginal{
		Short: short.W.Name, Long: long.W.Name, Tool: tool,
		Startup:  time.Duration(over(rs, bs) - per*float64(rs.counted)),
		PerEvent: per,
	}, true
}

// PrintMarginals writes the marginal costs as one table.
func PrintMarginals(w io.Writer, ms []Marginal) {
	if len(ms) == 0 {
		return
	}
	fmt.Fprintln(w, "\n== cost per event apart from start-up: each tool's short and long runs of one program")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workloads\ttool\tstart-up\tns/event\tof uftrace -pg's")
	for _, m := range ms {
		of := "-"
		if m.PG > 0 && m.Tool != "uftrace -pg" {
			of = ratio(m.PerEvent / m.PG)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%s\n", m.Short+", "+m.Long, m.Tool, secs(m.Startup), m.PerEvent, of)
	}
	tw.Flush()
	fmt.Fprintln(w, "  start-up: the cost above the untraced run at no events; ns/event: the difference of the")
	fmt.Fprintln(w, "  costs above the untraced runs over the difference of the events. The fast engine's goal:")
	fmt.Fprintln(w, "  at most 0.5× of uftrace -pg's cost per event. Memory workloads (churn, lua-memory): an event")
	fmt.Fprintln(w, "  is a call of the allocator (malloc, free, realloc...), counted in rtrace's trace, or by")
	fmt.Fprintln(w, "  bpftrace's own probes on its row.")
}

// ThreadScaling compares, for each report whose workload names a
// OneThread one, the wall time of the threaded program with the same
// work in one thread, untraced and under rtrace: a tracer that
// serialises the threads makes its ratio worse than the untraced one.
func ThreadScaling(reps []*Report) []string {
	var lines []string
	for _, p := range counterparts(reps, func(w *Workload) string { return w.OneThread }) {
		th, one := p[0], p[1]
		var parts []string
		for _, tool := range []string{"untraced", "rtrace", "uftrace -pg"} {
			a, b := rowNamed(th, tool), rowNamed(one, tool)
			if a == nil || b == nil || b.Wall <= 0 {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %s vs %s (%s)", tool, secs(a.Wall), secs(b.Wall), ratio(float64(a.Wall)/float64(b.Wall))))
		}
		if len(parts) > 0 {
			lines = append(lines, fmt.Sprintf("%s against %s (the same work in one thread): %s", th.W.Name, one.W.Name, strings.Join(parts, "; ")))
		}
	}
	return lines
}

// counterparts pairs each report with the report of the workload its
// workload names by other (Short, OneThread), when that one ran too.
func counterparts(reps []*Report, other func(*Workload) string) [][2]*Report {
	byName := map[string]*Report{}
	for _, r := range reps {
		byName[r.W.Name] = r
	}
	var pairs [][2]*Report
	for _, r := range reps {
		if o := byName[other(r.W)]; o != nil {
			pairs = append(pairs, [2]*Report{r, o})
		}
	}
	return pairs
}
