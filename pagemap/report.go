package pagemap

import (
	"fmt"
	"io"
	"math/bits"
	"slices"
	"strings"

	"rtrace/internal/trace"
)

// Report types, sp-rtrace-pagemap's -p, -d and -c.
const (
	Pages   = "pages"
	Density = "density"
	Count   = "count"
)

// Options choose the report, as sp-rtrace-pagemap's options.
type Options struct {
	Report  string // Pages, Density, Count; "" with Summary: the summary alone
	Summary bool   // -s: the page type summary after the report
	Top     int    // -T: the N blocks at the highest addresses of each area
	Bottom  int    // -B: the N at the lowest
	Name    string // -N: the areas whose path has Name
	Addr    uint64 // -A: the area holding Addr (when Name is "")
	HasAddr bool
}

// perLine is how many pages a map line draws (sp-rtrace's
// PAGES_PER_LINE).
const perLine = 48

// maxPages bounds the pages of a mapping drawn: the tracer takes no
// pages of a bigger one (tracer.MaxMapPages, 4 GiB), a sanitizer's
// shadow or a reservation.
const maxPages = 1 << 20

// size is the area's pages; 0 for one too big to draw.
func (a *Area) size() int {
	n := (a.To - a.From) / pageSize
	if n > maxPages {
		return 0
	}
	return int(n)
}

