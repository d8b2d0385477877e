// Package timeline draws sp-rtrace-timeline's reports of a resource trace
// (sp-rtrace: doc/sp-rtrace-timeline.1) with gonum.org/v1/plot, as PNG or
// SVG, no gnuplot needed: the resources held over time (totals), the
// allocations and releases per time slice (activity), each allocation's
// life from its allocation to its release (lifetime), and how many
// allocations (and how many bytes) each size took (histograms)
// (docs/REPORTS.md, "Timelines").
package timeline

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"rtrace/internal/trace"
)

// Report kinds, in the order they are drawn, and their file name parts.
const (
	Totals    = "totals"
	Activity  = "activity"
	Lifetime  = "lifetime"
	HistCount = "histogram-count"
	HistSize  = "histogram-size"
)

// Options are sp-rtrace-timeline's.
type Options struct {
	Reports []string      // the kinds to draw
	SVG     bool          // SVG (-g), else PNG
	Slice   time.Duration // the activity's time slice; 0: a 20th of the time
	// LogBase is the base of the lifetime report's size axis, <= 1:
	// linear (default 10).
	LogBase        float64
	ScaleX, ScaleY float64 // percent of the default size (default 100)
	Size, Index    Range   // --filter-size, --filter-index
	Time           TimeRange
}

// Range is a filter's [Lo, Hi] (Hi 0: no bound).
type Range struct {
	Lo, Hi uint64
	Set    bool
}

func (r Range) has(v uint64) bool {
	return !r.Set || v >= r.Lo && (r.Hi == 0 || v <= r.Hi)
}

// ParseSize reads a size filter: [START]-[END], each a number of bytes
// with an optional k or m.
func ParseSize(s string) (Range, error) {
	return parseRange(s, func(v string) (uint64, error) {
		mul := uint64(1)
		switch {
		case strings.HasSuffix(v, "k"), strings.HasSuffix(v, "K"):
			mul, v = 1024, v[:len(v)-1]
		case strings.HasSuffix(v, "m"), strings.HasSuffix(v, "M"):
			mul, v = 1<<20, v[:len(v)-1]
		}
		n, err := strconv.ParseUint(v, 10, 64)
		return n * mul, err
	})
}

// ParseIndex reads an index filter: [START]-[END].
func ParseIndex(s string) (Range, error) {
	return parseRange(s, func(v string) (uint64, error) { return strconv.ParseUint(v, 10, 64) })
}

func parseRange(s string, num func(string) (uint64, error)) (Range, error) {
	lo, hi, ok := strings.Cut(s, "-")
	if !ok || lo == "" && hi == "" {
		return Range{}, fmt.Errorf("%q: want [START]-[END]", s)
	}
	r := Range{Set: true}
	var err error
	if lo != "" {
		if r.Lo, err = num(lo); err != nil {
			return r, fmt.Errorf("%q: %q is not a value", s, lo)
		}
	}
	if hi != "" {
		if r.Hi, err = num(hi); err != nil || r.Hi < r.Lo {
			return r, fmt.Errorf("%q: %q is not a value above the start", s, hi)
		}
	}
	return r, nil
}

// TimeRange is a time filter: times of day, or relative (+): the start
// from the trace's first call, the end from the first call passing the
// other filters.
type TimeRange struct {
	Lo, Hi       time.Duration
	RelLo, RelHi bool
	HasLo, HasHi bool
}

// ParseTime reads a time filter: [START]-[END], each
// [+][HH:][MM:][SS][.sss].
func ParseTime(s string) (TimeRange, error) {
	lo, hi, ok := strings.Cut(s, "-")
	var r TimeRange
	if !ok || lo == "" && hi == "" {
		return r, fmt.Errorf("%q: want [START]-[END]", s)
	}
	var err error
	if lo != "" {
		r.HasLo = true
		if r.Lo, r.RelLo, err = ParseStamp(lo); err != nil {
			return r, fmt.Errorf("%q: %v", s, err)
		}
	}
	if hi != "" {
		r.HasHi = true
		if r.Hi, r.RelHi, err = ParseStamp(hi); err != nil {
			return r, fmt.Errorf("%q: %v", s, err)
		}
		if r.HasLo && r.RelLo == r.RelHi && r.Hi < r.Lo {
			return r, fmt.Errorf("%q: the end is before the start", s)
		}
	}
	return r, nil
}

