package postproc

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"rtrace/internal/flame"
	"rtrace/internal/trace"
	"rtrace/timeline"
)

// The summary of a trace's heap, as heaptrack_print and memcheck open
// their reports (docs/REPORTS.md, "The summary"): the calls to allocation
// functions, the temporary allocations, the peak of the heap and when it
// was reached, the peak RSS, the memory left allocated at the end, and
// memcheck's "total heap usage" line. Labelled as heaptrack_print labels
// them, so that its users and their scripts read them at once.

// heapSummary accumulates the memory calls (the resource type named
// "memory") of a trace in call order.
type heapSummary struct {
	memory map[int]bool // the resource types that are memory
	live   map[uint64]blockKey
	seed   maphash.Seed

	// sites: the allocations by backtrace (the sections), when kept.
	sites     map[uint64]*site
	peakEpoch uint64 // new peaks so far

	allocs, frees, temporary uint64
	allocated                uint64 // bytes, ignoring releases
	cur, peak                uint64 // bytes live
	peakAt                   time.Duration
	leakedBlocks             uint64   // taken over by a newer allocation of their id
	leakedBytes              uint64   // theirs
	last                     blockKey // the last allocation's, since the last release
	lastValid                bool

	// start, end: the first memory call's time of day and the last's (the
	// header's time is rtrace's start, before the program ran).
	start, end time.Duration
	startSet   bool
	hasCalls   bool
	pid        int     // the trace's process (its header's)
	peakRSS    uint64  // bytes; 0: the trace does not say
	leaksOnly  bool    // the input is a leak report: its totals are the leaks'
	at         *Moment // the moment the trace was read up to (nil: its end)

	// suppressed: the leaks suppressions left out, not in the total.
	suppressed suppressed
}

// blockKey is what heaptrack calls an allocation's info: its size and
// its backtrace. A release of a block whose key is the last allocation's,
// with no release in between, is a temporary allocation
// (src/analyze/accumulatedtracedata.cpp, lastAllocationPtr).
type blockKey struct {
	size uint64
	bt   uint64
}

// site is what the allocations of one backtrace did.
type site struct {
	frames            []trace.Frame
	calls, temporary  uint64
	live, leakedBytes uint64 // bytes live now; taken over (never released)
	leakedBlocks      uint64 // taken over
	liveBlocks        uint64
	// atPeak is live at the last peak: brought up to date (synced) when
	// the site changes after a peak it has not seen, and at the end.
	atPeak, synced uint64
	suppressed     bool // its leaks are left out
}

// leaked is what the site never released, 0 when suppressed.
func (st *site) leaked() uint64 {
	if st.suppressed {
		return 0
	}
	return st.live + st.leakedBytes
}

func newHeapSummary() *heapSummary {
	return &heapSummary{memory: map[int]bool{}, live: map[uint64]blockKey{}, seed: maphash.MakeSeed()}
}

// keepSites makes the summary keep the allocations by backtrace, for the
// sections (Summarize).
func (s *heapSummary) keepSites() { s.sites = map[uint64]*site{} }

// siteOf is bt's site, brought up to the last peak before it changes.
func (s *heapSummary) siteOf(bt uint64, frames []trace.Frame) *site {
	st := s.sites[bt]
	if st == nil {
		st = &site{frames: frames, synced: s.peakEpoch}
		s.sites[bt] = st
	}
	if st.synced < s.peakEpoch {
		st.atPeak, st.synced = st.live, s.peakEpoch // unchanged since that peak
	}
	return st
}

// item takes a trace item in order.
func (s *heapSummary) item(it trace.Item) {
	switch it := it.(type) {
	case *trace.Header:
		s.pid = it.Pid
		for _, f := range it.Filter {
			if f == "leaks" {
				s.leaksOnly = true
			}
		}
	case *trace.Resource:
		if it.Name == "memory" {
			s.memory[it.ID] = true
		}
	case *trace.Usage:
		if s.pid == 0 || it.Pid == s.pid {
			s.peakRSS = max(s.peakRSS, it.PeakRSS) // the trace's process's
		}
	case *trace.Call:
		s.call(it)
	}
}

