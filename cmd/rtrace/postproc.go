package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"rtrace/internal/trace"
	"rtrace/internal/uftrace"
	"rtrace/postproc"
	"rtrace/preproc"
)

func postprocCommand() *cli.Command {
	return &cli.Command{
		Name:      "postproc",
		Usage:     "filter a trace: sp-rtrace filters (leaks, compress, ...) to text, wire or pprof; uftrace filters (-F/-N/-D/-t) to uftrace.data",
		UsageText: "rtrace postproc [OPTIONS] [-i FILE|DIR] [-o FILE|DIR | --pprof FILE | -d OUTDIR]\n   rtrace postproc [OPTIONS] -o OUTDIR [-j N] INPUT...",
		Description: `Reads a resource trace (a raw <pid>-<n>.rtrace stream, an sp-rtrace 2.0
binary stream or sp-rtrace text, told apart by content, not name), applies
sp-rtrace-postproc's filters and writes sp-rtrace text (-O wire: a binary
stream, -O pprof or --pprof FILE: an allocation profile). Its own output is a
valid input, so filters can be chained.

-l keeps the allocations never released (leaks); -c groups calls with the
same backtrace under one copy of it, with a line
"# allocation summary: N block(s) with total size S", groups in -s order.
-l adds one summary per resource type at the end. Masks are hex, as in the
trace: -R 2 keeps resource type <2>, -C 1 the calls of context @1, -C 0 the
calls outside any context.

The pprof profile has six sample types: alloc_objects/alloc_space (every
allocation), inuse_objects/inuse_space (not released by the end of the
trace, the default) and leak_objects/leak_space (the same, when the trace saw
the process end). Frames are resolved to functions, files and lines.

A uftrace.data directory (-i DIR) takes uftrace's filters instead and is
written, filtered, to a new directory -d OUTDIR that uftrace reads:
-F FUNC keeps FUNC and what it calls, -N FUNC drops them, -D N keeps N levels,
-t TIME drops calls shorter than TIME, --tid keeps those threads. A FUNC
with one of .?*+-^$|()[]{} is a regex searched in the name, as in uftrace.

Batch: with INPUT... after the options, every input is processed (-j at a
time) into -o OUTDIR under its own name (.txt, .rtrace, .pb.gz added; a
uftrace.data directory keeps its name). A failing input is reported with
its name and does not stop the others; the exit status is then 1.

Examples:
   rtrace postproc -i 1234-0.rtrace > 1234.txt          # binary to text
   rtrace postproc -lc -i 1234-0.rtrace -o traces/      # leak report, traces/1234-0.rtrace.txt
   rtrace postproc -l -c -s count -i 1234.txt           # leak sources, most blocks first
   rtrace postproc -R 2 -C 0 -b 4 -i 1234.txt           # type <2>, no context, 4 frames
   rtrace postproc --call-address /usr/lib/libfoo.so.1:1a40+3c -i 1234.txt
   rtrace postproc --pprof heap.pb.gz -i 1234-0.rtrace && go tool pprof -top heap.pb.gz
   rtrace postproc -F parse -t 10us -i uftrace.data -d parse.data && uftrace replay -d parse.data
   rtrace postproc -l -c -o reports/ -j 4 traces/*.rtrace
   cat 1234-0.rtrace | rtrace postproc -lc | rtrace postproc -R 1 -b 3`,
		UseShortOptionHandling: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Usage: "read the trace from `FILE` or uftrace.data DIR (default: stdin)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write to `FILE`, or into DIR as <pid>-<n>.rtrace.txt, never overwriting (default: stdout); with INPUT...: the batch's output directory"},
			&cli.StringFlag{Name: "output-format", Aliases: []string{"O"}, Value: formatText, Usage: "write resource traces as `FORMAT`: text (sp-rtrace), wire (binary stream) or pprof"},
			&cli.StringFlag{Name: "pprof", Usage: "write an allocation profile to `FILE` (same as -O pprof -o FILE)"},
			&cli.IntFlag{Name: "jobs", Aliases: []string{"j"}, Value: runtime.NumCPU(), Usage: "process `N` inputs of a batch at a time"},
			&cli.BoolFlag{Name: "filter-leaks", Aliases: []string{"l"}, Category: "resource traces", Usage: "keep only allocations never released"},
			&cli.BoolFlag{Name: "compress", Aliases: []string{"c"}, Category: "resource traces", Usage: "group calls with identical backtraces"},
			&cli.StringFlag{Name: "sort", Aliases: []string{"s"}, Category: "resource traces", Usage: "order -c groups by `ORDER`: size, size-asc, count or count-asc", DefaultText: "size-asc"},
			&cli.StringFlag{Name: "context", Aliases: []string{"C"}, Category: "resource traces", Usage: "keep calls in the contexts of hex `MASK` (0: calls without context)"},
			&cli.StringFlag{Name: "resource", Aliases: []string{"R"}, Category: "resource traces", Usage: "keep calls of the resource types of hex `MASK` (<1>, <2>, <4>...)"},
			&cli.StringFlag{Name: "backtrace-depth", Aliases: []string{"b"}, Category: "resource traces", Usage: "cut backtraces to `N` frames"},
			&cli.StringFlag{Name: "include", Category: "resource traces", Usage: "keep only the calls whose indexes `FILE` lists (one a line)"},
			&cli.StringFlag{Name: "exclude", Category: "resource traces", Usage: "drop the calls whose indexes `FILE` lists (one a line)"},
			&cli.StringSliceFlag{Name: "call-address", Category: "resource traces", Usage: "keep calls whose backtrace passes through `LIB:START+SIZE` (hex link-time addresses, as nm prints them; repeatable)"},
			&cli.BoolFlag{Name: "resolve", Aliases: []string{"r"}, Category: "resource traces", Usage: "resolve backtrace addresses to functions and source lines"},
			&cli.BoolFlag{Name: "remove-args", Aliases: []string{"a"}, Category: "resource traces", Usage: "drop call arguments"},
			&cli.StringFlag{Name: "uftrace-dir", Aliases: []string{"d"}, Category: "uftrace.data input", Usage: "write the filtered function trace to the new directory `OUTDIR`"},
			&cli.StringSliceFlag{Name: "filter", Aliases: []string{"F"}, Category: "uftrace.data input", Usage: "keep only `FUNC` and what it calls (repeatable)"},
			&cli.StringSliceFlag{Name: "notrace", Aliases: []string{"N"}, Category: "uftrace.data input", Usage: "drop `FUNC` and what it calls (repeatable)"},
			&cli.IntFlag{Name: "depth", Aliases: []string{"D"}, Category: "uftrace.data input", Usage: "keep calls less than `N` levels deep"},
			&cli.StringFlag{Name: "time-filter", Aliases: []string{"t"}, Category: "uftrace.data input", Usage: "drop calls shorter than `TIME` (100us, 2ms, 1s; a bare number is ns)"},
			&cli.StringSliceFlag{Name: "tid", Category: "uftrace.data input", Usage: "keep only the threads `TID[,TID...]` (repeatable)"},
		},
		Action: runPostproc,
	}
}