// ParseStamp reads a moment, [+][HH:][MM:][SS][.sss]: with +, from the
// trace's first call, else a time of day.
func ParseStamp(s string) (time.Duration, bool, error) {
	rel := strings.HasPrefix(s, "+")
	s = strings.TrimPrefix(s, "+")
	parts := strings.Split(s, ":")
	if len(parts) > 3 || s == "" {
		return 0, rel, fmt.Errorf("%q is not [+][HH:][MM:][SS][.sss]", s)
	}
	var d time.Duration
	for i, p := range parts {
		last := i == len(parts)-1
		if last {
			f, err := strconv.ParseFloat(p, 64)
			if err != nil || !(f >= 0 && f < 1e9) || p == "" || strings.ContainsAny(p, "eEnNxXpP") {
				return 0, rel, fmt.Errorf("%q is not [+][HH:][MM:][SS][.sss]", s)
			}
			d = d*60 + time.Duration(f*float64(time.Second))
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return 0, rel, fmt.Errorf("%q is not [+][HH:][MM:][SS][.sss]", s)
		}
		d = d*60 + time.Duration(n)*time.Second
	}
	return d, rel, nil
}

// event is an allocation with its release, if any.
type event struct {
	res         int
	size        uint64
	index       int
	from, to    time.Duration // to < 0: never released
	fromT, toT  float64       // seconds from the first call
	name, rname string
}

// data is what the reports draw.
type data struct {
	title    string
	events   []*event
	res      map[int]string // resource type names
	resOrder []int
	start    time.Duration
	end      float64 // seconds
	// steps change a resource type's total, in call order (times of day
	// until Read ends, then seconds from the first call).
	steps []step
}

type step struct {
	res   int
	t     float64
	at    time.Duration
	delta int64
}

// Read takes the allocations and releases of rd that pass o's filters.
func Read(rd trace.Reader, o Options) (*data, error) {
	d := &data{res: map[int]string{}}
	live := trace.NewMatcher[*event]()
	started := false
	var first time.Duration
	var calls []*trace.Call
	for {
		it, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch v := it.(type) {
		case *trace.Header:
			d.title = v.Process
		case *trace.Resource:
			d.res[v.ID] = v.Name
		case *trace.Call:
			if v.Time < 0 {
				continue // no time: not on a timeline
			}
			if !started || v.Time < first {
				first, started = v.Time, true // the earliest: threads' times may step back
			}
			calls = append(calls, v)
		}
	}
	d.start = first
	lo, hi := time.Duration(math.MinInt64), time.Duration(math.MaxInt64)
	if o.Time.HasLo {
		lo = o.Time.Lo
		if o.Time.RelLo {
			lo += first
		}
	}
	firstPassed := time.Duration(-1)
	for _, c := range calls {
		t := c.Time
		if t < lo {
			continue
		}
		if o.Time.HasHi {
			h := o.Time.Hi
			if o.Time.RelHi {
				if firstPassed < 0 {
					firstPassed = t
				}
				h += firstPassed
			}
			hi = h
		}
		if t > hi {
			break
		}
		if !o.Index.has(uint64(c.Index)) {
			continue
		}
		if c.Alloc {
			if !o.Size.has(c.Size) {
				continue
			}
			e := &event{res: c.Res, size: c.Size, index: c.Index, from: t, to: -1, name: c.Name}
			live.Alloc(c, false, e)
			d.events = append(d.events, e)
			d.steps = append(d.steps, step{res: c.Res, at: t, delta: int64(c.Size)})
			if !slices.Contains(d.resOrder, c.Res) {
				d.resOrder = append(d.resOrder, c.Res)
			}
			continue
		}
		if e, ok := live.Release(c, false); ok {
			e.to = t
			d.steps = append(d.steps, step{res: e.res, at: t, delta: -int64(e.size)})
		}
	}
	for _, e := range d.events {
		e.fromT = (e.from - first).Seconds()
		d.end = max(d.end, e.fromT)
		if e.to >= 0 {
			e.toT = (e.to - first).Seconds()
			d.end = max(d.end, e.toT)
		}
		e.rname = d.res[e.res]
		if e.rname == "" {
			e.rname = fmt.Sprintf("<%d>", e.res)
		}
	}
	for _, e := range d.events {
		if e.to < 0 {
			e.toT = d.end
		}
	}
	for i := range d.steps {
		d.steps[i].t = (d.steps[i].at - first).Seconds()
	}
	return d, nil
}

