package postproc

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"rtrace/internal/trace"
)

// ErrNoResolver: Options.Resolve is set but Options.Resolver is nil.
var ErrNoResolver = errors.New("resolving asked for (-r) but no resolver given")

// GroupWriter is a trace.Writer that prints a compressed group in its
// shared form: the calls, a summary comment, then their one backtrace.
// rtext.Writer is one. Run falls back to the summary as a comment and
// each call with the backtrace for writers that are not.
type GroupWriter interface {
	WriteGroup(calls []*trace.Call, comment string, frames []trace.Frame) error
}

// Run copies the trace from in to out through the filters of opts, then
// closes (flushes) out. It streams: without -l or -c each call is written
// as it is read; -l keeps the live allocations, -c the groups, until the
// end of the input.
//
// The header's filter field says what was done, as sp-rtrace's does:
// "leaks" and "resolve" stay once set, "compress" only describes this
// run's output (a compressed trace read back is a list of calls again).
//
// A read error ends the input: what was read is still processed and
// written, and the error is returned.
func Run(in trace.Reader, out trace.Writer, opts Options) error {
	if opts.Resolve && opts.Resolver == nil {
		return ErrNoResolver
	}
	r := newRunner(out, opts)
	readErr := r.read(in)
	err := r.finish(readErr)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if readErr != nil {
		return readErr
	}
	if err != nil {
		return fmt.Errorf("writing the output: %w", err)
	}
	return nil
}

// runner is the state of one Run.
type runner struct {
	opts  Options
	out   trace.Writer
	types map[int]*trace.Resource // every resource type seen
	kept  []*trace.Resource       // those written, for the leak summary
	addrs *addrMatcher

	// sorting: the input is compressed output (calls grouped by
	// backtrace); they are put back in call order first, as sp-rtrace's
	// parser does, so that -l sees each release after its allocation.
	sorting  bool
	unsorted []*trace.Call

	seq      int  // calls read
	buffered bool // -l or -c: calls are written at the end
	held     []heldComment
	leaks    *leakSet
	groups   *grouper
	totals   map[int]*total // -l: allocations written, by resource type
	werr     error          // first write error

	// sum: the heap's summary (summary.go), written first (heading) as
	// comments: every item after the header waits in pre (holding) until
	// it is known.
	sum     *heapSummary
	sup     *Suppressions // the leaks -l leaves out
	headed  bool          // a header was read
	heading bool
	holdAll bool // -l, -c: hold everything (header.go)
	holding bool
	pre     []trace.Item

	// scan: the memory scan of the trace's process (pid) at its end,
	// and pages the pages (addr>>12) where memory blocks were allocated,
	// for the leak kinds of -l (leakkinds.go); kinds: the leaks written
	// by kind.
	scan  *heapScan
	pid   int
	pages map[uint64]struct{}
	kinds kindTotals
}

func newRunner(out trace.Writer, opts Options) *runner {
	r := &runner{opts: opts, out: out, types: map[int]*trace.Resource{}}
	r.setup()
	if len(opts.CallAddress) > 0 {
		r.addrs = newAddrMatcher(opts.CallAddress)
	}
	return r
}

// setup makes the state the leak and compress filters keep.
func (r *runner) setup() {
	r.buffered = r.opts.Leaks || r.opts.Compress
	if r.opts.Leaks && r.leaks == nil {
		r.leaks = newLeakSet()
		r.totals = map[int]*total{}
	}
	if r.opts.Compress && r.groups == nil {
		r.groups = newGrouper()
	}
}

// read consumes the input; it returns the reader's error (not io.EOF).
func (r *runner) read(in trace.Reader) error {
	defer r.sortCalls()
	first := true
	for r.werr == nil {
		it, err := in.Next()
		if err == io.EOF {
			if first {
				return ErrEmpty
			}
			break
		}
		if err != nil {
			return err
		}
		if first {
			h, ok := it.(*trace.Header)
			if !ok {
				return fmt.Errorf("the trace starts with a %T, not a header", it)
			}
			if h.Binary && r.opts.Leaks {
				// A leak report of a raw trace opens with the heap's
				// summary, and leaves glibc's own out.
				r.sum, r.heading = newHeapSummary(), true
			}
			r.sup = &Suppressions{User: r.opts.Suppressions, Builtin: h.Binary && !r.opts.NoBuiltin}
			if !strings.HasPrefix(h.Version, "3.") || h.Arch != "x86_64" {
				// sp-rtrace's traces carry the name the caller used; a
				// trace of another machine's code is not this one's files.
				r.opts.Callees = nil
			}
			if r.sum != nil {
				r.sum.item(h)
			}
			first, r.headed, r.pid = false, true, h.Pid
			r.item(r.header(h))
			r.holding = r.heading || r.holdAll
			continue
		}
		if r.sum != nil {
			if _, call := it.(*trace.Call); !call {
				r.sum.item(it)
			}
		}
		r.item(it)
	}
	return nil
}

// sortCalls runs the calls of a compressed input through the filters in
// the order of their time and index (parse_text.c, compare_calls).
func (r *runner) sortCalls() {
	calls := r.unsorted
	r.sorting, r.unsorted = false, nil
	sort.SliceStable(calls, func(i, j int) bool {
		if calls[i].Time != calls[j].Time {
			return calls[i].Time < calls[j].Time
		}
		return calls[i].Index < calls[j].Index
	})
	for _, c := range calls {
		r.call(c)
	}
}