// ofDay is the time of day t on the clock of the trace's first memory
// call: past midnight, a day later (a step back of less than 12 hours
// is a call reported late).
func (s *heapSummary) ofDay(t time.Duration) time.Duration {
	if t < s.start && s.start-t > 12*time.Hour {
		return t + 24*time.Hour
	}
	return t
}

// call takes a call in call order.
func (s *heapSummary) call(c *trace.Call) {
	if !s.memory[c.Res] {
		return
	}
	if c.Time >= 0 {
		if !s.startSet {
			s.start, s.startSet = c.Time, true
		}
		s.end = max(s.end, s.ofDay(c.Time))
		s.hasCalls = true
	}
	if c.Alloc {
		k := blockKey{size: c.Size, bt: s.backtrace(c.Frames)}
		if old, ok := s.live[c.ID]; ok {
			// Taken over: its release was not seen. sp-rtrace's leak
			// report counts it leaked; the heap no longer holds it.
			s.cur -= old.size
			s.leakedBlocks++
			s.leakedBytes += old.size
			if s.sites != nil {
				st := s.siteOf(old.bt, nil)
				st.live -= old.size
				st.liveBlocks--
				st.leakedBytes += old.size
				st.leakedBlocks++
			}
		}
		s.live[c.ID] = k
		s.allocs++
		s.allocated += c.Size
		s.cur += c.Size
		if s.sites != nil {
			st := s.siteOf(k.bt, c.Frames)
			st.calls++
			st.live += c.Size
			st.liveBlocks++
		}
		if s.cur > s.peak {
			s.peak, s.peakAt = s.cur, s.end-s.start
			s.peakEpoch++
		}
		s.last, s.lastValid = k, true
		return
	}
	k, ok := s.live[c.ID]
	if !ok {
		return // a block allocated before the trace began
	}
	delete(s.live, c.ID)
	s.frees++
	s.cur -= k.size
	temporary := s.lastValid && k == s.last
	if temporary {
		s.temporary++
	}
	s.lastValid = false
	if s.sites != nil {
		st := s.siteOf(k.bt, nil)
		st.live -= k.size
		st.liveBlocks--
		if temporary {
			st.temporary++
		}
	}
}

// backtrace is a hash of a call's frames.
func (s *heapSummary) backtrace(fs []trace.Frame) uint64 {
	var h maphash.Hash
	h.SetSeed(s.seed)
	var b [8]byte
	for _, f := range fs {
		for i := range b {
			b[i] = byte(f.Addr >> (8 * i))
		}
		h.Write(b[:])
		if f.Addr == 0 {
			h.WriteString(f.Text)
		}
	}
	return h.Sum64()
}

// lines are the summary's lines.
func (s *heapSummary) lines() []string {
	runtime := (s.end - s.start).Seconds()
	if !s.hasCalls || runtime <= 0 {
		runtime = 0.001 // heaptrack's least: a millisecond
	}
	var out []string
	if s.leaksOnly {
		out = append(out, "the input is a leak report: these totals are of the leaks it lists")
	}
	out = append(out,
		fmt.Sprintf("total runtime: %.2fs.", runtime),
		fmt.Sprintf("calls to allocation functions: %d (%d/s)", s.allocs, int64(float64(s.allocs)/runtime)),
		fmt.Sprintf("temporary memory allocations: %d (%d/s)", s.temporary, int64(float64(s.temporary)/runtime)),
		fmt.Sprintf("peak heap memory consumption: %s after %.3fs", formatBytes(s.peak), s.peakAt.Seconds()))
	if s.at != nil {
		// The RSS is read at the program's end: not of this moment.
	} else if s.peakRSS > 0 {
		out = append(out, fmt.Sprintf("peak RSS (including rtrace overhead): %s", formatBytes(s.peakRSS)))
	} else {
		out = append(out, "peak RSS (including rtrace overhead): unknown (the trace does not say)")
	}
	sup := &s.suppressed
	leaked := s.leakedBlocks + uint64(len(s.live)) - sup.blocks
	if s.at != nil {
		out = append(out,
			fmt.Sprintf("memory allocated at %s: %s in %d blocks", s.at.Text, formatBytes(s.cur+s.leakedBytes-sup.bytes), leaked))
	} else {
		out = append(out,
			fmt.Sprintf("total memory leaked: %s in %d blocks", formatBytes(s.cur+s.leakedBytes-sup.bytes), leaked))
	}
	if sup.blocks > 0 {
		out = append(out, sup.String())
	}
	out = append(out,
		fmt.Sprintf("total heap usage: %s allocs, %s frees, %s bytes allocated", commas(s.allocs), commas(s.frees), commas(s.allocated)))
	return out
}