// Draw writes each report of o into out-<kind>.<png|svg> and returns the
// files written.
func Draw(rd trace.Reader, out string, o Options) ([]string, error) {
	d, err := Read(rd, o)
	if err != nil {
		return nil, err
	}
	if len(d.events) == 0 {
		return nil, fmt.Errorf("no allocation with a time passes the filters: nothing to draw")
	}
	ext := "png"
	if o.SVG {
		ext = "svg"
	}
	var files []string
	for _, kind := range o.Reports {
		name := out + "-" + kind + "." + ext
		f, err := os.Create(name)
		if err != nil {
			return files, err
		}
		err = d.render(f, kind, ext, o)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(name)
			return files, fmt.Errorf("%s: %w", name, err)
		}
		files = append(files, name)
	}
	return files, nil
}

// SVGs draws the reports kinds of rd as SVG, in memory (the HTML page's).
func SVGs(rd trace.Reader, kinds []string, o Options) ([][]byte, error) {
	d, err := Read(rd, o)
	if err != nil {
		return nil, err
	}
	if len(d.events) == 0 {
		return nil, fmt.Errorf("no allocation with a time: nothing to draw")
	}
	var out [][]byte
	for _, kind := range kinds {
		var b bytes.Buffer
		if err := d.render(&b, kind, "svg", o); err != nil {
			return out, err
		}
		out = append(out, b.Bytes())
	}
	return out, nil
}

// render draws report kind of d into w as ext (png, svg).
func (d *data) render(w io.Writer, kind, ext string, o Options) (err error) {
	var p *plot.Plot
	switch kind {
	case Totals:
		p, err = d.totals()
	case Activity:
		p, err = d.activity(o.Slice)
	case Lifetime:
		p, err = d.lifetime(o.LogBase)
	case HistCount:
		p, err = d.histogram(false)
	case HistSize:
		p, err = d.histogram(true)
	default:
		return fmt.Errorf("unknown report %q", kind)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	// gonum panics on what it cannot draw: an error here, not a crash.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: drawing: %v", kind, r)
		}
	}()
	sx, sy := o.ScaleX, o.ScaleY
	if sx == 0 {
		sx = 100
	}
	if sy == 0 {
		sy = 100
	}
	wt, err := p.WriterTo(vg.Length(sx/100)*20*vg.Centimeter, vg.Length(sy/100)*12*vg.Centimeter, ext)
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}

var palette = []color.Color{
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Add(plotter.NewGrid())
	return p
}

// FormatBytes prints a size as heaptrack_print does: plain bytes below
// 1000, else two decimals of K, M, G or T (powers of 1000). The reports'
// one way (postproc's summary uses it too).
func FormatBytes(n uint64) string {
	if n < 1000 {
		return fmt.Sprintf("%dB", n)
	}
	units := []string{"B", "K", "M", "G", "T"}
	v, i := float64(n), 0
	for i < len(units)-1 && v > 1000 {
		v /= 1000
		i++
	}
	return fmt.Sprintf("%.2f%s", v, units[i])
}

