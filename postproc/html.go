package postproc

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"strings"

	"rtrace/internal/rtext"
	"rtrace/internal/trace"
	"rtrace/timeline"
)

// The HTML page (--html; docs/REPORTS.md, "The page"): what a leak hunter
// opens instead of reading text, for one raw trace: the summary with the
// leak kinds, the backtraces that leaked, peaked, churned and called
// most with file:line, heaptrack's four flame graphs, the timeline's
// totals and lifetimes, and the leak report itself, in one file with
// nothing to fetch.

// itemsReader replays items read once: the page reads the trace once per
// part.
type itemsReader struct {
	items []trace.Item
	i     int
}

func (r *itemsReader) Next() (trace.Item, error) {
	if r.i >= len(r.items) {
		return nil, io.EOF
	}
	r.i++
	return r.items[r.i-1], nil
}

// pageLeakLines bounds the leak report the page shows.
const pageLeakLines = 600

// HTMLPage writes the page of the resource trace in to w. newResolver
// makes a resolver for one pass (each keeps the mappings it was told).
func HTMLPage(in trace.Reader, w io.Writer, opts Options, newResolver func() Resolver) error {
	var items []trace.Item
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
		items = append(items, it)
	}
	if len(items) == 0 {
		if readErr != nil {
			return readErr
		}
		return ErrEmpty
	}
	h, _ := items[0].(*trace.Header)
	if h == nil {
		return fmt.Errorf("the trace starts with a %T, not a header", items[0])
	}
	replay := func() trace.Reader { return &itemsReader{items: items} }
	base := Options{Resolve: true, Suppressions: opts.Suppressions, NoBuiltin: opts.NoBuiltin}
	page := pageData{Process: h.Process, Pid: h.Pid}
	if readErr != nil {
		page.Incomplete = "the input ends early (" + readErr.Error() + "): this page shows what was read before"
	}

	// The flame graphs and the sections first: the leak report's -c takes
	// the frames of the calls it groups.
	for _, cost := range []string{CostLeaked, CostPeak, CostTemporary, CostAllocations} {
		o := base
		o.Resolver = newResolver()
		var b bytes.Buffer
		if err := FlameGraph(replay(), &b, o, cost); err != nil {
			return fmt.Errorf("the %s flame graph: %w", cost, err)
		}
		page.Flames = append(page.Flames, image{cost, dataURL(b.Bytes())})
	}
	o := base
	o.Resolver = newResolver()
	var sections bytes.Buffer
	if err := Summarize(replay(), &sections, o); err != nil {
		return fmt.Errorf("the summary: %w", err)
	}
	// Summarize opens with the totals the leak report also opens with:
	// the page shows them once, in the table.
	sec := sections.String()
	if i := strings.Index(sec, "\n\n"); i >= 0 {
		sec = sec[i+2:]
	}
	page.Sections = sec
	svgs, err := timeline.SVGs(replay(), []string{timeline.Totals, timeline.Lifetime}, timeline.Options{LogBase: 10})
	for i, name := range []string{"resources held over time", "lifetimes"} {
		if i < len(svgs) {
			page.Timeline = append(page.Timeline, image{name, dataURL(svgs[i])})
		}
	}
	if err != nil {
		page.TimelineErr = err.Error()
	}

	// The leak report, largest first, with its kinds; its "## " lines are
	// the summary's table.
	o = base
	o.Leaks, o.Compress, o.Sort, o.Resolver = true, true, SortSize, newResolver()
	var leaks bytes.Buffer
	if err := Run(replay(), rtext.NewWriter(&leaks), o); err != nil {
		return fmt.Errorf("the leak report: %w", err)
	}
	var report []string
	for _, l := range strings.Split(leaks.String(), "\n") {
		if t, ok := strings.CutPrefix(l, "## "); ok && len(report) == 0 {
			if k, v, ok := strings.Cut(t, ": "); ok && !strings.HasPrefix(t, "tracing module") && !strings.HasPrefix(t, "task ") && !strings.HasPrefix(t, "process ") {
				page.Summary = append(page.Summary, row{k, v})
			}
			continue
		}
		if strings.HasPrefix(l, "version=") || strings.HasPrefix(l, "<") || strings.HasPrefix(l, ": ") {
			continue // the header, the resource types, the mappings
		}
		report = append(report, l)
	}
	if len(report) > pageLeakLines {
		page.LeaksCut = fmt.Sprintf("the first %d of %d lines: rtrace postproc -l -c -r -s size gives them all", pageLeakLines, len(report))
		report = report[:pageLeakLines]
	}
	page.Leaks = strings.Join(report, "\n")
	return pageTemplate.Execute(w, page)
}

type row struct{ Label, Value string }

type image struct {
	Name string
	URL  template.URL
}

type pageData struct {
	Process    string
	Pid        int
	Incomplete string
	Summary    []row
	Sections   string
	Flames     []image
	Timeline   []image
	// TimelineErr: why the timeline is not (all) drawn.
	TimelineErr string
	Leaks       string
	LeaksCut    string
}

// dataURL embeds an SVG in the page.
func dataURL(svg []byte) template.URL {
	return template.URL("data:image/svg+xml;base64," + base64.StdEncoding.EncodeToString(svg))
}

var pageTemplate = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>rtrace: {{.Process}} ({{.Pid}})</title>
<style>
body { font-family: sans-serif; margin: 1.5em; color: #222; max-width: 1300px; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; border-bottom: 1px solid #ccc; margin-top: 1.6em; }
table { border-collapse: collapse; } td { padding: 2px 12px 2px 0; vertical-align: top; }
td.k { color: #555; } td.v { font-weight: bold; }
tr.lost td.v { color: #b00; }
pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; font-size: 12px; line-height: 1.35; }
.incomplete { background: #fdd; border: 1px solid #b00; padding: 0.5em; }
object, img { width: 100%; max-width: 1200px; border: 1px solid #ddd; margin-bottom: 0.6em; }
nav a { margin-right: 1em; }
</style></head>
<body>
<h1>rtrace: {{.Process}} (pid {{.Pid}})</h1>
<nav><a href="#summary">Summary</a><a href="#backtraces">Backtraces</a><a href="#flames">Flame graphs</a><a href="#timeline">Timeline</a><a href="#leaks">Leaks</a></nav>
{{if .Incomplete}}<p class="incomplete" id="incomplete">INCOMPLETE: {{.Incomplete}}</p>{{end}}
<h2 id="summary">Summary</h2>
<table>
{{range .Summary}}<tr{{if and (or (eq .Label "definitely lost") (eq .Label "total memory leaked")) (not (or (eq .Value "0 bytes in 0 blocks") (eq .Value "0B in 0 blocks")))}} class="lost"{{end}}><td class="k">{{.Label}}</td><td class="v">{{.Value}}</td></tr>
{{end}}</table>
<h2 id="backtraces">Backtraces</h2>
<pre>{{.Sections}}</pre>
<h2 id="flames">Flame graphs</h2>
<p>Hover a frame for its cost; click to zoom.</p>
{{range .Flames}}<h3>{{.Name}}</h3>
<object type="image/svg+xml" data="{{.URL}}" class="flame" aria-label="{{.Name}}"></object>
{{end}}
<h2 id="timeline">Timeline</h2>
{{range .Timeline}}<img src="{{.URL}}" alt="{{.Name}}">
{{end}}{{if .TimelineErr}}<p>The timeline: {{.TimelineErr}}.</p>{{end}}
<h2 id="leaks">Leaks</h2>
{{if .LeaksCut}}<p>{{.LeaksCut}}</p>{{end}}
<pre>{{.Leaks}}</pre>
</body></html>
`))
