package postproc

import (
	"cmp"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"rtrace/internal/trace"
)

// The summary's diff (--summary --diff BASE; docs/REPORTS.md, "Diff"), as
// heaptrack_print --diff: what changed from a base trace to this one,
// totals and backtraces. Two runs map their code at other addresses: a
// backtrace is matched by its frames' places (function, file and line,
// else module and offset), not their addresses.

// diffSite is what one backtrace's allocations did in the two traces.
type diffSite struct {
	key                                    string
	text                                   []string // its frames, as shown
	calls, temporary, leaked, peak, blocks [2]int64 // base, this
}

// siteTotals gathers the sites of s by place.
func siteTotals(s *heapSummary, loc func(trace.Frame) trace.Location, into map[string]*diffSite, i int) {
	for _, st := range s.sortedSites() {
		if st.frames == nil {
			continue
		}
		var key strings.Builder
		var text []string
		for _, f := range st.frames {
			l := loc(f)
			var t, k string
			switch {
			case l.Func != "" && l.File != "":
				t = fmt.Sprintf("%s() at %s:%d", l.Func, filepath.Base(l.File), l.Line)
				k = t
			case l.Func != "":
				// Not by module: two builds of a program may lie apart.
				t, k = fmt.Sprintf("%s() from %s", l.Func, l.Module), l.Func+"()"
			case l.Module != "":
				t = fmt.Sprintf("%s+0x%x", filepath.Base(l.Module), f.Addr-l.Start+l.Offset)
				k = t
			default:
				t = fmt.Sprintf("0x%x", f.Addr)
				k = t
			}
			key.WriteString(k)
			key.WriteByte('\n')
			text = append(text, t)
		}
		d := into[key.String()]
		if d == nil {
			d = &diffSite{key: key.String()}
			into[d.key] = d
		}
		if d.text == nil || i == 1 {
			d.text = text // as this trace names it
		}
		d.calls[i] += int64(st.calls)
		d.temporary[i] += int64(st.temporary)
		d.leaked[i] += int64(st.leaked())
		d.peak[i] += int64(st.atPeak)
		if !st.suppressed {
			d.blocks[i] += int64(st.liveBlocks + st.leakedBlocks)
		}
	}
}

// signedBytes prints a change of n bytes as heaptrack_print's sizes, signed.
func signedBytes(n int64) string {
	if n < 0 {
		return "-" + formatBytes(uint64(-n))
	}
	return "+" + formatBytes(uint64(n))
}

// DiffSummary writes what changed from the trace base to the trace in:
// the totals, then the backtraces whose leaks, peak consumption,
// temporary allocations and calls grew most (shrank: negative, after).
// newResolver makes a resolver for each trace.
func DiffSummary(base, in trace.Reader, w io.Writer, opts Options, newResolver func() Resolver) error {
	var sums [2]*heapSummary
	sites := map[string]*diffSite{}
	var readErr error
	for i, rd := range []trace.Reader{base, in} {
		o := opts
		o.Resolver = newResolver()
		s, loc, err := readSites(rd, o)
		if err != nil && readErr == nil {
			readErr = fmt.Errorf("%s: %w", []string{"the base trace " + opts.Diff, "the trace"}[i], err)
		}
		sums[i] = s
		siteTotals(s, loc, sites, i)
	}
	return writeDiff(w, sums, sites, readErr)
}

// diffAt writes what changed in the trace in from the moment opts.At[0]
// to opts.At[1], as DiffSummary: one pass, two summaries.
func diffAt(in trace.Reader, w io.Writer, opts Options) error {
	s, loc, readErr := readSitesAt(in, opts, []*Moment{&opts.At[0], &opts.At[1]})
	if readErr == errNoTimes {
		return readErr
	}
	sites := map[string]*diffSite{}
	siteTotals(s[0], loc, sites, 0)
	siteTotals(s[1], loc, sites, 1)
	if readErr != nil {
		readErr = fmt.Errorf("the trace: %w", readErr)
	}
	return writeDiff(w, [2]*heapSummary{s[0], s[1]}, sites, readErr)
}

