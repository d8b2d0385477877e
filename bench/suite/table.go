package suite

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

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
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "tool\twall (median, min–max)\tCPU\ttool RSS\ttrace\tevents\tns/event\ttool/rtrace\tmain() in trace\tcheck")
	var notes []string
	for _, r := range rep.Rows {
		switch {
		case r.Skipped != "":
			fmt.Fprintf(tw, "%s\tskipped\t\t\t\t\t\t\t\t\n", r.Tool)
			notes = append(notes, fmt.Sprintf("%s skipped: %s", r.Tool, r.Skipped))
			continue
		case r.Err != nil:
			fmt.Fprintf(tw, "%s\tfailed\t\t\t\t\t\t\t\t\n", r.Tool)
			notes = append(notes, fmt.Sprintf("%s failed: %s", r.Tool, firstLines(r.Err.Error(), 6)))
			continue
		}
		cols := []string{r.Tool,
			fmt.Sprintf("%s (%s–%s)", secs(r.Wall), secs(r.WallMin), secs(r.WallMax)),
			secs(r.CPU), dash(r.RSS > 0 && r.Tool != "untraced", func() string { return size(r.RSS) }),
			dash(r.Bytes > 0, func() string { return size(r.Bytes) }),
			dash(r.Events > 0, func() string { return fmt.Sprint(r.Events) }),
			dash(r.PerEvent != 0, func() string { return fmt.Sprintf("%.0f", r.PerEvent) }),
			dash(rt > 0 && r.Tool != "untraced", func() string { return ratio(float64(r.Wall) / float64(rt)) }),
			dash(r.Main > 0 && base > 0, func() string {
				return fmt.Sprintf("%s (%s untraced)", secs(r.Main), ratio(float64(r.Main)/float64(base)))
			}),
			r.Check,
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
		if r.Detail != "" {
			notes = append(notes, fmt.Sprintf("%s: %s", r.Tool, r.Detail))
		}
	}
	if rep.Floor > 0 {
		fmt.Fprintf(tw, "ptrace floor\t\t\t\t\t\t%.0f\t\t\tbare int3 → wait4 → PTRACE_CONT, pinned\n", rep.Floor)
	}
	tw.Flush()
	notes = append(rep.Notes, notes...)
	for _, n := range notes {
		fmt.Fprintf(w, "  %s\n", n)
	}
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