// runPostproc is the postproc verb: usage errors exit 2, bad input 1.
func runPostproc(c *cli.Context) error {
	opts, err := postproc.ParseOptions(postprocArgs(c))
	if err != nil {
		return cli.Exit("postproc: "+err.Error(), 2)
	}
	j := &stageJob{verb: "postproc", opts: opts, warn: c.App.ErrWriter, format: c.String("output-format")}
	if j.funcs, err = funcOptions(c); err != nil {
		return cli.Exit("postproc: "+err.Error(), 2)
	}
	for _, f := range []string{"filter-leaks", "compress", "sort", "context", "resource", "backtrace-depth",
		"include", "exclude", "call-address", "resolve", "remove-args", "pprof", "output-format"} {
		if c.IsSet(f) && j.resOpts == "" {
			j.resOpts = "--" + f
		}
	}
	switch j.format {
	case formatText, formatWire, formatPprof:
	default:
		return cli.Exit(fmt.Sprintf("postproc: -O %q: the formats are text, wire and pprof", j.format), 2)
	}
	// What the output format cannot carry is refused, not dropped.
	for _, f := range []struct {
		format, flag, why string
	}{
		{formatWire, "compress", "the binary stream has no groups"},
		{formatWire, "resolve", "the binary stream carries addresses only; resolve its text"},
		{formatWire, "sort", "the binary stream has no groups"},
		{formatPprof, "compress", "a profile sums calls by backtrace already"},
		{formatPprof, "sort", "a profile has no groups"},
		{formatPprof, "remove-args", "a profile has no arguments"},
	} {
		format := j.format
		if c.String("pprof") != "" {
			format = formatPprof
		}
		if format == f.format && c.IsSet(f.flag) {
			return cli.Exit(fmt.Sprintf("postproc: --%s with %s output: %s", f.flag, f.format, f.why), 2)
		}
	}
	if p := c.String("pprof"); p != "" {
		if c.NArg() > 0 {
			return cli.Exit("postproc: --pprof names one output file; for a batch, use -O pprof -o OUTDIR", 2)
		}
		if c.IsSet("output") || c.IsSet("output-format") {
			return cli.Exit("postproc: --pprof FILE names the output; it goes without -o and -O", 2)
		}
		j.format = formatPprof
		if err := c.Set("output", p); err != nil {
			return cli.Exit("postproc: "+err.Error(), 2)
		}
	}
	return runStage(c, j)
}

