// Package flame draws flame graphs as self-contained SVG, as Brendan
// Gregg's flamegraph.pl does (https://github.com/brendangregg/FlameGraph):
// a frame's width is its share of the cost, its callers below it; hovering
// a frame shows its name, cost and share (its <title>), clicking it zooms
// to it and what it calls, clicking the bottom frame zooms out. No script
// or style from outside the file.
package flame

import (
	"cmp"
	"encoding/xml"
	"fmt"
	"hash/fnv"
	"io"
	"slices"
	"strings"
)

// Stack is one backtrace and its cost: Frames from the outermost caller
// to the innermost frame.
type Stack struct {
	Frames []string
	Value  uint64
}

// Graph is what to draw.
type Graph struct {
	Title string
	Unit  func(uint64) string // a cost as text ("15.87M", "2000 calls")
}

// node is a frame of the merged tree.
type node struct {
	name     string
	value    uint64
	children []*node
}

func (n *node) child(name string) *node {
	for _, c := range n.children {
		if c.name == name {
			return c
		}
	}
	c := &node{name: name}
	n.children = append(n.children, c)
	return c
}

// Layout constants, as flamegraph.pl's defaults.
const (
	width     = 1200
	frameH    = 16
	pad       = 10
	titleH    = 40
	minWidthP = 0.1 // frames narrower than this (px) are left out
)

// Write draws stacks into w.
func Write(w io.Writer, g Graph, stacks []Stack) error {
	root := &node{name: "all"}
	for _, s := range stacks {
		if s.Value == 0 {
			continue
		}
		root.value += s.Value
		n := root
		for _, f := range s.Frames {
			n = n.child(f)
			n.value += s.Value
		}
	}
	depth := maxDepth(root)
	height := titleH + (depth+1)*frameH + 2*pad
	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0" standalone="no"?>
<svg version="1.1" width="%d" height="%d" viewBox="0 0 %d %d" xmlns="http://www.w3.org/2000/svg">
<style>text { font-family: Verdana, sans-serif; font-size: 12px; fill: #000; } .frame:hover rect { stroke: #000; stroke-width: 0.5; cursor: pointer; }</style>
<rect x="0" y="0" width="100%%" height="100%%" fill="#eeeeee"/>
<text x="%d" y="24" text-anchor="middle" style="font-size:17px">%s</text>
<text id="details" x="%d" y="%d"> </text>
`, width, height, width, height, width/2, esc(g.Title), pad, height-pad/2)
	unit := g.Unit
	if unit == nil {
		unit = func(v uint64) string { return fmt.Sprint(v) }
	}
	var draw func(n *node, x float64, level int)
	scale := float64(width-2*pad) / float64(max(root.value, 1))
	draw = func(n *node, x float64, level int) {
		wpx := float64(n.value) * scale
		if wpx < minWidthP {
			return
		}
		y := height - pad - frameH*(level+1) - frameH/2
		info := fmt.Sprintf("%s (%s, %.2f%%)", n.name, unit(n.value), 100*float64(n.value)/float64(max(root.value, 1)))
		fmt.Fprintf(&b, `<g class="frame" data-x="%.4f" data-w="%.4f"><title>%s</title><rect x="%.1f" y="%d" width="%.1f" height="%d" rx="2" fill="%s"/><text x="%.1f" y="%d">%s</text></g>
`, x, wpx, esc(info), x, y, wpx, frameH-1, color(n.name), x+3, y+frameH-4, esc(fit(n.name, wpx)))
		children := slices.Clone(n.children)
		slices.SortFunc(children, func(a, c *node) int { return cmp.Compare(a.name, c.name) }) // flamegraph.pl's order
		cx := x
		for _, c := range children {
			draw(c, cx, level+1)
			cx += float64(c.value) * scale
		}
	}
	draw(root, pad, 0)
	b.WriteString(script)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func maxDepth(n *node) int {
	d := 0
	for _, c := range n.children {
		d = max(d, 1+maxDepth(c))
	}
	return d
}

// fit cuts name to what a frame wpx wide shows (about 7 px a character).
func fit(name string, wpx float64) string {
	n := int((wpx - 6) / 7)
	if n < 3 {
		return ""
	}
	r := []rune(name)
	if len(r) <= n {
		return name
	}
	return string(r[:n-2]) + ".." // whole characters, as the zoom script counts
}

// esc escapes s for XML text: markup, and characters XML does not allow
// (control characters, invalid UTF-8) as U+FFFD (encoding/xml).
func esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// color is a warm color from the name, the same for the same name
// (flamegraph.pl's "mem" palette: greens).
func color(name string) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	v := h.Sum32()
	return fmt.Sprintf("rgb(%d,%d,%d)", v%55, 190+v/55%65, v/3575%55)
}

// script zooms: a click on a frame widens it to the whole graph, its
// callees with it, and hides what lies beside it; a click on the bottom
// frame ("all") shows everything again. The frames keep their first place
// in data-x and data-w.
const script = `<script type="text/ecmascript"><![CDATA[
(function () {
  var W = ` + "1180" + `, P = 10;
  function zoom(g) {
    var zx = parseFloat(g.getAttribute("data-x")), zw = parseFloat(g.getAttribute("data-w"));
    var zy = parseFloat(g.querySelector("rect").getAttribute("y"));
    document.querySelectorAll("g.frame").forEach(function (f) {
      var x = parseFloat(f.getAttribute("data-x")), w = parseFloat(f.getAttribute("data-w"));
      var r = f.querySelector("rect"), t = f.querySelector("text");
      var y = parseFloat(r.getAttribute("y"));
      var inside = x >= zx - 0.01 && x + w <= zx + zw + 0.01;
      var below = y > zy && x <= zx + 0.01 && x + w >= zx + zw - 0.01; // an ancestor
      if (y > zy ? !below : !inside) { f.style.display = "none"; return; }
      f.style.display = "";
      var nx = below ? P : P + (x - zx) / zw * W, nw = below ? W : w / zw * W;
      r.setAttribute("x", nx); r.setAttribute("width", nw);
      t.setAttribute("x", nx + 3);
      var name = f.querySelector("title").textContent.replace(/ \([^()]*\)$/, "");
      var n = Math.floor((nw - 6) / 7);
      t.textContent = n < 3 ? "" : (name.length <= n ? name : name.substring(0, n - 2) + "..");
    });
  }
  document.querySelectorAll("g.frame").forEach(function (f) {
    f.addEventListener("click", function () { zoom(f); });
    f.addEventListener("mouseover", function () {
      document.getElementById("details").textContent = f.querySelector("title").textContent;
    });
  });
})();
]]></script>
`