// formatBytes prints a size as heaptrack_print does (timeline.FormatBytes).
func formatBytes(n uint64) string { return timeline.FormatBytes(n) }

// commas prints n with thousands separators, as memcheck does.
func commas(n uint64) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// sectionTop is how many backtraces a section lists (heaptrack_print's
// -n default).
const sectionTop = 10

// readSites reads the trace in into a summary that keeps its allocation
// sites, the mappings going to opts.Resolver (when any), with the
// suppressions of opts applied and every site brought up to the peak. It
// returns how it located frames, and the read error that ended the input.
func readSites(in trace.Reader, opts Options) (*heapSummary, func(trace.Frame) trace.Location, error) {
	sums, loc, err := readSitesAt(in, opts, []*Moment{nil})
	return sums[0], loc, err
}

// readSitesAt is readSites of one pass over in, a summary for each
// moment: of what happened up to it (nil: to the end).
func readSitesAt(in trace.Reader, opts Options, at []*Moment) ([]*heapSummary, func(trace.Frame) trace.Location, error) {
	sums := make([]*heapSummary, len(at))
	done := make([]bool, len(at))
	for i := range sums {
		sums[i] = newHeapSummary()
		sums[i].keepSites()
		sums[i].at = at[i]
	}
	binary := false
	var readErr error
	memory := map[int]bool{}
	timed, untimed := false, false
	for {
		it, err := in.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			readErr = err
			break
		}
		if m, ok := it.(*trace.Mapping); ok && opts.Resolver != nil {
			opts.Resolver.AddMapping(*m)
		}
		if h, ok := it.(*trace.Header); ok {
			binary = h.Binary
		}
		if r, ok := it.(*trace.Resource); ok && r.Name == "memory" {
			memory[r.ID] = true
		}
		c, _ := it.(*trace.Call)
		if c != nil && memory[c.Res] {
			timed, untimed = timed || c.Time >= 0, untimed || c.Time < 0
		}
		for i, s := range sums {
			if done[i] {
				continue
			}
			if c != nil && at[i] != nil && at[i].after(s, c) {
				done[i] = true // what follows is after the moment
				continue
			}
			s.item(it)
		}
	}
	loc := locatorOf(opts.Resolver)
	for i, s := range sums {
		if at[i] != nil && untimed && !timed {
			return sums, loc, errNoTimes
		}
		s.suppress(&Suppressions{User: opts.Suppressions, Builtin: binary && !opts.NoBuiltin}, loc)
		s.syncPeak()
	}
	return sums, loc, readErr
}