// funcOptions reads the uftrace filters (-F, -N, -D, -t, --tid).
func funcOptions(c *cli.Context) (postproc.FuncOptions, error) {
	var o postproc.FuncOptions
	for _, f := range []struct {
		flag string
		to   *[]uftrace.Pattern
	}{{"filter", &o.Filters}, {"notrace", &o.NoTrace}} {
		for _, s := range c.StringSlice(f.flag) {
			p, err := uftrace.ParsePattern(s, uftrace.PatternRegex)
			if err != nil {
				return o, fmt.Errorf("-%s: %w", f.flag, err)
			}
			*f.to = append(*f.to, p)
		}
	}
	if o.Depth = c.Int("depth"); o.Depth < 0 || c.IsSet("depth") && o.Depth == 0 {
		return o, fmt.Errorf("-D %d: the depth must be 1 or more", o.Depth)
	}
	if s := c.String("time-filter"); s != "" {
		t, err := uftrace.ParseTime(s)
		if err != nil {
			return o, err
		}
		o.Threshold = t
	}
	for _, list := range c.StringSlice("tid") {
		for _, s := range strings.Split(list, ",") {
			tid, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || tid <= 0 {
				return o, fmt.Errorf("--tid %q: want thread ids such as 1234,1235", list)
			}
			if o.Tids == nil {
				o.Tids = map[int]bool{}
			}
			o.Tids[tid] = true
		}
	}
	return o, nil
}

// runStage runs j on -i (or stdin) or, with inputs after the options, on
// each of them into -o OUTDIR.
func runStage(c *cli.Context, j *stageJob) error {
	if c.NArg() == 0 {
		return j.one(c)
	}
	if c.IsSet("input") {
		return cli.Exit(fmt.Sprintf("%s: an input with -i and inputs after the options (%s); use one or the other", j.verb, c.Args().First()), 2)
	}
	out := c.String("output")
	if out == "" || c.IsSet("uftrace-dir") {
		return cli.Exit(fmt.Sprintf("%s: several inputs need -o OUTDIR, the directory for their outputs", j.verb), 2)
	}
	if n := c.Int("jobs"); n < 1 {
		return cli.Exit(fmt.Sprintf("%s: -j %d: want 1 or more", j.verb, n), 2)
	}
	return j.batch(c, c.Args().Slice(), out, c.Int("jobs"))
}

// postprocArgs turns the verb's flags back into sp-rtrace-postproc
// options, so that they and -P "OPTS" go through the same parser.
func postprocArgs(c *cli.Context) []string {
	var args []string
	for _, f := range []struct{ name, opt string }{
		{"filter-leaks", "-l"}, {"compress", "-c"}, {"resolve", "-r"}, {"remove-args", "-a"},
	} {
		if c.Bool(f.name) {
			args = append(args, f.opt)
		}
	}
	for _, f := range []struct{ name, opt string }{
		{"sort", "-s"}, {"context", "-C"}, {"resource", "-R"}, {"backtrace-depth", "-b"},
		{"include", "--include"}, {"exclude", "--exclude"},
	} {
		if c.IsSet(f.name) {
			args = append(args, f.opt, c.String(f.name))
		}
	}
	for _, r := range c.StringSlice("call-address") {
		args = append(args, "--call-address", r)
	}
	return args
}

// openOutput opens where the output goes: stdout, a file, or a new
// <pid>-<n><ext> in a directory (n counted up from 0 until the name
// is free, as sp-rtrace names its logs: nothing is overwritten).
func openOutput(path string, pid int, ext string, stdout io.Writer) (io.Writer, string, error) {
	if path == "" || path == "-" || path == "stdout" {
		return stdout, "stdout", nil
	}
	st, err := os.Stat(path)
	if err != nil || !st.IsDir() {
		if strings.HasSuffix(path, "/") {
			return nil, "", fmt.Errorf("output directory %s: %w", path, fs.ErrNotExist)
		}
		f, err := os.Create(path)
		if err != nil {
			return nil, "", fmt.Errorf("cannot create the output: %w", err)
		}
		return f, path, nil
	}
	f, name, err := preproc.Create(path, pid, ext)
	if err != nil {
		return nil, "", fmt.Errorf("cannot create the output: %w", err)
	}
	return f, name, nil
}

// replay is a trace.Reader that returns first, then what rest returns.
type replay struct {
	first trace.Item
	rest  trace.Reader
}

func (r *replay) Next() (trace.Item, error) {
	if it := r.first; it != nil {
		r.first = nil
		return it, nil
	}
	return r.rest.Next()
}
