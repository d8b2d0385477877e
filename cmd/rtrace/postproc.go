package main

import (
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/urfave/cli/v2"

	"rtrace/launcher"
	"rtrace/postproc"
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
-t TIME drops calls shorter than TIME, --max-stack N drops calls N levels
deep or deeper, --tid keeps those threads. A FUNC
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
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Usage: "read the trace from `FILE` or uftrace.data DIR (default: stdin)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write to `FILE`, or into DIR as <pid>-<n>.rtrace.txt, never overwriting (default: stdout); with INPUT...: the batch's output directory"},
			&cli.StringFlag{Name: "output-format", Aliases: []string{"O"}, Usage: "write resource traces as `FORMAT`: text (sp-rtrace), wire (rtrace's binary stream), wire-2.0 (sp-rtrace 2.0's, which sp-rtrace-postproc reads: no thread ids, times in ms) or pprof", DefaultText: launcher.FormatText},
			&cli.StringFlag{Name: "pprof", Usage: "write an allocation profile to `FILE` (same as -O pprof -o FILE)"},
			&cli.IntFlag{Name: "jobs", Aliases: []string{"j"}, Value: runtime.NumCPU(), Usage: "process `N` inputs of a batch at a time"},
			&cli.StringFlag{Name: "uftrace-dir", Aliases: []string{"d"}, Category: postproc.CategoryFunc, Usage: "write the filtered function trace to the new directory `OUTDIR`"},
		}, filterFlags()...),
		Action: runPostproc,
	}
}

// filterFlags are the flags of the post-processor's option table.
func filterFlags() []cli.Flag {
	var flags []cli.Flag
	for _, o := range postproc.Flags() {
		var aliases []string
		if o.Short != 0 {
			aliases = []string{string(o.Short)}
		}
		switch {
		case o.Arg == "":
			flags = append(flags, &cli.BoolFlag{Name: o.Long, Aliases: aliases, Category: o.Category, Usage: o.Usage})
		case o.Repeat:
			flags = append(flags, &cli.StringSliceFlag{Name: o.Long, Aliases: aliases, Category: o.Category, Usage: o.Usage})
		default:
			flags = append(flags, &cli.StringFlag{Name: o.Long, Aliases: aliases, Category: o.Category, Usage: o.Usage, DefaultText: o.Default})
		}
	}
	return flags
}

// filterOptions applies the filter flags given, in the table's order,
// through the post-processor's own parser of each value; it also names
// the first resource-trace flag given.
func filterOptions(c *cli.Context) (o postproc.Options, resFlag string, err error) {
	for _, f := range postproc.Flags() {
		if !c.IsSet(f.Long) {
			continue
		}
		if f.Category == postproc.CategoryResource && resFlag == "" {
			resFlag = "--" + f.Long
		}
		var vals []string
		switch {
		case f.Arg == "":
			if !c.Bool(f.Long) {
				continue
			}
			vals = []string{""}
		case f.Repeat:
			vals = c.StringSlice(f.Long)
		default:
			vals = []string{c.String(f.Long)}
		}
		for _, v := range vals {
			if err := o.Set(f.Long, v); err != nil {
				return o, "", err
			}
		}
	}
	// -F and -N in command-line order (the last that matches decides), as
	// getoptArgs spelled them.
	if len(o.Funcs.Filters) > 0 && len(o.Funcs.NoTrace) > 0 {
		spelled, _ := c.App.Metadata["spelled"].([]string)
		var order []bool
		for _, a := range spelled {
			switch {
			case a == "--":
				break
			case strings.HasPrefix(a, "--filter="):
				order = append(order, false)
			case strings.HasPrefix(a, "--notrace="):
				order = append(order, true)
			}
		}
		if len(order) == len(o.Funcs.Filters)+len(o.Funcs.NoTrace) {
			o.Funcs.FilterOrder = order
		}
	}
	return o, resFlag, o.Check()
}

// runPostproc is the postproc verb: usage errors exit 2, bad input 1.
func runPostproc(c *cli.Context) error {
	if err := noEmpty(c, "input", "output", "output-format", "pprof", "uftrace-dir"); err != nil {
		return err
	}
	opts, resFlag, err := filterOptions(c)
	if err != nil {
		return cli.Exit("postproc: "+err.Error(), 2)
	}
	if resFlag == "" {
		for _, f := range []string{"pprof", "output-format"} {
			if c.IsSet(f) {
				resFlag = "--" + f
				break
			}
		}
	}
	return stageExit(launcher.RunStage(&launcher.Stage{
		Verb: "postproc", Input: c.String("input"), Output: c.String("output"), Data: c.String("uftrace-dir"),
		Inputs: c.Args().Slice(), Jobs: c.Int("jobs"), Format: c.String("output-format"), Pprof: c.String("pprof"),
		Opts: opts, ResFlag: resFlag,
		Stdout: c.App.Writer, Stderr: c.App.ErrWriter,
	}))
}

// noEmpty refuses a flag given an empty value ("-d $DIR" with DIR unset),
// which the stage would read as not given.
func noEmpty(c *cli.Context, flags ...string) error {
	for _, f := range flags {
		if c.IsSet(f) && c.String(f) == "" {
			return cli.Exit(fmt.Sprintf("%s: --%s: an empty value; name a file or directory", c.Command.Name, f), 2)
		}
	}
	return nil
}

// stageExit turns a stage's error into the verb's exit status: 2 for a
// usage error, the error's own status, else 1.
func stageExit(err error) error {
	var usage *launcher.UsageError
	var exit *launcher.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &usage):
		return cli.Exit(err.Error(), 2)
	case errors.As(err, &exit):
		return cli.Exit(err.Error(), exit.Code)
	}
	return cli.Exit(err.Error(), 1)
}
