package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"rtrace/internal/rtext"
	"rtrace/internal/trace"
	"rtrace/postproc"
	"rtrace/preproc"
	"rtrace/resolver"
)

func postprocCommand() *cli.Command {
	return &cli.Command{
		Name:      "postproc",
		Usage:     "filter a resource trace (leaks, compress, context, ...) into sp-rtrace text",
		UsageText: "rtrace postproc [-l] [-c [-s ORDER]] [-C MASK] [-R MASK] [-b N] [-r] [-i FILE] [-o FILE|DIR]",
		Description: `Reads a resource trace, a raw <pid>-<n>.rtrace stream or sp-rtrace text (told
apart by content, not name), applies sp-rtrace-postproc's filters and writes
sp-rtrace text. Its own output is a valid input, so filters can be chained.

-l keeps the allocations never released (leaks); -c groups calls with the
same backtrace under one copy of it, with a line
"# allocation summary: N block(s) with total size S", groups in -s order.
-l adds one summary per resource type at the end. Masks are hex, as in the
trace: -R 2 keeps resource type <2>, -C 1 the calls of context @1, -C 0 the
calls outside any context.

Examples:
   rtrace postproc -i 1234-0.rtrace > 1234.txt          # binary to text
   rtrace postproc -lc -i 1234-0.rtrace -o traces/      # leak report, traces/1234-0.rtrace.txt
   rtrace postproc -l -c -s count -i 1234.txt           # leak sources, most blocks first
   rtrace postproc -R 2 -C 0 -b 4 -i 1234.txt           # type <2>, no context, 4 frames
   rtrace postproc --call-address /usr/lib/libfoo.so.1:1a40+3c -i 1234.txt
   rtrace record -e memory -o traces/ -- ./prog && rtrace postproc -lc -i traces/<pid>-0.rtrace
   cat 1234-0.rtrace | rtrace postproc -lc | rtrace postproc -R 1 -b 3`,
		UseShortOptionHandling: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Usage: "read the trace from `FILE` (default: stdin)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write to `FILE`, or into DIR as <pid>-<n>.rtrace.txt, never overwriting (default: stdout)"},
			&cli.BoolFlag{Name: "filter-leaks", Aliases: []string{"l"}, Usage: "keep only allocations never released"},
			&cli.BoolFlag{Name: "compress", Aliases: []string{"c"}, Usage: "group calls with identical backtraces"},
			&cli.StringFlag{Name: "sort", Aliases: []string{"s"}, Usage: "order -c groups by `ORDER`: size, size-asc, count or count-asc", DefaultText: "size-asc"},
			&cli.StringFlag{Name: "context", Aliases: []string{"C"}, Usage: "keep calls in the contexts of hex `MASK` (0: calls without context)"},
			&cli.StringFlag{Name: "resource", Aliases: []string{"R"}, Usage: "keep calls of the resource types of hex `MASK` (<1>, <2>, <4>...)"},
			&cli.StringFlag{Name: "backtrace-depth", Aliases: []string{"b"}, Usage: "cut backtraces to `N` frames"},
			&cli.StringFlag{Name: "include", Usage: "keep only the calls whose indexes `FILE` lists (one a line)"},
			&cli.StringFlag{Name: "exclude", Usage: "drop the calls whose indexes `FILE` lists (one a line)"},
			&cli.StringSliceFlag{Name: "call-address", Usage: "keep calls whose backtrace passes through `LIB:START+SIZE` (hex link-time addresses, as nm prints them; repeatable)"},
			&cli.BoolFlag{Name: "resolve", Aliases: []string{"r"}, Usage: "resolve backtrace addresses to functions and source lines"},
			&cli.BoolFlag{Name: "remove-args", Aliases: []string{"a"}, Usage: "drop call arguments"},
		},
		Action: runPostproc,
	}
}

// runPostproc is the postproc verb: usage errors exit 2, bad input 1.
func runPostproc(c *cli.Context) error {
	if c.NArg() > 0 {
		return cli.Exit(fmt.Sprintf("postproc: unexpected argument %q (the input is given with -i FILE)", c.Args().First()), 2)
	}
	opts, err := postproc.ParseOptions(postprocArgs(c))
	if err != nil {
		return cli.Exit("postproc: "+err.Error(), 2)
	}
	if opts.Resolve {
		opts.Resolver = resolver.New(resolver.Options{Warn: c.App.ErrWriter})
	}
	return runStage(c, "postproc", opts)
}

// runStage reads the input (-i or stdin), runs the post-processor with
// opts and writes text to -o (a file, a directory, stdout).
func runStage(c *cli.Context, verb string, opts postproc.Options) error {
	in, inName := io.Reader(os.Stdin), "stdin"
	if p := c.String("input"); p != "" && p != "-" {
		f, err := os.Open(p)
		if err != nil {
			return cli.Exit(fmt.Sprintf(verb+": cannot read the input: %v", err), 1)
		}
		defer f.Close()
		in, inName = f, p
	}
	bad := func(err error) error {
		return cli.Exit(fmt.Sprintf("%s: %s: %v; the input should be a raw .rtrace stream or sp-rtrace text", verb, inName, err), 1)
	}
	rd, err := postproc.NewReader(in)
	if err != nil {
		return bad(err)
	}
	// The header comes first: its pid names the file written into -o DIR.
	first, err := rd.Next()
	if err == io.EOF {
		err = postproc.ErrEmpty
	}
	if err != nil {
		return bad(err)
	}
	pid := 0
	if h, ok := first.(*trace.Header); ok {
		pid = h.Pid
	}
	out, outName, err := openOutput(c.String("output"), pid, c.App.Writer)
	if err != nil {
		return cli.Exit(verb+": "+err.Error(), 1)
	}
	err = postproc.Run(&replay{first: first, rest: rd}, rtext.NewWriter(out), opts)
	if f, ok := out.(*os.File); ok && f != os.Stdout {
		if cerr := f.Close(); err == nil && cerr != nil {
			return cli.Exit(fmt.Sprintf("%s: writing %s: %v", verb, outName, cerr), 1)
		}
		if err == nil {
			fmt.Fprintf(c.App.ErrWriter, "rtrace %s: wrote %s\n", verb, outName)
		}
	}
	if err != nil {
		return cli.Exit(fmt.Sprintf("%s: %s: %v", verb, inName, err), 1)
	}
	return nil
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

// openOutput opens where the text goes: stdout, a file, or a new
// <pid>-<n>.rtrace.txt in a directory (n counted up from 0 until the name
// is free, as sp-rtrace names its logs: nothing is overwritten).
func openOutput(path string, pid int, stdout io.Writer) (io.Writer, string, error) {
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
	f, name, err := preproc.Create(path, pid, ".rtrace.txt")
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
