package pprofout

import (
	"strconv"
	"strings"

	"github.com/google/pprof/profile"

	"rtrace/internal/trace"
)

// locTable builds the mappings, locations and functions of a profile: one
// location per distinct address (per set of mappings), one function per
// distinct name and file.
type locTable struct {
	res       Resolver // nil: no resolving
	cur       []*profile.Mapping
	mappings  []*profile.Mapping // every mapping seen, in order
	byAddr    map[uint64]*profile.Location
	locations []*profile.Location
	byName    map[[2]string]*profile.Function
	functions []*profile.Function
	none      *profile.Location // "[no backtrace]"
}

func newLocTable(res Resolver) *locTable {
	return &locTable{res: res, byAddr: map[uint64]*profile.Location{}, byName: map[[2]string]*profile.Function{}}
}

// addMapping registers an executable mapping. One overlapping earlier
// mappings replaces them, as the resolver's does. It reports whether
// addresses already located fall in it: they are forgotten, to be located
// again, and so must be the stacks holding them.
func (t *locTable) addMapping(m trace.Mapping) (stale bool) {
	if t.res != nil {
		t.res.AddMapping(m)
	}
	if m.To <= m.From {
		return false
	}
	kept := t.cur[:0]
	for _, o := range t.cur {
		if o.Start == m.From && o.Limit == m.To && o.File == m.Path {
			return false // a rescan repeating it
		}
		if o.Start < m.To && m.From < o.Limit {
			continue
		}
		kept = append(kept, o)
	}
	pm := &profile.Mapping{ID: uint64(len(t.mappings) + 1), Start: m.From, Limit: m.To, File: m.Path}
	t.cur = append(kept, pm)
	t.mappings = append(t.mappings, pm)
	for a := range t.byAddr {
		if a >= m.From && a < m.To {
			delete(t.byAddr, a)
			stale = true
		}
	}
	return stale
}

// location returns the location of frame f.
func (t *locTable) location(f trace.Frame) *profile.Location {
	if l := t.byAddr[f.Addr]; l != nil {
		return l
	}
	l := &profile.Location{ID: uint64(len(t.locations) + 1), Address: f.Addr}
	for _, m := range t.cur {
		if f.Addr >= m.Start && f.Addr < m.Limit {
			l.Mapping = m
			break
		}
	}
	var fn, file string
	var line int
	switch {
	case f.Text != "":
		fn, file, line = parseFrame(f.Text)
	case t.res != nil:
		loc := t.res.Locate(f.Addr)
		fn, file, line = loc.Func, loc.File, loc.Line
		if m := l.Mapping; m != nil && loc.Module == m.File && loc.Start == m.Start {
			m.Offset = loc.Offset
		}
	}
	if fn != "" {
		l.Line = []profile.Line{{Function: t.function(fn, file), Line: int64(line)}}
		if m := l.Mapping; m != nil {
			// pprof then leaves the mapping's addresses alone rather
			// than symbolize them again from the file.
			m.HasFunctions = true
			m.HasFilenames = m.HasFilenames || file != ""
			m.HasLineNumbers = m.HasLineNumbers || line > 0
		}
	}
	t.byAddr[f.Addr] = l
	t.locations = append(t.locations, l)
	return l
}

// noBacktrace returns the location standing for a missing backtrace.
func (t *locTable) noBacktrace() *profile.Location {
	if t.none == nil {
		t.none = &profile.Location{ID: uint64(len(t.locations) + 1)}
		t.none.Line = []profile.Line{{Function: t.function("[no backtrace]", "")}}
		t.locations = append(t.locations, t.none)
	}
	return t.none
}

func (t *locTable) function(name, file string) *profile.Function {
	k := [2]string{name, file}
	if fn := t.byName[k]; fn != nil {
		return fn
	}
	fn := &profile.Function{ID: uint64(len(t.functions) + 1), Name: name, SystemName: name, Filename: file}
	t.byName[k] = fn
	t.functions = append(t.functions, fn)
	return fn
}

// parseFrame reads a resolved sp-rtrace frame text: "name() at file:line",
// "name() from /module", "from /module" or "in ??". The name loses the
// "()" the resolver appends, as trace.Location's does.
func parseFrame(s string) (fn, file string, line int) {
	at, from := strings.Index(s, " at "), strings.Index(s, " from ")
	if at > 0 && (from < 0 || at < from) {
		pos := s[at+len(" at "):]
		if i := strings.LastIndexByte(pos, ':'); i > 0 {
			if n, err := strconv.Atoi(pos[i+1:]); err == nil && n > 0 {
				return strings.TrimSuffix(s[:at], "()"), pos[:i], n
			}
		}
	}
	if from > 0 {
		return strings.TrimSuffix(s[:from], "()"), "", 0
	}
	return "", "", 0
}