// Summarize writes the heap summary of the trace in to w, a line each,
// then the backtraces that leaked most, held most at the peak, made most
// temporary allocations and most calls, heaptrack_print's sections
// largest first, each backtrace's frames named by res when not nil. A
// cut input is said first.
func Summarize(in trace.Reader, w io.Writer, opts Options) error {
	if len(opts.At) == 2 {
		return diffAt(in, w, opts)
	}
	var at *Moment
	if len(opts.At) == 1 {
		at = &opts.At[0]
	}
	sums, _, readErr := readSitesAt(in, opts, []*Moment{at})
	if readErr == errNoTimes {
		return readErr
	}
	s := sums[0]
	res := opts.Resolver
	if !opts.Resolve {
		res = nil // located for the suppressions, not named
	}
	var b strings.Builder
	if readErr != nil {
		fmt.Fprintf(&b, "INCOMPLETE: the input ends early (%v): these are the totals of what was read before\n", readErr)
	}
	for _, l := range s.lines() {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	s.sections(&b, res)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing the output: %w", err)
	}
	return readErr
}

// suppress leaves the leaks of the sites sup matches out of the leaks
// (the total and the section).
func (s *heapSummary) suppress(sup *Suppressions, loc func(trace.Frame) trace.Location) {
	if !sup.Any() {
		return
	}
	for _, st := range s.sortedSites() {
		n := st.liveBlocks + st.leakedBlocks
		if n == 0 || st.frames == nil {
			continue
		}
		if p := sup.match(st.frames, true, loc); p != "" {
			s.suppressed.addN(p, n, st.live+st.leakedBytes)
			st.suppressed = true
		}
	}
}

// sections writes the backtraces of each section, largest first.
func (s *heapSummary) sections(b *strings.Builder, res Resolver) {
	leakTitle, leakWord := "MEMORY LEAKS", "leaked"
	if s.at != nil {
		leakTitle, leakWord = "MEMORY ALLOCATED AT "+s.at.Text, "allocated"
	}
	var sites []*site
	for _, st := range s.sortedSites() {
		if st.frames != nil {
			sites = append(sites, st)
		}
	}
	for _, sec := range []struct {
		title string
		cost  func(*site) uint64
		label func(*site) string
	}{
		{leakTitle, (*site).leaked, func(st *site) string {
			return fmt.Sprintf("%s %s in %d blocks of %d calls from", formatBytes(st.live+st.leakedBytes), leakWord, st.liveBlocks+st.leakedBlocks, st.calls)
		}},
		{"PEAK MEMORY CONSUMERS", func(st *site) uint64 { return st.atPeak }, func(st *site) string {
			return fmt.Sprintf("%s peak memory consumed over %d calls from", formatBytes(st.atPeak), st.calls)
		}},
		{"MOST TEMPORARY ALLOCATIONS", func(st *site) uint64 { return st.temporary }, func(st *site) string {
			return fmt.Sprintf("%d temporary allocations of %d allocations in total (%.2f%%) from", st.temporary, st.calls, 100*float64(st.temporary)/float64(st.calls))
		}},
		{"MOST CALLS TO ALLOCATION FUNCTIONS", func(st *site) uint64 { return st.calls }, func(st *site) string {
			return fmt.Sprintf("%d calls to allocation functions with %s peak consumption from", st.calls, formatBytes(st.atPeak))
		}},
	} {
		slices.SortStableFunc(sites, func(x, y *site) int {
			if c := cmp.Compare(sec.cost(y), sec.cost(x)); c != 0 {
				return c
			}
			return cmp.Compare(frameKey(x.frames), frameKey(y.frames))
		})
		fmt.Fprintf(b, "\n%s\n", sec.title)
		n := 0
		for _, st := range sites {
			if n == sectionTop || sec.cost(st) == 0 {
				break
			}
			n++
			b.WriteString(sec.label(st))
			b.WriteByte('\n')
			for _, f := range st.frames {
				text := f.Text
				if text == "" && res != nil {
					text = res.Frame(f.Addr)
				}
				fmt.Fprintf(b, "\t0x%x", f.Addr)
				if text != "" {
					b.WriteString(" " + text)
				}
				b.WriteByte('\n')
			}
		}
		if n == 0 {
			b.WriteString("none\n")
		}
	}
}