// header returns the header as this run writes it.
func (r *runner) header(in *trace.Header) *trace.Header {
	h := *in
	has := map[string]bool{}
	for _, f := range in.Filter {
		has[f] = true
	}
	r.sorting = has["compress"]
	if r.opts.Keep {
		// Redo the input's leak and compress filters: what they kept
		// passes again unchanged, and the summaries come back.
		r.opts.Leaks = r.opts.Leaks || has["leaks"]
		r.opts.Compress = r.opts.Compress || has["compress"]
		r.setup()
	}
	// The order of the groups travels with them: a later stage that
	// groups again (resolve, another -c) keeps it unless told another.
	for _, f := range in.Filter {
		if o, ok := strings.CutPrefix(f, sortTag); ok && r.opts.Sort == "" && validSort(o) {
			r.opts.Sort = o
		}
	}
	h.Filter = nil
	for _, f := range []struct {
		name string
		on   bool
	}{
		{"leaks", has["leaks"] || r.opts.Leaks},
		{"compress", r.opts.Compress},
		{"resolve", has["resolve"] || r.opts.Resolve},
	} {
		if f.on {
			h.Filter = append(h.Filter, f.name)
		}
	}
	if r.opts.Compress && r.opts.Sort != "" && r.opts.Sort != SortSizeAsc {
		h.Filter = append(h.Filter, sortTag+r.opts.Sort)
	}
	if r.opts.Depth != nil {
		h.Depth = *r.opts.Depth
	}
	// -l and -c write their calls at the end: everything after the header
	// waits for it too, so that what the end knows (the summary, a cut
	// input) opens the output.
	r.holdAll = r.buffered
	return &h
}

// sortTag marks the groups' order in a header's filters ("sort-size"):
// sp-rtrace's filters are leaks, compress and resolve; its default order
// (size-asc) is not marked, so its golden files hold.
const sortTag = "sort-"

func validSort(s string) bool {
	switch s {
	case SortSize, SortSizeAsc, SortCount, SortCountAsc:
		return true
	}
	return false
}

// item handles one item read.
func (r *runner) item(it trace.Item) {
	switch it := it.(type) {
	case *trace.Resource:
		r.types[it.ID] = it
		if r.opts.Resource != 0 && mask(it.ID)&r.opts.Resource == 0 {
			return
		}
		r.kept = append(r.kept, it)
	case *trace.Context:
		if c := r.opts.Context; c != nil && it.ID&*c == 0 {
			return
		}
	case *trace.Mapping:
		if r.opts.Resolver != nil {
			r.opts.Resolver.AddMapping(*it) // -r, or to name the frames suppressions match
		}
		if r.opts.Callees != nil && any(r.opts.Callees) != any(r.opts.Resolver) {
			r.opts.Callees.AddMapping(*it)
		}
		if r.addrs != nil {
			r.addrs.addMapping(*it)
		}
	case *trace.Comment:
		switch {
		case r.sorting && len(r.unsorted) > 0:
			// Among grouped calls: its place in call order is lost.
			r.held = append(r.held, heldComment{math.MaxInt, it})
			return
		case r.buffered && r.seq > 0:
			r.held = append(r.held, heldComment{r.seq, it})
			return
		}
	case *trace.HeapRegions, *trace.HeapWords:
		if r.leaks != nil {
			if r.scan == nil {
				r.scan = &heapScan{}
			}
			r.scan.take(it, r.pid) // the leaks' kinds: not written on
			return
		}
	case *trace.Call:
		if r.opts.Callees != nil && len(it.Frames) > 0 && aliased[it.Name] {
			if n := aliasOf(it.Name, r.opts.Callees.Callee(it.Frames[0].Addr)); n != "" {
				it.Name = n // the name the program called (Options.Callees)
			}
		}
		if r.sorting {
			r.unsorted = append(r.unsorted, it)
		} else {
			r.call(it)
		}
		return
	}
	r.write(it)
}

// call runs one call through the filters, in sp-rtrace's order: resource
// type, then leaks, then the per-call selections. The selections are
// decided now, on the whole backtrace, and applied when the call is
// written: a call that is not shown still matches its release.
func (r *runner) call(c *trace.Call) {
	r.seq++
	if r.sum != nil {
		r.sum.call(c)
	}
	if r.opts.Resource != 0 && c.Res != 0 && mask(c.Res)&r.opts.Resource == 0 {
		return
	}
	show := r.selected(c)
	if d := r.opts.Depth; d != nil && len(c.Frames) > *d {
		c.Frames = c.Frames[:*d]
	}
	switch {
	case r.leaks != nil:
		t := r.types[c.Res]
		if c.Alloc && t != nil && t.Name == "memory" {
			if r.pages == nil {
				r.pages = map[uint64]struct{}{}
			}
			r.pages[c.ID>>12] = struct{}{}
		}
		r.leaks.add(c, r.seq, show, t != nil && t.Refcount)
	case !show:
	case r.groups != nil:
		r.groups.add(c, r.seq)
	default:
		r.writeCall(c)
	}
}

// selected applies -C, --include, --exclude and --call-address.
func (r *runner) selected(c *trace.Call) bool {
	if m := r.opts.Context; m != nil {
		if *m == 0 && c.Context != 0 || *m != 0 && c.Context&*m == 0 {
			return false
		}
	}
	if r.opts.Include != nil && !r.opts.Include[c.Index] {
		return false
	}
	if r.opts.Exclude[c.Index] {
		return false
	}
	return r.addrs == nil || r.addrs.match(c.Frames)
}

// mask is the -R bit of resource type id (0 for IDs without one).
func mask(id int) uint32 {
	if id < 1 || id > 32 {
		return 0
	}
	return 1 << (id - 1)
}