// totals: each resource type's total held, a step at each call.
func (d *data) totals() (*plot.Plot, error) {
	p := newPlot(d.title+": resources held", "time (s)", "held (bytes, or count)")
	var notes []string
	for i, res := range d.resOrder {
		name := ""
		for _, e := range d.events {
			if e.res == res {
				name = e.rname
				break
			}
		}
		// In call order: the order the program made them in (times may tie,
		// or, across threads, step back a little: the line does not).
		xys := plotter.XYs{{X: 0, Y: 0}}
		var cur, peak int64
		var peakAt, last float64
		for _, s := range d.steps {
			if s.res != res {
				continue
			}
			last = max(last, s.t)
			xys = append(xys, plotter.XY{X: last, Y: float64(cur)})
			cur += s.delta
			xys = append(xys, plotter.XY{X: last, Y: float64(cur)})
			if cur > peak {
				peak, peakAt = cur, last
			}
		}
		xys = append(xys, plotter.XY{X: d.end, Y: float64(cur)})
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		l.Color = palette[i%len(palette)]
		p.Add(l)
		p.Legend.Add(name, l)
		notes = append(notes, fmt.Sprintf("%s: peak %s after %.3fs, %s at the end", name, FormatBytes(uint64(peak)), peakAt, FormatBytes(uint64(cur))))
	}
	p.Title.Text += "\n" + strings.Join(notes, "; ")
	p.Legend.Top = true
	return p, nil
}

// activity: the allocations and releases of each slice, drawn at the
// slice's middle.
func (d *data) activity(slice time.Duration) (*plot.Plot, error) {
	s := slice.Seconds()
	if s <= 0 {
		s = d.end / 20
	}
	if s <= 0 {
		s = 0.001
	}
	n := int(d.end/s) + 1
	if n > 100000 {
		return nil, fmt.Errorf("--slice %v: %d slices; take a longer one", slice, n)
	}
	allocs, frees := make([]float64, n), make([]float64, n)
	slot := func(t float64) int { return min(max(int(t/s), 0), n-1) }
	for _, e := range d.events {
		allocs[slot(e.fromT)]++
		if e.to >= 0 {
			frees[slot(e.toT)]++
		}
	}
	busiest, at := 0.0, 0
	p := newPlot(d.title+": activity", "time (s)", fmt.Sprintf("calls per %.3gs", s))
	for i, series := range [][]float64{allocs, frees} {
		xys := make(plotter.XYs, n)
		for j, v := range series {
			xys[j] = plotter.XY{X: (float64(j) + 0.5) * s, Y: v}
			if i == 0 && v > busiest {
				busiest, at = v, j
			}
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		l.Color = palette[i]
		p.Add(l)
		p.Legend.Add([]string{"allocations", "releases"}[i], l)
	}
	p.Title.Text += fmt.Sprintf("\nbusiest slice: %d allocations from %.3fs", int(busiest), float64(at)*s)
	p.Legend.Top = true
	return p, nil
}

// lifetime: each allocation a segment at its size, from its allocation
// to its release (red: never released, to the end).
func (d *data) lifetime(base float64) (*plot.Plot, error) {
	p := newPlot(d.title+": lifetimes", "time (s)", "size (bytes)")
	if base > 1 {
		// Log ticks of 10 whatever the base (gonum's); the axis's ends set
		// here: one size only would widen it to 0, which a log axis refuses.
		lo, hi := math.Inf(1), 1.0
		for _, e := range d.events {
			lo, hi = math.Min(lo, float64(max(e.size, 1))), math.Max(hi, float64(max(e.size, 1)))
		}
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Y.Min, p.Y.Max = lo/2, hi*2
	}
	var freed, kept int
	var fx, kx segments
	for _, e := range d.events {
		y := float64(max(e.size, 1))
		seg := [2]plotter.XY{{X: e.fromT, Y: y}, {X: e.toT, Y: y}}
		if e.to >= 0 {
			fx.segs = append(fx.segs, seg)
			freed++
		} else {
			kx.segs = append(kx.segs, seg)
			kept++
		}
	}
	for i, sg := range []*segments{&fx, &kx} {
		if len(sg.segs) == 0 {
			continue
		}
		sg.style = draw.LineStyle{Color: palette[1-i], Width: vg.Points(1)}
		p.Add(sg)
		p.Legend.Add([]string{"released", "never released"}[i], sg)
	}
	p.Title.Text += fmt.Sprintf("\n%d allocations: %d released, %d never", len(d.events), freed, kept)
	p.Legend.Top = true
	return p, nil
}

// histogram: the allocations (or their bytes) of each size.
func (d *data) histogram(bytes bool) (*plot.Plot, error) {
	by := map[uint64]float64{}
	for _, e := range d.events {
		if bytes {
			by[e.size] += float64(e.size)
		} else {
			by[e.size]++
		}
	}
	sizes := make([]uint64, 0, len(by))
	for s := range by {
		sizes = append(sizes, s)
	}
	slices.Sort(sizes)
	top := sizes[0]
	for _, s := range sizes {
		if by[s] > by[top] {
			top = s
		}
	}
	what, unit := "allocations", "allocations"
	if bytes {
		what, unit = "bytes allocated", "bytes"
	}
	p := newPlot(d.title+": "+what+" by size", "allocation size (bytes)", unit)
	// A bar at each size: an impulse of the size's value.
	logX := len(sizes) > 1 && sizes[len(sizes)-1] > 100*max(sizes[0], 1)
	bars := &segments{style: draw.LineStyle{Color: palette[1], Width: vg.Points(2)}}
	for _, s := range sizes {
		x := float64(s)
		if logX {
			x = max(x, 1)
		}
		bars.segs = append(bars.segs, [2]plotter.XY{{X: x, Y: 0}, {X: x, Y: by[s]}})
	}
	p.Add(bars)
	if logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		p.X.Min = math.Max(1, float64(sizes[0])/2)
	}
	p.Y.Min = 0
	v := fmt.Sprintf("%d", int64(by[top]))
	if bytes {
		v = FormatBytes(uint64(by[top]))
	}
	p.Title.Text += fmt.Sprintf("\nmost: %d-byte allocations, %s; %d sizes", top, v, len(sizes))
	return p, nil
}