// frameKey orders backtraces of equal cost, for a stable report.
func frameKey(fs []trace.Frame) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "%016x", f.Addr)
	}
	return b.String()
}

// Flame graph cost types, heaptrack_print's --flamegraph-cost-type.
const (
	CostAllocations = "allocations" // calls to allocation functions
	CostTemporary   = "temporary"   // temporary allocations
	CostLeaked      = "leaked"      // bytes never released (suppressions left out)
	CostPeak        = "peak"        // bytes held at the heap's peak
)

// FlameCosts are the cost types, in help order.
var FlameCosts = []string{CostAllocations, CostTemporary, CostLeaked, CostPeak}

// FlameStacks reads the trace in and returns its allocation sites as
// flame graph stacks of cost (FlameCosts), outermost caller first, each
// frame named by opts.Resolver (its function, else its address and
// module), and the unit to print a cost in.
func FlameStacks(in trace.Reader, opts Options, cost string) ([]flame.Stack, func(uint64) string, error) {
	s, loc, readErr := readSites(in, opts)
	value := map[string]func(*site) uint64{
		CostAllocations: func(st *site) uint64 { return st.calls },
		CostTemporary:   func(st *site) uint64 { return st.temporary },
		CostLeaked:      (*site).leaked,
		CostPeak:        func(st *site) uint64 { return st.atPeak },
	}[cost]
	if value == nil {
		return nil, nil, fmt.Errorf("unknown cost type %q (%s)", cost, strings.Join(FlameCosts, ", "))
	}
	unit := formatBytes
	switch cost {
	case CostAllocations:
		unit = func(n uint64) string { return fmt.Sprintf("%d calls", n) }
	case CostTemporary:
		unit = func(n uint64) string { return fmt.Sprintf("%d temporary", n) }
	}
	names := map[uint64]string{}
	name := func(f trace.Frame) string {
		if n, ok := names[f.Addr]; ok && f.Addr != 0 {
			return n
		}
		l := loc(f)
		n := l.Func
		if n == "" {
			n = fmt.Sprintf("0x%x", f.Addr)
			if l.Module != "" {
				n += " (" + filepath.Base(l.Module) + ")"
			}
		}
		names[f.Addr] = n
		return n
	}
	var stacks []flame.Stack
	for _, st := range s.sortedSites() {
		v := value(st)
		if v == 0 || st.frames == nil {
			continue
		}
		fs := make([]string, len(st.frames))
		for i, f := range st.frames {
			fs[len(fs)-1-i] = name(f)
		}
		stacks = append(stacks, flame.Stack{Frames: fs, Value: v})
	}
	return stacks, unit, readErr
}

// syncPeak brings every site up to the last peak.
func (s *heapSummary) syncPeak() {
	for _, st := range s.sites {
		if st.synced < s.peakEpoch {
			st.atPeak, st.synced = st.live, s.peakEpoch
		}
	}
}

// sortedSites are the sites in the order of their backtraces.
func (s *heapSummary) sortedSites() []*site {
	sites := make([]*site, 0, len(s.sites))
	for _, st := range s.sites {
		sites = append(sites, st)
	}
	slices.SortFunc(sites, func(x, y *site) int { return cmp.Compare(frameKey(x.frames), frameKey(y.frames)) })
	return sites
}

// FlameGraph writes the flame graph of cost of the trace in to w, a
// self-contained SVG (internal/flame).
func FlameGraph(in trace.Reader, w io.Writer, opts Options, cost string) error {
	stacks, unit, readErr := FlameStacks(in, opts, cost)
	if unit == nil {
		return readErr
	}
	title := "rtrace: " + cost
	if readErr != nil {
		title += " (INCOMPLETE: the input ends early)"
	}
	if err := flame.Write(w, flame.Graph{Title: title, Unit: unit}, stacks); err != nil {
		return fmt.Errorf("writing the output: %w", err)
	}
	return readErr
}
