package main

import (
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"rtrace/launcher"
)

func preprocCommand() *cli.Command {
	return &cli.Command{
		Name:  "preproc",
		Usage: "read a trace stream from a named pipe, pipe or file: a raw .rtrace file, or a function trace's uftrace.data directory",
		Description: `Reads one rtrace (or sp-rtrace 2.0) binary stream from -i (a named pipe, a
file) or stdin.

A resource trace: answers its library-load packets with the target's
executable mappings from /proc/<pid>/maps, and writes <pid>-<n>.rtrace in
-o DIR (n counted up until the name is free: nothing is overwritten), or,
with -P OPTS, the post-processor's text <pid>-<n>.rtrace.txt. -o stdout
writes to standard output.

A function trace (what 'rtrace record -o DIR' stores): runs it through the
post-processor (the filters it was recorded with) and the resolver into
the uftrace.data directory -d DIR (default: the one it was recorded for),
a new directory DIR, DIR.1, ... that overwrites nothing.

   rtrace preproc -i /tmp/stream -o traces/
   cat 1234-0.rtrace | rtrace preproc -P "-l -c" -o stdout
   rtrace record -o raw -- ./prog && rtrace preproc -i raw/4242-0.rtrace -d prog.data`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Usage: "read the stream from `FILE` (default: stdin)"},
			&cli.StringFlag{Name: "output-dir", Aliases: []string{"o"}, Usage: "write into `DIR` (default: the current directory; 'stdout': standard output)"},
			&cli.StringFlag{Name: "postproc", Aliases: []string{"P"}, Usage: "post-process a resource trace with these `OPTS` (\"-l -c -r\")"},
			&cli.StringFlag{Name: "uftrace-dir", Aliases: []string{"d"}, Usage: "write a function trace into the uftrace.data directory `DIR` (default: the one it names)"},
		},
		Action: func(c *cli.Context) error {
			var in io.Reader = os.Stdin
			name := "stdin"
			if p := c.String("input"); p != "" && p != "-" {
				f, err := os.Open(p)
				if err != nil {
					return cli.Exit(fmt.Sprintf("preproc: %v", err), 1)
				}
				defer f.Close()
				in, name = f, p
			}
			var out io.Writer
			dir := c.String("output-dir")
			if dir == "stdout" {
				out, dir = c.App.Writer, ""
			}
			paths, err := launcher.Preproc(in, dir, out, c.String("postproc"), c.String("uftrace-dir"), c.App.ErrWriter)
			if err != nil {
				return cli.Exit(fmt.Sprintf("preproc: %s: %v", name, err), 1)
			}
			for _, path := range paths {
				fmt.Fprintf(c.App.ErrWriter, "rtrace: written %s\n", path)
			}
			return nil
		},
	}
}
