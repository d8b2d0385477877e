package postproc

import (
	"fmt"
	"slices"
	"strings"

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
		if readErr != nil && r.headed {
			r.write(&trace.Comment{Text: "## INCOMPLETE: the input ends early (" + readErr.Error() + "): this output holds what was read before, not the whole trace"})
		}
	}
	var kept []*live
	var supMem, supOther suppressed
	if r.leaks != nil {
		r.classify()
		kept, supMem, supOther = r.suppress(r.leaks.survivors())
		kept = r.showKinds(kept)
	}
	if r.holding {
		r.holding = false
		cut()
		if r.heading {
			r.sum.suppressed = supMem
			lines := r.sum.lines()
			if r.scan != nil && r.scan.regions != nil {
				lines = append(lines, r.kinds.lines(&supMem)...)
			}
			for _, l := range lines {
				r.write(&trace.Comment{Text: "## " + l}) // "# " lines are dropped when read back
			}
		} else if supMem.blocks > 0 {
			r.write(&trace.Comment{Text: "## " + supMem.String()})
		}
		if supOther.blocks > 0 {
			r.write(&trace.Comment{Text: fmt.Sprintf("## suppressed leaks of other resources: %d (%s)", supOther.blocks, supOther.patterns())})
		}
		for _, it := range r.pre {
			r.write(it)
		}
		r.pre = nil
	} else {
		defer cut() // streamed: the last line says it
	}
	if r.leaks != nil {
		if r.groups != nil {
			for _, l := range kept {
				r.groups.add(l.call, l.seq)
			}
		} else {
			for _, l := range kept {
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

// suppressed counts the leaks suppressions left out, by pattern.
type suppressed struct {
	bytes, blocks uint64
	by            map[string]uint64 // blocks
	order         []string
}

func (s *suppressed) add(pattern string, size uint64) { s.addN(pattern, 1, size) }

// addN counts n blocks of size bytes in all that pattern left out.
func (s *suppressed) addN(pattern string, n, size uint64) {
	if s.by == nil {
		s.by = map[string]uint64{}
	}
	if s.by[pattern] == 0 {
		s.order = append(s.order, pattern)
	}
	s.by[pattern] += n
	s.bytes += size
	s.blocks += n
}

// String is the report's line: "suppressed leaks: 13.03K in 16 blocks
// (__nss_module_allocate: 7, ...)".
func (s *suppressed) String() string {
	return fmt.Sprintf("suppressed leaks: %s in %d blocks (%s)", formatBytes(s.bytes), s.blocks, s.patterns())
}

// patterns lists the patterns that matched, with their counts.
func (s *suppressed) patterns() string {
	var b strings.Builder
	for i, p := range s.order {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %d", p, s.by[p])
	}
	return b.String()
}

// suppress leaves out of live the leaks r.sup matches: those of memory
// (the summary's total leaves them out) and of other resources apart.
func (r *runner) suppress(live []*live) (kept []*live, memory, other suppressed) {
	if !r.sup.Any() {
		return live, memory, other
	}
	loc := locatorOf(r.opts.Resolver)
	// Once per backtrace: the blocks of one call site share their frames'
	// slice (the reader's backtrace table), and a site may leave millions.
	type key struct {
		at  *trace.Frame
		n   int
		mem bool
	}
	seen := map[key]string{}
	kept = live[:0]
	for _, l := range live {
		mem := r.isMemory(l.call.Res)
		var p string
		if fs := l.call.Frames; len(fs) > 0 {
			k := key{&fs[0], len(fs), mem}
			var ok bool
			if p, ok = seen[k]; !ok {
				p = r.sup.match(fs, mem, loc)
				seen[k] = p
			}
		}
		if p != "" {
			if mem {
				memory.add(p, l.call.Size)
			} else {
				other.add(p, 0)
			}
			continue
		}
		kept = append(kept, l)
	}
	return kept, memory, other
}

// isMemory says whether resource type id is memory.
func (r *runner) isMemory(id int) bool {
	t := r.types[id]
	return t != nil && t.Name == "memory"
}

// Locator is a Resolver that says where an address is
// (resolver.Resolver): suppressions match its function, file and module.
type Locator interface {
	Locate(addr uint64) trace.Location
}

// locatorOf locates a frame: by the resolver res when it names the
// function (the input's mappings name the modules), else from its text
// when resolved already.
func locatorOf(res Resolver) func(trace.Frame) trace.Location {
	l, _ := res.(Locator)
	return func(f trace.Frame) trace.Location {
		var loc trace.Location
		if l != nil && f.Addr != 0 {
			loc = l.Locate(f.Addr)
		}
		if loc.Func == "" && f.Text != "" {
			// The trace's own names (a binary changed or gone since
			// keeps them), with the module the resolver found.
			t := frameLocation(f.Text)
			if t.Module == "" {
				t.Module = loc.Module
			}
			return t
		}
		return loc
	}
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

// classify names the kind of each memory block live at the end in its
// leak argument, from the trace's memory scan (leakkinds.go); without a
// scan the leaks keep the kinds they came with (an earlier stage's).
func (r *runner) classify() {
	if r.scan == nil || r.scan.regions == nil {
		return
	}
	// glibc's own blocks are freed before memcheck's check (__libc_freeres):
	// left out of the scan too, their stale words (a stdio buffer in
	// memory the program freed) make no leak reachable.
	loc := locatorOf(r.opts.Resolver)
	builtin := map[*trace.Frame]bool{} // by backtrace, as suppress
	var lives []*live
	for _, l := range r.leaks.bySeq {
		if !l.call.Alloc || !r.isMemory(l.call.Res) {
			continue
		}
		if fs := l.call.Frames; len(fs) > 0 {
			b, ok := builtin[&fs[len(fs)-1]]
			if !ok {
				b = r.sup.builtin(fs, loc)
				builtin[&fs[len(fs)-1]] = b
			}
			if b {
				continue
			}
		}
		lives = append(lives, l)
	}
	slices.SortFunc(lives, func(a, b *live) int { return a.seq - b.seq }) // in call order: the newer of one address last
	blocks := make([]*trace.Call, len(lives))
	for i, l := range lives {
		blocks[i] = l.call
	}
	pages := make([]uint64, 0, len(r.pages))
	for p := range r.pages {
		pages = append(pages, p<<12)
	}
	for i, k := range classify(blocks, r.scan, pages) {
		if k != KindUnknown {
			setKind(blocks[i], k)
		}
	}
}

// showKinds counts the memory leaks of live by kind, and keeps those of
// the kinds --leak-kinds shows (a leak of another resource, or of no
// kind, is shown unless the set is none).
func (r *runner) showKinds(live []*live) []*live {
	set := uint8(allKinds)
	if r.opts.LeakKinds != nil {
		set = *r.opts.LeakKinds
	}
	kept := live[:0]
	for _, l := range live {
		k := KindUnknown
		if r.isMemory(l.call.Res) {
			k = kindOf(l.call)
			r.kinds[k].n++
			r.kinds[k].size += l.call.Size
		}
		if set&(1<<k) != 0 || k == KindUnknown && set != 0 {
			kept = append(kept, l)
		}
	}
	return kept
}
