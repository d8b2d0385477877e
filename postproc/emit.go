package postproc

import (
	"fmt"

	"rtrace/internal/trace"
)

// Writing. Calls that -l and -c keep are written at the end of the input,
// with the comments read among them; sp-rtrace (writer.c) places each
// comment before the first call written whose index follows it.

// heldComment is a comment read after call number after (a seq), written
// before the first call written that was read after it.
type heldComment struct {
	after int
	c     *trace.Comment
}

// total counts allocations and their sizes.
type total struct{ n, size uint64 }

// finish writes what was held (opened by a note that the input was cut,
// readErr, and the heap's summary), what -l and -c kept, the remaining
// comments and, with -l, the leak summary.
func (r *runner) finish(readErr error) error {
	cut := func() {
		if readErr != nil {
			r.write(&trace.Comment{Text: "## INCOMPLETE: the input ends early (" + readErr.Error() + "): this output holds what was read before, not the whole trace"})
		}
	}
	if r.holding {
		r.holding = false
		cut()
		if r.heading {
			for _, l := range r.sum.lines() {
				r.write(&trace.Comment{Text: "## " + l}) // "# " lines are dropped when read back
			}
		}
		for _, it := range r.pre {
			r.write(it)
		}
		r.pre = nil
	} else {
		defer cut() // streamed: the last line says it
	}
	if r.leaks != nil {
		live := r.leaks.survivors()
		if r.groups != nil {
			for _, l := range live {
				r.groups.add(l.call, l.seq)
			}
		} else {
			for _, l := range live {
				r.flushHeld(l.seq)
				r.writeCall(l.call)
			}
		}
	}
	if r.groups != nil {
		for _, g := range r.groups.sorted(r.opts.Sort) {
			r.flushHeld(g.seq)
			r.writeGroup(g)
		}
	}
	for _, h := range r.held {
		r.write(h.c)
	}
	r.held = nil
	if r.leaks != nil {
		r.summary()
	}
	return r.werr
}

// flushHeld writes the held comments read before call seq.
func (r *runner) flushHeld(seq int) {
	n := 0
	for n < len(r.held) && r.held[n].after < seq {
		r.write(r.held[n].c)
		n++
	}
	r.held = r.held[n:]
}

// summary writes the leak totals of each resource type written.
func (r *runner) summary() {
	for _, t := range r.kept {
		var sum total
		if s := r.totals[t.ID]; s != nil {
			sum = *s
		}
		r.write(&trace.Comment{Text: fmt.Sprintf("# Resource - %s (%s):", t.Name, t.Desc)})
		r.write(&trace.Comment{Text: fmt.Sprintf("# %d block(s) leaked with total size of %d bytes", sum.n, sum.size)})
	}
}

// tally counts a leak written.
func (r *runner) tally(c *trace.Call) {
	if r.totals == nil || !c.Alloc {
		return
	}
	s := r.totals[c.Res]
	if s == nil {
		s = &total{}
		r.totals[c.Res] = s
	}
	s.n++
	s.size += c.Size
}

// writeCall writes a call, resolved and without arguments as asked.
func (r *runner) writeCall(c *trace.Call) {
	if r.opts.RemoveArgs {
		c.Args = nil
	}
	c.Frames = r.resolve(c.Frames)
	r.tally(c)
	r.write(c)
}

// resolve fills in the Text of unresolved frames.
func (r *runner) resolve(fs []trace.Frame) []trace.Frame {
	if !r.opts.Resolve {
		return fs
	}
	for i := range fs {
		if fs[i].Text == "" {
			fs[i].Text = r.opts.Resolver.Frame(fs[i].Addr)
		}
	}
	return fs
}

func (r *runner) write(it trace.Item) {
	if r.holding {
		r.pre = append(r.pre, it)
		return
	}
	if r.werr == nil {
		r.werr = r.out.Write(it)
	}
}
