package postproc

import (
	"encoding/binary"
	"fmt"
	"sort"

	"rtrace/internal/trace"
)

// grouper is the -c filter: calls grouped by backtrace. As in sp-rtrace
// (rtrace_data.c, bt_compare), two backtraces are the same when their
// frame addresses are; resource type and function name do not matter.
type grouper struct {
	byKey map[string]*group
	list  []*group // in order of first call
	key   []byte
}

// group is the calls sharing one backtrace.
type group struct {
	calls  []*trace.Call
	frames []trace.Frame // the first call's
	seq    int           // of the first call
	count  uint64        // calls
	size   uint64        // their total size
}

func newGrouper() *grouper { return &grouper{byKey: map[string]*group{}} }

// add puts call number seq into its group.
func (g *grouper) add(c *trace.Call, seq int) {
	g.key = g.key[:0]
	if k := kindOf(c); k != KindUnknown {
		g.key = append(g.key, byte(k)) // leaks of one kind a group, as memcheck's loss records
	}
	for _, f := range c.Frames {
		g.key = binary.LittleEndian.AppendUint64(g.key, f.Addr)
	}
	gr := g.byKey[string(g.key)]
	if gr == nil {
		gr = &group{frames: c.Frames, seq: seq}
		g.byKey[string(g.key)] = gr
		g.list = append(g.list, gr)
	}
	if len(gr.calls) > 0 {
		c.Frames = nil // the group keeps one copy
	}
	gr.calls = append(gr.calls, c)
	gr.count++
	gr.size += c.Size
}

// sorted returns the groups in the -s order (default size-asc); groups
// that tie stay in the order of their first call.
func (g *grouper) sorted(order string) []*group {
	less := map[string]func(a, b *group) bool{
		SortSize:     func(a, b *group) bool { return a.size > b.size },
		SortSizeAsc:  func(a, b *group) bool { return a.size < b.size },
		SortCount:    func(a, b *group) bool { return a.count > b.count },
		SortCountAsc: func(a, b *group) bool { return a.count < b.count },
	}[order]
	if less == nil {
		less = func(a, b *group) bool { return a.size < b.size }
	}
	sort.SliceStable(g.list, func(i, j int) bool { return less(g.list[i], g.list[j]) })
	return g.list
}

// writeGroup writes one group: its calls, the summary sp-rtrace's writer.c
// prints ("# allocation summary: N block(s) with total size S"), then the
// shared backtrace.
func (r *runner) writeGroup(gr *group) {
	if r.werr != nil {
		return
	}
	for _, c := range gr.calls {
		if r.opts.RemoveArgs {
			c.Args = nil
		}
		r.tally(c)
	}
	frames := r.resolve(gr.frames)
	summary := fmt.Sprintf("# allocation summary: %d block(s) with total size %d", gr.count, gr.size)
	if gw, ok := r.out.(GroupWriter); ok {
		r.werr = gw.WriteGroup(gr.calls, summary, frames)
		return
	}
	r.write(&trace.Comment{Text: summary})
	for _, c := range gr.calls {
		c.Frames = frames
		r.write(c)
	}
}
