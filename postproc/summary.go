package postproc

import (
	"fmt"
	"hash/maphash"
	"io"
	"strings"
	"time"

	"rtrace/internal/trace"
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
	peakRSS    uint64 // bytes; 0: the trace does not say
	leaksOnly  bool   // the input is a leak report: its totals are the leaks'
}

// blockKey is what heaptrack calls an allocation's info: its size and
// its backtrace. A release of a block whose key is the last allocation's,
// with no release in between, is a temporary allocation
// (src/analyze/accumulatedtracedata.cpp, lastAllocationPtr).
type blockKey struct {
	size uint64
	bt   uint64
}

func newHeapSummary() *heapSummary {
	return &heapSummary{memory: map[int]bool{}, live: map[uint64]blockKey{}, seed: maphash.MakeSeed()}
}

// item takes a trace item in order.
func (s *heapSummary) item(it trace.Item) {
	switch it := it.(type) {
	case *trace.Header:
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
		s.peakRSS = max(s.peakRSS, it.PeakRSS)
	case *trace.Call:
		s.call(it)
	}
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
		t := c.Time
		for t < s.start {
			t += 24 * time.Hour // past midnight
		}
		s.end = max(s.end, t)
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
		}
		s.live[c.ID] = k
		s.allocs++
		s.allocated += c.Size
		s.cur += c.Size
		if s.cur > s.peak {
			s.peak, s.peakAt = s.cur, s.end-s.start
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
	if s.lastValid && k == s.last {
		s.temporary++
	}
	s.lastValid = false
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
	if s.peakRSS > 0 {
		out = append(out, fmt.Sprintf("peak RSS (including rtrace overhead): %s", formatBytes(s.peakRSS)))
	} else {
		out = append(out, "peak RSS (including rtrace overhead): unknown (the trace does not say)")
	}
	leaked := s.leakedBlocks + uint64(len(s.live))
	out = append(out,
		fmt.Sprintf("total memory leaked: %s in %d blocks", formatBytes(s.cur+s.leakedBytes), leaked),
		fmt.Sprintf("total heap usage: %s allocs, %s frees, %s bytes allocated", commas(s.allocs), commas(s.frees), commas(s.allocated)))
	return out
}

// formatBytes prints a size as heaptrack_print does: plain bytes below
// 1000, else two decimals of K, M, G or T (powers of 1000).
func formatBytes(n uint64) string {
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

// Summarize writes the heap summary of the trace in to w, a line each.
func Summarize(in trace.Reader, w io.Writer) error {
	s := newHeapSummary()
	var readErr error
	for {
		it, err := in.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			readErr = err
			break
		}
		s.item(it)
	}
	for _, l := range s.lines() {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return fmt.Errorf("writing the output: %w", err)
		}
	}
	return readErr
}