// segments is a plotter of separate line segments: the lifetimes, the
// histograms' bars (a plotter.Line breaks at no point: NaNs in its data
// make the axes' ranges NaN).
type segments struct {
	segs  [][2]plotter.XY
	style draw.LineStyle
}

// Plot draws the segments (plot.Plotter).
func (s *segments) Plot(c draw.Canvas, p *plot.Plot) {
	tx, ty := p.Transforms(&c)
	for _, sg := range s.segs {
		a := vg.Point{X: tx(sg[0].X), Y: ty(sg[0].Y)}
		b := vg.Point{X: tx(sg[1].X), Y: ty(sg[1].Y)}
		if a == b {
			b.X += vg.Points(0.5) // an instant's life: a dot
		}
		c.StrokeLines(s.style, c.ClipLinesXY([]vg.Point{a, b})...)
	}
}

// DataRange is the segments' extent (plot.DataRanger).
func (s *segments) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, ymin = math.Inf(1), math.Inf(1)
	xmax, ymax = math.Inf(-1), math.Inf(-1)
	for _, sg := range s.segs {
		for _, p := range sg {
			xmin, xmax = math.Min(xmin, p.X), math.Max(xmax, p.X)
			ymin, ymax = math.Min(ymin, p.Y), math.Max(ymax, p.Y)
		}
	}
	return
}

// Thumbnail draws the legend's sample (plot.Thumbnailer).
func (s *segments) Thumbnail(c *draw.Canvas) {
	y := c.Center().Y
	c.StrokeLine2(s.style, c.Min.X, y, c.Max.X, y)
}
