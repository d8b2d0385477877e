package suite

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// column is one column of a workload's table.
type column struct {
	head string
	cell func(r *Row) string
}

// columns are the table's columns for a kind of workload, between the
// tool and the check: rt and base are rtrace's and the untraced run's
// median wall times. A memory workload's events are its calls; its rows
// tell the trace's bytes per call, and rtrace's row the share of its
// backtraces that needed a stop.
func columns(k Kind, rt, base time.Duration) []column {
	wall := column{"wall (median, min–max)", func(r *Row) string {
		return fmt.Sprintf("%s (%s–%s)", secs(r.Wall), secs(r.WallMin), secs(r.WallMax))
	}}
	cpu := column{"CPU", func(r *Row) string { return secs(r.CPU) }}
	rss := column{"tool RSS", func(r *Row) string {
		return dash(r.RSS > 0 && r.Tool != "untraced", func() string { return size(r.RSS) })
	}}
	bytes := column{"trace", func(r *Row) string { return dash(r.Bytes > 0, func() string { return size(r.Bytes) }) }}
	events := column{"events", func(r *Row) string { return dash(r.Events > 0, func() string { return fmt.Sprint(r.Events) }) }}
	perEvent := column{"ns/event", func(r *Row) string {
		return dash(r.PerEvent != 0, func() string { return fmt.Sprintf("%.0f", r.PerEvent) })
	}}
	perBytes := column{"B/event", func(r *Row) string {
		return dash(r.Bytes > 0 && r.counted > 0, func() string { return perCall(float64(r.Bytes) / float64(r.counted)) })
	}}
	stops := column{"stops", func(r *Row) string {
		if r.EveryStop {
			return "every call"
		}
		return dash(r.Walks > 0, func() string { return stopShare(r.WalkStops, r.Walks) })
	}}
	vsRtrace := column{"tool/rtrace", func(r *Row) string {
		return dash(rt > 0 && r.Tool != "untraced", func() string { return ratio(float64(r.Wall) / float64(rt)) })
	}}
	mainIn := column{"main() in trace", func(r *Row) string {
		return dash(r.Main > 0 && base > 0, func() string {
			return fmt.Sprintf("%s (%s untraced)", secs(r.Main), ratio(float64(r.Main)/float64(base)))
		})
	}}
	switch k {
	case Memory:
		events.head, perEvent.head, perBytes.head = "calls", "ns/call", "B/call"
		return []column{wall, cpu, rss, bytes, events, perEvent, perBytes, stops, vsRtrace}
	case Startup:
		return []column{wall, cpu, rss, bytes, events, perEvent, perBytes, stops, vsRtrace, mainIn}
	}
	return []column{wall, cpu, rss, bytes, events, perEvent, vsRtrace, mainIn}
}

// Print writes rep as a table: one row per tool, with the ratio of its
// median wall time to rtrace's, and what failed or was skipped below.
func Print(w io.Writer, rep *Report) {
	fmt.Fprintf(w, "\n== %s: %s\n", rep.W.Name, rep.W.What)
	var rt time.Duration
	var base time.Duration
	for _, r := range rep.Rows {
		if r.Tool == "rtrace" && r.Runs > 0 {
			rt = r.Wall
		}
		if r.Tool == "untraced" {
			base = r.Wall
		}
	}
	cols := columns(rep.W.Kind, rt, base)
	heads := []string{"tool"}
	for _, c := range cols {
		heads = append(heads, c.head)
	}
	heads = append(heads, "check")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(heads, "\t"))
	// A row with one word: the other cells are empty, still cells (a short
	// line would end tabwriter's column blocks).
	blank := strings.Repeat("\t", len(heads)-2)
	var notes []string
	for i := range rep.Rows {
		r := &rep.Rows[i]
		switch {
		case r.Skipped != "":
			fmt.Fprintf(tw, "%s\tskipped%s\n", r.Tool, blank)
			notes = append(notes, fmt.Sprintf("%s skipped: %s", r.Tool, r.Skipped))
			continue
		case r.Err != nil:
			fmt.Fprintf(tw, "%s\tfailed%s\n", r.Tool, blank)
			notes = append(notes, fmt.Sprintf("%s failed: %s", r.Tool, firstLines(r.Err.Error(), 6)))
			continue
		}
		cells := []string{r.Tool}
		for _, c := range cols {
			cells = append(cells, c.cell(r))
		}
		cells = append(cells, r.Check)
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
		if r.Detail != "" {
			notes = append(notes, fmt.Sprintf("%s: %s", r.Tool, r.Detail))
		}
	}
	if rep.Floor > 0 {
		cells := make([]string, len(heads))
		cells[0], cells[len(cells)-1] = "ptrace floor", "bare int3 → wait4 → PTRACE_CONT, pinned"
		for i, c := range cols {
			if c.head == "ns/event" {
				cells[i+1] = fmt.Sprintf("%.0f", rep.Floor)
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	tw.Flush()
	notes = append(rep.Notes, notes...)
	for _, n := range notes {
		fmt.Fprintf(w, "  %s\n", n)
	}
}

// perCall formats bytes per call: two decimals below 1, one below 100.
func perCall(b float64) string {
	switch {
	case b < 1:
		return fmt.Sprintf("%.2f", b)
	case b < 100:
		return fmt.Sprintf("%.1f", b)
	}
	return fmt.Sprintf("%.0f", b)
}

// stopShare is the share of the backtraces that needed a stop, with the
// counts.
func stopShare(stops, all int64) string {
	pct := 100 * float64(stops) / float64(all)
	s := fmt.Sprintf("%.2f%%", pct)
	if stops > 0 && pct < 0.01 {
		s = "<0.01%"
	}
	return fmt.Sprintf("%s (%d of %d)", s, stops, all)
}

func dash(ok bool, f func() string) string {
	if !ok {
		return "-"
	}
	return f()
}

func secs(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
	return fmt.Sprintf("%.1fms", float64(d)/1e6)
}

func ratio(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f×", x)
	case x >= 10:
		return fmt.Sprintf("%.1f×", x)
	}
	return fmt.Sprintf("%.2f×", x)
}

func size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0fKiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, "\n    ")
}