// Write writes the report o chooses of d.
func Write(w io.Writer, d *Data, o Options) error {
	var b strings.Builder
	areas := d.filtered(o)
	if o.Report != "" {
		b.WriteString("SP-RTRACE PAGEMAP REPORT\n========================\n\n")
		fmt.Fprintf(&b, "Writable memory areas and their pages mapped to process:\n\t[%d] %s\n\n", d.Pid, d.Process)
		b.WriteString(legend(o.Report, d.Kernel))
		fmt.Fprintf(&b, "\n  %d KB per map line.\n\n\n", perLine*pageSize/1024)
		total := 0
		for _, a := range areas {
			if a.Writable() {
				total += a.size()
			}
		}
		index := 0
		for _, a := range areas {
			if !a.Writable() {
				continue
			}
			index++
			fmt.Fprintf(&b, "%d. %s\n\n", index, a.Line)
			if a.size() == 0 && a.To-a.From >= pageSize {
				fmt.Fprintf(&b, "(%d pages: a mapping of more than %d GiB is not drawn)\n\n\n", (a.To-a.From)/pageSize, maxPages*pageSize>>30)
				continue
			}
			b.WriteString("          " + strings.Repeat("-", perLine) + "\n")
			marks := a.marks(o.Report)
			for i := 0; i < len(marks); i += perLine {
				fmt.Fprintf(&b, "%08x |%s|\n", a.From+uint64(i)*pageSize, marks[i:min(i+perLine, len(marks))])
			}
			if len(marks) == 0 {
				b.WriteString("|\n")
			}
			b.WriteString("          " + strings.Repeat("-", perLine) + "\n\n")
			if o.Report == Pages {
				a.table(&b, total)
			}
			if o.Bottom > 0 && len(a.Blocks) > 0 {
				fmt.Fprintf(&b, "Bottom %d allocations:\n", o.Bottom)
				for _, bl := range a.Blocks[:min(o.Bottom, len(a.Blocks))] {
					writeBlock(&b, bl)
				}
				b.WriteByte('\n')
			}
			if o.Top > 0 && len(a.Blocks) > 0 {
				fmt.Fprintf(&b, "Top %d allocations:\n", o.Top)
				for i := len(a.Blocks) - 1; i >= max(0, len(a.Blocks)-o.Top); i-- {
					writeBlock(&b, a.Blocks[i])
				}
				b.WriteByte('\n')
			}
			b.WriteByte('\n')
		}
	}
	if o.Summary {
		summary(&b, areas, d.Kernel)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// filtered are the areas -N or -A keep.
func (d *Data) filtered(o Options) []*Area {
	var out []*Area
	for _, a := range d.Areas {
		switch {
		case o.Name != "" && !strings.Contains(a.Path, o.Name):
		case o.Name == "" && o.HasAddr && (o.Addr < a.From || o.Addr >= a.To):
		default:
			out = append(out, a)
		}
	}
	return out
}

// legend is the report's legend, sp-rtrace-pagemap's; without the
// kernel's flags, what rtrace tells from /proc/PID/pagemap instead.
func legend(report string, kernel bool) string {
	var b strings.Builder
	b.WriteString("\nLegend for the characters used in the memory mappings below:\n")
	switch report {
	case Pages:
		b.WriteString("  ' ' : non-dirty zero page\n  '.' : non-dirty page\n  '0' : zeroed dirty page in RAM\n  '#' : dirty page in RAM\n  'Z' : swapped zeroed page\n  'S' : swapped page\n")
		if !kernel {
			b.WriteString("  (the kernel's page flags were not read, they need CAP_SYS_ADMIN: a page in RAM is dirty\n   when it is anonymous, as /proc/PID/pagemap tells, which the kernel counts swap-backed)\n")
		}
	case Density:
		b.WriteString("\t' ' - no page memory allocated\n\t'0' - 0% < allocation % of page <= 10%\n\t'1' - 10% < allocation % of page <= 20%\n\t...\n\t'9' - 90% < allocation % of page < 100%\n\t'#' - 100% of page allocated.\n\t'*' - more than 100% of page allocated. Either calculation error\n\t      or the input report was not processed with freed allocations removal filter.\n")
	case Count:
		b.WriteString("\t'0' - page not mapped\n\t'1' - page mapped once\n\t...\n\t'9' - page mapped 9 times\n\t'*' - page mapped 10 or more times\n")
		if !kernel {
			b.WriteString("\t'+' - page mapped by other processes too (the counts need CAP_SYS_ADMIN:\n\t      /proc/kpagecount was not read; /proc/PID/pagemap tells once or more)\n")
		}
	}
	return b.String()
}

// dirty reports whether pg is a dirty page in RAM as sp-rtrace counts
// them: the kernel's dirty, swap cache or swap-backed flag
// (linux/kernel-page-flags.h: bits 4, 13, 14); without them, an
// anonymous page in RAM (swap-backed).
func dirty(pg trace.Page) bool {
	if pg.Kernel {
		return pg.KFlags&(1<<4|1<<13|1<<14) != 0
	}
	return pg.Info&trace.PageMemory != 0 && pg.Info&trace.PageFile == 0
}

// page is the area's i-th page (not present when the page map has none).
func (a *Area) page(i int) trace.Page {
	if i < len(a.Pages) {
		return a.Pages[i]
	}
	return trace.Page{}
}

// marks draws the area's pages for report.
func (a *Area) marks(report string) string {
	out := make([]byte, a.size())
	switch report {
	case Pages:
		for i := range out {
			pg := a.page(i)
			zero := pg.Info&trace.PageZero != 0
			switch {
			case pg.Info&trace.PageSwap != 0:
				out[i] = pick(zero, 'Z', 'S')
			case dirty(pg):
				out[i] = pick(zero, '0', '#')
			default:
				out[i] = pick(zero, ' ', '.')
			}
		}
	case Count:
		for i := range out {
			pg := a.page(i)
			switch {
			case pg.Kernel && pg.KCount >= 10:
				out[i] = '*'
			case pg.Kernel:
				out[i] = '0' + byte(pg.KCount)
			case pg.Info&trace.PageMemory == 0:
				out[i] = '0'
			case pg.Info&trace.PageExclusive != 0:
				out[i] = '1'
			default:
				out[i] = '+'
			}
		}
	case Density:
		a.density(out)
	}
	return string(out)
}

func pick(c bool, yes, no byte) byte {
	if c {
		return yes
	}
	return no
}

// density draws how much of each page the live blocks take, sp-rtrace's
// way (density_report.cpp): a block that runs past its page's end
// carries the rest into the pages after it.
func (a *Area) density(out []byte) {
	blocks := a.Blocks
	var carry uint64
	for i := range out {
		lo := a.From + uint64(i)*pageSize
		hi := lo + pageSize
		var size uint64
		if carry >= pageSize {
			size, carry = pageSize, carry-pageSize
		} else {
			size, carry = carry, 0
			for len(blocks) > 0 && blocks[0].Call.ID < hi {
				c := blocks[0].Call
				blocks = blocks[1:]
				if c.ID+c.Size > hi {
					carry = c.Size - (hi - c.ID)
					size += hi - c.ID
					break
				}
				size += c.Size
			}
		}
		switch {
		case size == 0:
			out[i] = ' '
		case size == pageSize:
			out[i] = '#'
		case size > pageSize:
			out[i] = '*'
		default:
			out[i] = '0' + byte(size*10/pageSize)
		}
	}
}

// table writes the page types' counts of a, sp-rtrace-pagemap's table
// after each area of -p; total is the pages of all writable areas.
func (a *Area) table(b *strings.Builder, total int) {
	var all, dirtyN, dirtyZ, swapped, swappedZ, inRAM int
	for i := 0; i < a.size(); i++ {
		pg := a.page(i)
		all++
		if pg.Info&trace.PageMemory != 0 {
			inRAM++ // present: sp-rtrace counted all but the swapped
		}
		zero := pg.Info&trace.PageZero != 0
		switch {
		case pg.Info&trace.PageSwap != 0:
			swapped++
			if zero {
				swappedZ++
			}
		case dirty(pg):
			dirtyN++
			if zero {
				dirtyZ++
			}
		}
	}
	row := func(label string, n int, always bool) {
		if n == 0 && !always {
			return
		}
		ofAll := 0
		if total > 0 {
			ofAll = n * 100 / total
		}
		ofArea := 0
		if all > 0 {
			ofArea = n * 100 / all
		}
		fmt.Fprintf(b, "%-13s%8d%8d%8d%%%8d%%\n", label, n, n*pageSize/1024, ofArea, ofAll)
	}
	b.WriteString("type:           pages:     kB:  of area:  of all writable:\n")
	row("all", all, true)
	row("dirty RAM", dirtyN, false)
	row("dirty RAM + Z", dirtyZ, false)
	row("swapped", swapped, false)
	row("swapped + Z", swappedZ, false)
	row("in RAM", inRAM, true)
	b.WriteByte('\n')
}

// writeBlock writes a block of the -T/-B lists, as sp-rtrace-pagemap.
func writeBlock(b *strings.Builder, bl *Block) {
	c := bl.Call
	b.WriteByte('\t')
	fmt.Fprintf(b, "%d. ", c.Index)
	if c.Context != 0 {
		fmt.Fprintf(b, "@%x ", c.Context)
	}
	if c.Time >= 0 {
		t := c.Time
		fmt.Fprintf(b, "[%02d:%02d:%02d.%03d] ", int(t.Hours()), int(t.Minutes())%60, int(t.Seconds())%60, t.Milliseconds()%1000)
	}
	fmt.Fprintf(b, "%s(%d) = 0x%x\n", c.Name, c.Size, c.ID)
	for _, f := range c.Frames {
		fmt.Fprintf(b, "\t\t0x%08x", f.Addr)
		if f.Text != "" {
			fmt.Fprintf(b, " (%s)", strings.TrimSuffix(strings.TrimPrefix(f.Text, "("), ")"))
		}
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
}

// summary writes the count of pages by their kernel flags in the
// writable areas (sp-rtrace-pagemap -s, the kernel's page-types).
func summary(b *strings.Builder, areas []*Area, kernel bool) {
	counts := map[uint64]int{}
	for _, a := range areas {
		if !a.Writable() {
			continue
		}
		for i := 0; i < a.size(); i++ {
			counts[filterFlags(a.page(i).KFlags)]++
		}
	}
	var used uint64
	keys := make([]uint64, 0, len(counts))
	for f := range counts {
		keys = append(keys, f)
		used |= f
	}
	slices.Sort(keys)
	b.WriteString("Memory page type summary\n========================\n\n")
	if !kernel {
		b.WriteString("(the kernel's page flags were not read: they need CAP_SYS_ADMIN)\n\n")
	}
	b.WriteString("Count    Flags\n")
	for _, f := range keys {
		fmt.Fprintf(b, "%8d ", counts[f])
		for i := 0; i < 64; i++ {
			if used&(1<<i) == 0 {
				continue
			}
			if f&(1<<i) != 0 {
				b.WriteByte(flagMark(i))
			} else {
				b.WriteByte('.')
			}
		}
		b.WriteByte('\n')
	}
	if used == 0 {
		return
	}
	b.WriteString("\nLegend:\n")
	for u := used; u != 0; u &= u - 1 {
		i := bits.TrailingZeros64(u)
		fmt.Fprintf(b, "\t%c : %s\n", flagMark(i), flagName(i))
	}
}
