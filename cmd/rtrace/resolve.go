package main

import (
	"github.com/urfave/cli/v2"

	"rtrace/postproc"
	"rtrace/resolver"
)

func resolveCommand() *cli.Command {
	return &cli.Command{
		Name:  "resolve",
		Usage: "turn backtrace addresses into function names and source lines",
		Description: `Reads sp-rtrace text or an rtrace stream (-i FILE or stdin) and annotates
every backtrace frame from the mappings the trace lists, in sp-rtrace's
forms:

   0x55d0c1a2b1b9 small_block() at leaky.c:12      (symbol and line)
   0x7f3d9266724a __libc_start_call_main() from /usr/lib/x86_64-linux-gnu/libc.so.6
   0x7f3d92600000 from /usr/lib/x86_64-linux-gnu/libfoo.so   (no symbol)
   0x10 in ??                                      (no mapping)

Symbols come from .symtab/.dynsym, lines from DWARF (also from separate
debug files found by build id or .gnu_debuglink under /usr/lib/debug),
C++ names are demangled. Each module is parsed once per run.

   rtrace postproc -l -c -i out/1234-0.rtrace | rtrace resolve > leaks.txt`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Usage: "read `FILE` (default: stdin)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write to `FILE` or into a directory (default: stdout)"},
			&cli.BoolFlag{Name: "full-path", Aliases: []string{"p"}, Usage: "keep full source paths (default: the file name)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cli.Exit("resolve: unexpected argument "+c.Args().First()+" (the input is given with -i FILE)", 2)
			}
			opts := postproc.Options{Resolve: true, Keep: true,
				Resolver: resolver.New(resolver.Options{FullPaths: c.Bool("full-path"), Warn: c.App.ErrWriter})}
			return runStage(c, "resolve", opts)
		},
	}
}
