// Package calltree draws rtrace-calltree's call graphs (sp-rtrace:
// scripts/rtrace-calltree, doc/rtrace-calltree.1) of a resolved resource
// report: every function of the allocations' backtraces is a node that
// the allocations made through it add up in, and the graph, in Graphviz's
// dot language, shows the nodes through which a share of the total above
// a limit went (docs/REPORTS.md, "Call graphs").
package calltree

import (
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"rtrace/internal/trace"
)

// Graph types.
const (
	TypeGraph   = "graph"   // by the bytes allocated through a node
	TypeCount   = "count"   // by the number of allocations
	TypeTopmost = "topmost" // the backtraces of the highest addresses
)

// Options are rtrace-calltree's options.
type Options struct {
	Type      string  // graph (default), count or topmost
	Limit     float64 // the least share (percent) a node shows with; default 10
	Depth     int     // topmost: how many of the highest allocations; default 3
	Direction string  // tb (from main to the allocations, default) or bt
	EmphLimit float64 // nodes with this share or more are emphasized; default 60
	OwnAlloc  float64 // ...filled when they allocate this many times their callees; default 1.2
	// HideBelow: no node summing up the callees below the limit.
	HideBelow bool
	// IncludeOnly keeps the backtraces with a node starting with one of
	// them; Stop ends a backtrace (towards main) at a node starting with
	// one; Ignore drops the nodes starting with one.
	IncludeOnly, Stop, Ignore []string
	KeepPaths, KeepTypes      bool // full source paths; C++ argument types
}

// Check fills the defaults and validates o.
func (o *Options) Check() error {
	if o.Type == "" {
		o.Type = TypeGraph
	}
	switch o.Type {
	case TypeGraph, TypeCount, TypeTopmost:
	default:
		return fmt.Errorf("--type %q: want graph, count or topmost", o.Type)
	}
	if o.Limit == 0 {
		o.Limit = 10
	}
	if o.Limit < 0 || o.Limit > 100 {
		return fmt.Errorf("--limit %g: want a percentage, 0.1 to 100", o.Limit)
	}
	if o.Depth == 0 {
		o.Depth = 3
	}
	if o.Depth < 1 || o.Depth > 99 {
		return fmt.Errorf("--depth %d: want 1 to 99", o.Depth)
	}
	switch o.Direction {
	case "":
		o.Direction = "tb"
	case "tb", "bt":
	default:
		return fmt.Errorf("--direction %q: want tb (from main towards the allocations) or bt", o.Direction)
	}
	if o.EmphLimit == 0 {
		o.EmphLimit = 60
	}
	if o.OwnAlloc == 0 {
		o.OwnAlloc = 1.2
	}
	return nil
}

// node is a function of the backtraces.
type node struct {
	id            int
	name          string
	size, count   uint64
	lastTrace     int // the last backtrace counted in it (recursion counts once)
	traces        map[int]bool
	children      []*node // callees, in order of appearance
	parents       []*node
	pct, ownAlloc float64
	leaf          bool
}

func addUnique(list []*node, n *node) []*node {
	if slices.Contains(list, n) {
		return list
	}
	return append(list, n)
}

// graph is what the report's allocations made.
type graph struct {
	nodes       map[string]*node
	order       []*node
	traces      int
	size, count uint64
	tops        []top // allocation addresses and their backtraces
	info        []string
	keepTraces  bool // the nodes keep the backtraces through them (topmost)
}

type top struct {
	addr  uint64
	trace int
}

// Write reads the resource report rd (resolved: frames with names) and
// writes its call graph to w.
func Write(rd trace.Reader, w io.Writer, o Options) error {
	if err := o.Check(); err != nil {
		return err
	}
	g := &graph{nodes: map[string]*node{}, keepTraces: o.Type == TypeTopmost}
	framed, named := false, false // a call had frames; one of them a name
	for {
		it, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		switch v := it.(type) {
		case *trace.Header:
			g.info = headerInfo(v)
		case *trace.Call:
			if !v.Alloc {
				continue // releases, as rtrace-calltree's negative sizes
			}
			names := o.names(v.Frames)
			framed = framed || len(v.Frames) > 0
			named = named || len(names) > 0
			if len(names) == 0 || !o.included(names) {
				continue
			}
			g.add(names, v.Size, v.ID)
		}
	}
	if framed && !named && len(o.Ignore) == 0 {
		return fmt.Errorf("no backtrace frame has a function name: resolve the report first (rtrace postproc -r, or | rtrace resolve)")
	}
	g.complete(o)
	return g.write(w, o)
}

