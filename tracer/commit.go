package tracer

import (
	"cmp"
	"fmt"
	"io"
	"slices"
)

// firstIn names the first function whose patch or call-site redirect w
// writes.
func (p *plantPlan) firstIn(w write) string {
	in := func(at uint64) bool { return at >= w.at && at < w.at+uint64(len(w.b)) }
	for _, e := range p.entries {
		if in(e.patch) {
			return fmt.Sprintf("%s at %#x", e.c.name, e.patch)
		}
		for _, r := range e.redirects {
			if in(r.at) {
				return fmt.Sprintf("the call at %#x to %s", r.at-1, e.c.name)
			}
		}
	}
	return "the code"
}

// write is bytes to write at an address of the process.
type write struct {
	at uint64
	b  []byte
}

// coalesce merges the patches of each page into one write, the bytes
// between them taken from text: one write to /proc/PID/mem per page
// instead of one per function (sqlite3: 2,117 writes, 225 pages; a write
// costs a system call and a walk of the process's page tables). Only
// pages a patch changes are written. Overlapping patches, or bytes text
// does not hold, keep the patches as they are, in their order.
func coalesce(text textImage, patches []write) []write {
	sorted := slices.Clone(patches)
	slices.SortStableFunc(sorted, func(a, b write) int { return cmp.Compare(a.at, b.at) })
	var out []write
	for _, p := range sorted {
		n := len(out)
		if n > 0 {
			last := &out[n-1]
			end := last.at + uint64(len(last.b))
			if p.at < end {
				return patches // overlapping: the order matters
			}
			if p.at>>12 == last.at>>12 {
				gap := text.code(end, p.at-end)
				if uint64(len(gap)) == p.at-end {
					last.b = append(append(last.b, gap...), p.b...)
					continue
				}
			}
		}
		out = append(out, write{p.at, slices.Clone(p.b)})
	}
	return out
}

// commitPlan writes plan p into the process whose memory is mem and adds
// its functions and breakpoints to im. /proc/<pid>/mem writes go through
// FOLL_FORCE: they reach read-only text. The trampolines go first: a patch
// is live as soon as written. On error nothing stays patched and im is as
// it was; the caller unmaps the scratch.
//
// The patches are written a page at a time with the bytes between them
// from p.text (coalesce): nothing may write the module's text between
// scanModule's read and this commit (the hooks of a library are planted
// before its scan, its probes and the entry breakpoint after).
func (t *Tracer) commitPlan(mem io.WriterAt, im *image, p *plantPlan) error {
	if _, err := mem.WriteAt(p.code, int64(p.scratch)); err != nil {
		return fmt.Errorf("writing scratch memory for %s: %w", p.f.Path, err)
	}
	undo := func(n int) {
		for _, q := range p.entries[:n] {
			mem.WriteAt(q.orig, int64(q.patch))
			for _, r := range q.redirects {
				mem.WriteAt(r.orig[:], int64(r.at))
			}
		}
	}
	var patches []write
	for _, e := range p.entries {
		patches = append(patches, write{e.patch, e.jmp})
		for _, r := range e.redirects {
			patches = append(patches, write{r.at, r.new[:]})
		}
	}
	for _, w := range coalesce(p.text, patches) {
		if _, err := mem.WriteAt(w.b, int64(w.at)); err != nil {
			// Undo: the caller may leave this process untraced, and a jmp to
			// a trampoline's int3 would kill it. Every entry's bytes go back,
			// written or not (the same bytes over a page not written).
			undo(len(p.entries))
			return fmt.Errorf("instrumenting %s: writing %d bytes at %#x: %w", p.firstIn(w), len(w.b), w.at, err)
		}
	}
	for _, e := range p.entries {
		fi := t.newFn(p.f, e.c.name, e.addr, e.c.specValue())
		fi.jump = e.jump
		fi.res = e.c.res
		fi.personality = e.personality
		fi.stub = e.stub
		fi.argStub = e.argStub
		fi.redirects = e.redirects
		im.funcs = append(im.funcs, fi)
		b := e.bp
		b.Func = len(im.funcs) - 1
		im.bps.Add(&b)
	}
	im.scratch = append(im.scratch, [2]uint64{p.scratch, p.scratch + p.size})
	if p.sites != nil {
		im.fast.sites = append(im.fast.sites, *p.sites)
		im.fast.cloned = im.fast.cloned || len(p.clones) > 0
	}
	return nil
}
