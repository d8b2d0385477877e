package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"

	"github.com/urfave/cli/v2"

	"rtrace/calltree"
	"rtrace/launcher"
)

func calltreeCommand() *cli.Command {
	return &cli.Command{
		Name:      "calltree",
		Usage:     "draw a resolved resource report as rtrace-calltree's call graph (Graphviz dot, or SVG with --svg)",
		UsageText: "rtrace calltree [OPTIONS] [-i FILE | FILE] [-o FILE.dot] [--svg FILE.svg]",
		Description: `Reads a resolved resource report (sp-rtrace text or a raw stream, stdin
by default) and draws sp-rtrace's rtrace-calltree graph: every function of
the allocations' backtraces is a node, the bytes (--type=graph) or the
number (--type=count) of the allocations made through it add up in it, and
the graph shows the nodes through which --limit percent of the total or more
went, from main() towards the allocations (--direction=tb) or back (bt).
Nodes with --emph-limit percent or more are drawn red (filled when they
allocate more than --own-alloc-limit times what their callees do); a node
with no caller or no callee is a diamond; the callees below the limit are
summed up in one node ("3 functions"). --type=topmost draws the backtraces
of the --depth allocations at the highest addresses (the ones that keep
the heap from shrinking). Frames without a function name are left out:
resolve the report first.

   rtrace postproc -l -c -r -i out/1234-0.rtrace | rtrace resolve | rtrace calltree > leaks.dot
   rtrace calltree --svg leaks.svg --limit 5 leaks.txt       # SVG: needs Graphviz's dot
   rtrace calltree --type=count --include-only=parse_ trace.txt`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Usage: "read `FILE` (default: the argument, or stdin)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the dot graph to `FILE` (default: stdout, unless --svg)"},
			&cli.StringFlag{Name: "svg", Usage: "also render the graph as SVG into `FILE`, with Graphviz's dot"},
			&cli.StringFlag{Name: "type", Value: calltree.TypeGraph, Usage: "`TYPE` of graph: graph (bytes allocated through each function), count (allocations) or topmost (the highest addresses' backtraces)"},
			&cli.Float64Flag{Name: "limit", Value: 10, Usage: "show the functions through which at least `PERCENT` of the total went (0.1-100)"},
			&cli.IntFlag{Name: "depth", Value: 3, Usage: "topmost: draw the backtraces of the `N` highest allocations"},
			&cli.StringFlag{Name: "direction", Value: "tb", Usage: "`DIR`: tb, from main() towards the allocations, or bt, back"},
			&cli.Float64Flag{Name: "emph-limit", Value: 60, Usage: "draw red the functions with at least `PERCENT` of the total"},
			&cli.Float64Flag{Name: "own-alloc-limit", Value: 1.2, Usage: "fill those that allocate `FACTOR` times what their callees do"},
			&cli.BoolFlag{Name: "show-below-limit", Value: true, Usage: "sum up the callees below the limit in a node (--show-below-limit=false: leave them out)"},
			&cli.StringSliceFlag{Name: "include-only", Usage: "draw only the backtraces with a function starting with `PREFIX` (repeatable)"},
			&cli.StringSliceFlag{Name: "stop", Usage: "end each backtrace, going towards main(), at a function starting with `PREFIX` (repeatable)"},
			&cli.StringSliceFlag{Name: "ignore", Usage: "leave out of the backtraces the functions starting with `PREFIX` (repeatable)"},
			&cli.BoolFlag{Name: "keep-paths", Usage: "keep source files' full paths"},
			&cli.BoolFlag{Name: "keep-types", Usage: "keep C++ functions' argument types"},
		},
		Action: func(c *cli.Context) error {
			if err := noEmpty(c, "input", "output", "svg"); err != nil {
				return err
			}
			in := c.String("input")
			switch {
			case c.NArg() > 1 || c.NArg() == 1 && in != "":
				return cli.Exit("calltree: one input: -i FILE or FILE", 2)
			case c.NArg() == 1:
				in = c.Args().First()
			}
			o := calltree.Options{Type: c.String("type"), Limit: c.Float64("limit"), Depth: c.Int("depth"), Direction: c.String("direction"),
				EmphLimit: c.Float64("emph-limit"), OwnAlloc: c.Float64("own-alloc-limit"), HideBelow: !c.Bool("show-below-limit"),
				IncludeOnly: c.StringSlice("include-only"), Stop: c.StringSlice("stop"), Ignore: c.StringSlice("ignore"),
				KeepPaths: c.Bool("keep-paths"), KeepTypes: c.Bool("keep-types")}
			if err := o.Check(); err != nil {
				return cli.Exit("calltree: "+err.Error(), 2)
			}
			var dot string
			if c.String("svg") != "" {
				p, err := exec.LookPath("dot")
				if err != nil {
					return cli.Exit("calltree: --svg renders with Graphviz's dot, which is not installed (Debian: apt-get install graphviz); the .dot graph needs no --svg", 2)
				}
				dot = p
			}
			rd, name, done, err := launcher.OpenTrace(in, c.App.Reader)
			if err != nil {
				return cli.Exit("calltree: "+err.Error(), 1)
			}
			defer done()
			var graph bytes.Buffer
			if err := calltree.Write(rd, &graph, o); err != nil {
				return cli.Exit(fmt.Sprintf("calltree: %s: %v", name, err), 1)
			}
			if out := c.String("output"); out != "" {
				if err := os.WriteFile(out, graph.Bytes(), 0o644); err != nil {
					return cli.Exit("calltree: "+err.Error(), 1)
				}
			} else if dot == "" {
				if _, err := c.App.Writer.Write(graph.Bytes()); err != nil {
					return cli.Exit("calltree: "+err.Error(), 1)
				}
			}
			if dot != "" {
				cmd := exec.Command(dot, "-Tsvg", "-o", c.String("svg"))
				cmd.Stdin = &graph
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				if err := cmd.Run(); err != nil {
					return cli.Exit(fmt.Sprintf("calltree: dot -Tsvg: %v: %s", err, bytes.TrimSpace(stderr.Bytes())), 1)
				}
			}
			return nil
		},
	}
}