// headerInfo is the graph's subtitle: the header fields rtrace-calltree
// shows, sorted by name.
func headerInfo(h *trace.Header) []string {
	out := []string{"arch=" + h.Arch}
	if len(h.Filter) > 0 {
		out = append(out, "filter="+strings.Join(h.Filter, "|"))
	}
	out = append(out, fmt.Sprintf("pid=%d", h.Pid), "process="+h.Process)
	if !h.Time.IsZero() {
		out = append(out, "timestamp="+h.Time.Format("2006.1.2 15:04:05"))
	}
	return out
}

// frameText is a resolved frame's text without its address: "func() at
// file:line", "func() from /lib", "from /lib".
var frameText = regexp.MustCompile(`^(?:0x[0-9a-fA-F]+)?\s*(.*)$`)

// stripArgs drops the argument types of a signature's last argument list
// ("parse(char const*) const" -> "parse() const"), balanced from the end:
// "(anonymous namespace)::f(int)" keeps its namespace, a lambda its name.
func stripArgs(fn string) string {
	end := strings.LastIndexByte(fn, ')')
	if end < 0 {
		return fn
	}
	depth := 0
	for i := end; i >= 0; i-- {
		switch fn[i] {
		case ')':
			depth++
		case '(':
			depth--
			if depth == 0 {
				return fn[:i] + "()" + fn[end+1:]
			}
		}
	}
	return fn
}

// names are the nodes of a backtrace, the allocating frame first: frames
// without a name (an address, "in ??") are left out, as are --ignore's,
// and the backtrace ends at --stop's.
func (o *Options) names(frames []trace.Frame) []string {
	var out []string
	for _, f := range frames {
		t := strings.TrimSpace(frameText.FindStringSubmatch(f.Text)[1])
		if t == "" || strings.HasPrefix(t, "in ??") {
			continue
		}
		name := o.reduce(t)
		if hasPrefix(name, o.Ignore) {
			continue
		}
		out = append(out, name)
		if hasPrefix(name, o.Stop) {
			break
		}
	}
	return out
}

// reduce shortens a frame as rtrace-calltree does: the library of a
// frame without a function, without its path and .so; C++ argument types
// and source paths dropped unless kept.
func (o *Options) reduce(t string) string {
	if lib, ok := strings.CutPrefix(t, "from "); ok {
		base := filepath.Base(strings.TrimSpace(lib))
		if i := strings.Index(base, ".so"); i > 0 {
			base = base[:i]
		}
		return base
	}
	fn, where, at := strings.Cut(t, " at ")
	if !at {
		fn, where, _ = strings.Cut(t, " from ")
		if where != "" {
			where = filepath.Base(where)
			if i := strings.Index(where, ".so"); i > 0 {
				where = where[:i]
			}
		}
	}
	if !o.KeepTypes {
		fn = stripArgs(fn)
	}
	switch {
	case where == "":
		return fn
	case at && !o.KeepPaths:
		return fn + " at " + filepath.Base(where)
	case at:
		return fn + " at " + where
	}
	return fn + " in " + where
}

func hasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// included says whether a backtrace passes --include-only.
func (o *Options) included(names []string) bool {
	if len(o.IncludeOnly) == 0 {
		return true
	}
	for _, n := range names {
		if hasPrefix(n, o.IncludeOnly) {
			return true
		}
	}
	return false
}

// add accumulates an allocation of size at addr, made through names.
func (g *graph) add(names []string, size, addr uint64) {
	g.traces++
	g.size += size
	g.count++
	ns := make([]*node, len(names))
	for i, name := range names {
		n := g.nodes[name]
		if n == nil {
			n = &node{id: len(g.order), name: name}
			if g.keepTraces {
				n.traces = map[int]bool{}
			}
			g.nodes[name] = n
			g.order = append(g.order, n)
		}
		if n.lastTrace != g.traces {
			n.lastTrace = g.traces
			n.size += size
			n.count++
		}
		if g.keepTraces {
			n.traces[g.traces] = true
		}
		ns[i] = n
	}
	for i, n := range ns {
		if i > 0 && ns[i-1] != n {
			n.children = addUnique(n.children, ns[i-1])
		}
		if i+1 < len(ns) && ns[i+1] != n {
			n.parents = addUnique(n.parents, ns[i+1])
		}
	}
	if g.keepTraces {
		g.tops = append(g.tops, top{addr, g.traces})
	}
}

