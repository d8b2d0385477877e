package pprofout

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/google/pprof/profile"

	"rtrace/internal/trace"
)

// Resolver locates backtrace addresses; *resolver.Resolver is one.
type Resolver interface {
	AddMapping(trace.Mapping)
	Locate(addr uint64) trace.Location
}

// Writer builds a profile from trace items (see the package comment). It
// implements trace.Writer. It keeps the live allocations and the distinct
// backtraces, not the calls.
type Writer struct {
	out      io.Writer
	locs     *locTable
	hdr      trace.Header
	ended    bool           // the process exited
	names    map[int]string // resource type names by ID
	refcount map[int]bool
	live     *trace.Matcher[*live]
	stacks   map[string]*stack
	order    []*stack // in first-seen order
	key      []byte   // scratch for stack keys
	closed   bool
}

// live is an allocation not released and the stack it counts in.
type live struct {
	st   *stack
	size int64
}

// stack is one sample: a resource type and backtrace, and its totals.
type stack struct {
	sample                                    *profile.Sample
	allocs, allocSpace, inuseObjs, inuseSpace int64
}

// NewWriter returns a Writer whose Close writes the profile to w. res
// locates the frames the trace has not resolved; with nil they keep their
// address and module only.
func NewWriter(w io.Writer, res Resolver) *Writer {
	return &Writer{
		out:      w,
		locs:     newLocTable(res),
		names:    map[int]string{},
		refcount: map[int]bool{},
		live:     trace.NewMatcher[*live](),
		stacks:   map[string]*stack{},
	}
}

// Write takes one item into account.
func (w *Writer) Write(it trace.Item) error {
	if w.closed {
		return errors.New("pprofout: write after close")
	}
	switch it := it.(type) {
	case *trace.Header:
		w.hdr = *it
	case *trace.Resource:
		if _, ok := w.names[it.ID]; !ok {
			w.names[it.ID], w.refcount[it.ID] = it.Name, it.Refcount
		}
	case *trace.Mapping:
		if w.locs.addMapping(*it) {
			clear(w.stacks) // new ones from here; the old keep their counts
		}
	case *trace.Call:
		w.call(it)
	case *trace.Task:
		if it.Exit && it.Tid == w.hdr.Pid && w.hdr.Pid != 0 {
			w.ended = true
		}
	case nil:
		return errors.New("pprofout: writing a nil item")
	}
	return nil
}

// call counts an allocation or matches a release (trace.Matcher, as
// postproc's leak filter).
func (w *Writer) call(c *trace.Call) {
	if !c.Alloc {
		if l, ok := w.live.Release(c, w.refcount[c.Res]); ok {
			l.st.inuseObjs--
			l.st.inuseSpace -= l.size
		}
		return
	}
	size := int64(min(c.Size, math.MaxInt64))
	st := w.stack(c)
	st.allocs++
	st.allocSpace += size
	if w.live.Alloc(c, w.refcount[c.Res], &live{st: st, size: size}) {
		st.inuseObjs++
		st.inuseSpace += size
	}
}

// stack returns the sample of c's resource type and backtrace.
func (w *Writer) stack(c *trace.Call) *stack {
	w.key = strconv.AppendInt(w.key[:0], int64(c.Res), 10)
	for _, f := range c.Frames {
		w.key = append(w.key, ' ')
		w.key = strconv.AppendUint(w.key, f.Addr, 16)
	}
	if st := w.stacks[string(w.key)]; st != nil {
		return st
	}
	s := &profile.Sample{Label: map[string][]string{"resource": {w.resName(c.Res)}}}
	for _, f := range c.Frames {
		s.Location = append(s.Location, w.locs.location(f))
	}
	if len(s.Location) == 0 {
		s.Location = []*profile.Location{w.locs.noBacktrace()}
	}
	st := &stack{sample: s}
	w.stacks[string(w.key)] = st
	w.order = append(w.order, st)
	return st
}

// resName is the name of resource type id.
func (w *Writer) resName(id int) string {
	if n, ok := w.names[id]; ok {
		return n
	}
	return "resource " + strconv.Itoa(id)
}

// Close writes the gzipped profile. It does not close the underlying
// writer.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	p := &profile.Profile{
		SampleType: []*profile.ValueType{
			{Type: "alloc_objects", Unit: "count"}, {Type: "alloc_space", Unit: "bytes"},
			{Type: "inuse_objects", Unit: "count"}, {Type: "inuse_space", Unit: "bytes"},
			{Type: "leak_objects", Unit: "count"}, {Type: "leak_space", Unit: "bytes"},
		},
		DefaultSampleType: "inuse_space",
		Comments:          []string{fmt.Sprintf("rtrace: %s (pid %d)", w.hdr.Process, w.hdr.Pid)},
	}
	if !w.hdr.Time.IsZero() {
		p.TimeNanos = w.hdr.Time.UnixNano()
	}
	if w.ended {
		p.Comments = append(p.Comments, "process end seen: leak_* are the allocations never released")
	} else {
		p.Comments = append(p.Comments, "process end not seen: leak_* are zero; inuse_* are the allocations live when the trace stopped")
	}
	for _, st := range w.order {
		var leaks, leakSpace int64
		if w.ended {
			leaks, leakSpace = st.inuseObjs, st.inuseSpace
		}
		st.sample.Value = []int64{st.allocs, st.allocSpace, st.inuseObjs, st.inuseSpace, leaks, leakSpace}
		p.Sample = append(p.Sample, st.sample)
	}
	p.Mapping, p.Location, p.Function = w.locs.mappings, w.locs.locations, w.locs.functions
	if err := p.CheckValid(); err != nil {
		return fmt.Errorf("pprofout: invalid profile: %w", err)
	}
	if err := p.Write(w.out); err != nil {
		return fmt.Errorf("pprofout: writing profile: %w", err)
	}
	return nil
}