// writeDiff writes the changes from sums[0] to sums[1]; at moments of
// one trace (their at set), the blocks allocated take the leaks' place.
func writeDiff(w io.Writer, sums [2]*heapSummary, sites map[string]*diffSite, readErr error) error {
	var b strings.Builder
	if readErr != nil {
		fmt.Fprintf(&b, "INCOMPLETE: %v: the changes are of what was read\n", readErr)
	}
	o, n := sums[0], sums[1]
	leakLine, leakTitle, leakWord := "total memory leaked", "MEMORY LEAKS", "leaked"
	if n.at != nil {
		fmt.Fprintf(&b, "from %s to %s\n", o.at.Text, n.at.Text)
		leakLine = "memory allocated at " + n.at.Text
		leakTitle, leakWord = "MEMORY ALLOCATED (GREW FROM "+o.at.Text+" TO "+n.at.Text+")", "allocated"
	}
	leaked := func(s *heapSummary) uint64 { return s.cur + s.leakedBytes - s.suppressed.bytes }
	fmt.Fprintf(&b, "calls to allocation functions: %d (%+d)\n", n.allocs, int64(n.allocs)-int64(o.allocs))
	fmt.Fprintf(&b, "temporary memory allocations: %d (%+d)\n", n.temporary, int64(n.temporary)-int64(o.temporary))
	fmt.Fprintf(&b, "peak heap memory consumption: %s (%s)\n", formatBytes(n.peak), signedBytes(int64(n.peak)-int64(o.peak)))
	if o.peakRSS > 0 && n.peakRSS > 0 && n.at == nil {
		fmt.Fprintf(&b, "peak RSS (including rtrace overhead): %s (%s)\n", formatBytes(n.peakRSS), signedBytes(int64(n.peakRSS)-int64(o.peakRSS)))
	}
	fmt.Fprintf(&b, "%s: %s (%s)\n", leakLine, formatBytes(leaked(n)), signedBytes(int64(leaked(n))-int64(leaked(o))))
	list := make([]*diffSite, 0, len(sites))
	for _, d := range sites {
		list = append(list, d)
	}
	for _, sec := range []struct {
		title string
		delta func(*diffSite) int64
		label func(*diffSite) string
	}{
		{leakTitle, func(d *diffSite) int64 { return d.leaked[1] - d.leaked[0] }, func(d *diffSite) string {
			return fmt.Sprintf("%s %s (%s now, %+d blocks) from", signedBytes(d.leaked[1]-d.leaked[0]), leakWord, formatBytes(uint64(d.leaked[1])), d.blocks[1]-d.blocks[0])
		}},
		{"PEAK MEMORY CONSUMERS", func(d *diffSite) int64 { return d.peak[1] - d.peak[0] }, func(d *diffSite) string {
			return fmt.Sprintf("%s peak memory consumed (%s now) from", signedBytes(d.peak[1]-d.peak[0]), formatBytes(uint64(d.peak[1])))
		}},
		{"MOST TEMPORARY ALLOCATIONS", func(d *diffSite) int64 { return d.temporary[1] - d.temporary[0] }, func(d *diffSite) string {
			return fmt.Sprintf("%+d temporary allocations (%d now) from", d.temporary[1]-d.temporary[0], d.temporary[1])
		}},
		{"MOST CALLS TO ALLOCATION FUNCTIONS", func(d *diffSite) int64 { return d.calls[1] - d.calls[0] }, func(d *diffSite) string {
			return fmt.Sprintf("%+d calls to allocation functions (%d now) from", d.calls[1]-d.calls[0], d.calls[1])
		}},
	} {
		// Growth first, largest first; then what shrank, most first.
		slices.SortStableFunc(list, func(x, y *diffSite) int {
			dx, dy := sec.delta(x), sec.delta(y)
			if (dx > 0) != (dy > 0) {
				if dx > 0 {
					return -1
				}
				return 1
			}
			if c := cmp.Compare(abs(dy), abs(dx)); c != 0 {
				return c
			}
			return cmp.Compare(x.key, y.key)
		})
		fmt.Fprintf(&b, "\n%s\n", sec.title)
		shown, grew, shrank := 0, 0, 0 // ten of each
		for _, d := range list {
			dd := sec.delta(d)
			if dd == 0 || dd > 0 && grew == sectionTop || dd < 0 && shrank == sectionTop {
				continue
			}
			if dd > 0 {
				grew++
			} else {
				shrank++
			}
			shown++
			b.WriteString(sec.label(d))
			b.WriteByte('\n')
			for _, t := range d.text {
				b.WriteString("\t" + t + "\n")
			}
		}
		if shown == 0 {
			b.WriteString("no change\n")
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing the output: %w", err)
	}
	return readErr
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