// complete gives each node its share, its own allocations against its
// callees' and whether it ends a chain.
func (g *graph) complete(o Options) {
	for _, n := range g.order {
		switch {
		case o.Type == TypeCount && g.count > 0:
			n.pct = 100 * float64(n.count) / float64(g.count)
		case g.size > 0:
			n.pct = 100 * float64(n.size) / float64(g.size)
		}
		n.leaf = len(n.parents) == 0 || len(n.children) == 0
		var child uint64
		for _, c := range n.children {
			child += c.size
		}
		n.ownAlloc = 1
		if child > 0 {
			n.ownAlloc = float64(n.size) / float64(child)
		}
	}
}

// write prints the graph in dot, as rtrace-calltree's GraphvizReport.
func (g *graph) write(w io.Writer, o Options) error {
	var b strings.Builder
	var heading string
	shown := func(n *node) bool { return n.pct >= o.Limit }
	switch o.Type {
	case TypeCount:
		heading = fmt.Sprintf("Allocation counts callgraph\\nFunctions which did or caused >=%.1f%% of all allocations", o.Limit)
	case TypeGraph:
		heading = fmt.Sprintf("Allocation size totals callgraph\\nFunctions through which >=%.1f%% amount of the allocations total were done", o.Limit)
	case TypeTopmost:
		heading = fmt.Sprintf("Functions involved in %d topmost allocations", o.Depth)
		tops := slices.Clone(g.tops)
		slices.SortStableFunc(tops, func(a, b top) int {
			switch {
			case a.addr > b.addr:
				return -1
			case a.addr < b.addr:
				return 1
			}
			return 0
		})
		keep := map[int]bool{}
		for _, t := range tops[:min(o.Depth, len(tops))] {
			fmt.Fprintf(&b, "# 0x%x: %d\n", t.addr, t.trace)
			keep[t.trace] = true
		}
		shown = func(n *node) bool {
			for t := range n.traces {
				if keep[t] {
					return true
				}
			}
			return false
		}
	}
	fmt.Fprintf(&b, `
# Convert this to SVG with:
#   dot -Tsvg -o alloc-graph.svg <this file>

digraph alloc_graph {
center=1;
ratio=compress;
color="black";
bgcolor="white";
node [shape="ellipse"];
edge [dir="forward" arrowsize="2"];
labelloc="t";
label="%s\n\n(%s)";
`, heading, dotEscape(strings.Join(g.info, ", ")))
	next := func(n *node) []*node { return n.children }
	if o.Direction == "bt" {
		next = func(n *node) []*node { return n.parents }
	}
	detail := func(pct float64, size, count uint64) string {
		if o.Type == TypeCount {
			return fmt.Sprintf("%d%% (%d)", int(pct), count)
		}
		return fmt.Sprintf("%d%% (%dKB / %d)", int(pct), (size+512)/1024, count)
	}
	var edges []string
	below := 0
	for _, n := range g.order {
		if !shown(n) {
			continue
		}
		// rtrace-calltree's attributes, one style list (dot keeps the last
		// of two): red, bold or filled, above the emphasis limit; a
		// diamond, filled, for a node without caller or callee.
		var styles []string
		attrs := ""
		if n.pct >= o.EmphLimit {
			attrs += " color=red"
			if n.ownAlloc >= o.OwnAlloc {
				styles = append(styles, "filled")
			} else {
				styles = append(styles, "bold")
			}
		}
		if n.leaf {
			attrs += " shape=diamond"
			if !slices.Contains(styles, "filled") {
				styles = append(styles, "filled")
			}
		}
		if slices.Contains(styles, "filled") {
			attrs += " fillcolor=lightgray"
		}
		style := ""
		if len(styles) > 0 {
			style = fmt.Sprintf(" style=%q", strings.Join(styles, ","))
		}
		style += attrs
		name := strings.Replace(strings.Replace(dotEscape(n.name), " at ", "\\nat ", 1), " in ", "\\nin ", 1)
		fmt.Fprintf(&b, "N%d [label=\"%s\\n%s\"%s];\n", n.id, name, detail(n.pct, n.size, n.count), style)
		var pct float64
		var size, count uint64
		funs := 0
		for _, m := range next(n) {
			if shown(m) {
				edges = append(edges, fmt.Sprintf("N%d -> N%d;", n.id, m.id))
			} else if !o.HideBelow {
				pct += m.pct
				size += m.size
				count += m.count
				funs++
			}
		}
		if funs > 0 {
			what := "a function"
			if funs > 1 {
				what = fmt.Sprintf("%d functions", funs)
			}
			fmt.Fprintf(&b, "U%d [label=\"%s\\n%s\"];\n", below, what, detail(pct, size, count))
			edges = append(edges, fmt.Sprintf("N%d -> U%d;", n.id, below))
			below++
		}
	}
	for _, e := range edges {
		b.WriteString(e)
		b.WriteByte('\n')
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// dotEscape makes s safe inside a dot string.
func dotEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
