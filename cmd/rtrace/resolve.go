package main

import (
	"runtime"

	"github.com/urfave/cli/v2"

	"rtrace/launcher"
	"rtrace/postproc"
)

func resolveCommand() *cli.Command {
	return &cli.Command{
		Name:      "resolve",
		Usage:     "turn backtrace addresses into function names and source lines; complete a uftrace.data directory's symbols",
		UsageText: "rtrace resolve [-p] [-i FILE|DIR] [-o FILE|DIR]\n   rtrace resolve [-p] -o OUTDIR [-j N] INPUT...",
		Description: `Reads sp-rtrace text or an rtrace stream (-i FILE or stdin) and annotates
every backtrace frame from the mappings the trace lists, in sp-rtrace's
forms:

   0x55d0c1a2b1b9 small_block() at leaky.c:12      (symbol and line)
   0x7f3d9266724a __libc_start_call_main() from /usr/lib/x86_64-linux-gnu/libc.so.6
   0x7f3d92600000 from /usr/lib/x86_64-linux-gnu/libfoo.so   (no symbol)
   0x10 in ??                                      (no mapping)

Symbols come from .symtab/.dynsym, lines from DWARF (also from separate
debug files found by build id or .gnu_debuglink under /usr/lib/debug),
C++ names are demangled. Each module is parsed once per run. The output
keeps the input's form: the leak and compress filters it had are redone.

A uftrace.data directory (-i DIR) gets a .sym and a .dbg file for every
module of its session maps, libraries included, so that uftrace names
library functions and --srcline shows their lines; in place, or in a copy
at -o OUTDIR.

Batch: with INPUT... after the options, every input is resolved (-j at a
time) into -o OUTDIR under its own name; a failing input is reported with
its name and does not stop the others; the exit status is then 1.

   rtrace postproc -l -c -i out/1234-0.rtrace | rtrace resolve > leaks.txt
   rtrace resolve -i uftrace.data && uftrace replay --srcline
   rtrace resolve -o resolved/ -j 4 reports/*.txt`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Usage: "read `FILE` or a uftrace.data DIR (default: stdin)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write to `FILE` or into a directory (default: stdout; a uftrace.data input: in place)"},
			&cli.BoolFlag{Name: "full-path", Aliases: []string{"p"}, Usage: "keep full source paths (default: the file name)"},
			&cli.IntFlag{Name: "jobs", Aliases: []string{"j"}, Value: runtime.NumCPU(), Usage: "resolve `N` inputs of a batch at a time"},
		},
		Action: func(c *cli.Context) error {
			if err := noEmpty(c, "input", "output"); err != nil {
				return err
			}
			return stageExit(launcher.RunStage(&launcher.Stage{
				Verb: "resolve", Input: c.String("input"), Output: c.String("output"),
				Inputs: c.Args().Slice(), Jobs: c.Int("jobs"),
				Opts: postproc.Options{Resolve: true, Keep: true}, FullPaths: c.Bool("full-path"),
				Stdout: c.App.Writer, Stderr: c.App.ErrWriter,
			}))
		},
	}
}
