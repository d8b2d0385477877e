package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"rtrace/launcher"
)

// spRtraceCommand is resource tracing with sp-rtrace's command line
// (docs/sp-rtrace.md: its launcher's letters), where `rtrace record`
// follows uftrace's.
func spRtraceCommand() *cli.Command {
	return &cli.Command{
		Name:      "sp-rtrace",
		Usage:     "trace a program's resource calls with sp-rtrace's options (-e memory -s -o DIR -P OPTS)",
		ArgsUsage: "[-x] PROG [ARGS...]",
		Description: `Resource tracing as sp-rtrace's launcher does it, with its letters: -e
puts breakpoints on the library functions that allocate and release the
resources of those modules (memory: malloc/free..., file: open/close...,
thread, shm, mmap; -l lists them), and every call is streamed with its
backtrace to a raw <pid>-<n>.rtrace file in -o DIR (never overwriting one),
or, with -P OPTS, through the post-processor into <pid>-<n>.rtrace.txt.
Without -s tracing is off and the program runs at full speed until
'rtrace toggle PID' (or its toggle signal, -S) turns it on; toggling again
closes that file. With -d a uftrace.data directory is written too, where
the resource calls show with their sizes and results. -x PROG, as in
sp-rtrace, starts the program: the words after it are its own.

   rtrace sp-rtrace -e memory -s -b 10 -o out -x ./leaky
   rtrace postproc -l -c -i out/1234-0.rtrace | rtrace resolve
   rtrace sp-rtrace -e memory -s -P "-l -c -r" -o out -x ./leaky
   rtrace sp-rtrace -e memory -o out -x ./server &    # prints the pid
   rtrace sp-rtrace -t 4242 -o out                      # toggles it

'rtrace record' takes the same by long names (--module memory --start
--backtrace-depth 10 --postproc OPTS -o DIR), beside uftrace's options.`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "execute", Aliases: []string{"x"}, Usage: "start PROG (the words after it are PROG's; as sp-rtrace -x)"},
			&cli.StringSliceFlag{Name: "preload", Aliases: []string{"e", "module"}, Usage: "trace the resource calls of `MODULES` (memory, file, thread, shm, mmap, gobject, qobject, memtransfer, audit; join with ':')"},
			&cli.StringSliceFlag{Name: "audit", Aliases: []string{"a"}, Usage: "record every call of `FUNCS` (comma-separated, or @FILE: one a line) with its backtrace, as functracer's audit module (implies -e audit)"},
			&cli.BoolFlag{Name: "start", Aliases: []string{"s"}, Usage: "trace from the start (default: off until toggled)"},
			&cli.IntFlag{Name: "toggle", Aliases: []string{"t"}, Usage: "toggle the tracing of `PID`, a program running under rtrace, as 'rtrace toggle PID'"},
			&cli.BoolFlag{Name: "follow-forks", Aliases: []string{"f"}, Usage: "with -t: the children too (always the case: one recording covers the process tree)"},
			&cli.BoolFlag{Name: "manage-preproc", Aliases: []string{"m"}, Usage: "pre-process in the recording rtrace instead of streaming to a listening toggle; with -t: only toggle, returning once switched (the recording writes the trace)"},
			&cli.StringFlag{Name: "output-dir", Aliases: []string{"o"}, Usage: "write the raw streams into `DIR` (default: the current directory; with -t, the recording's -o DIR, as sp-rtrace's listener)"},
			&cli.StringFlag{Name: "postproc", Aliases: []string{"P"}, Usage: "post-process with these `OPTS` (\"-l -c -r\") into <pid>-<n>.rtrace.txt (with -t: by default the recording's -P OPTS)"},
			&cli.IntFlag{Name: "backtrace-depth", Aliases: []string{"b"}, Value: 10, Usage: "`N` frames per backtrace (0: none)"},
			&cli.BoolFlag{Name: "backtrace-all", Aliases: []string{"A"}, Usage: "backtraces for releases too, not only allocations"},
			&cli.StringFlag{Name: "monitor", Aliases: []string{"M"}, Usage: "backtraces only for allocations of these `SIZES` (comma-separated)"},
			&cli.BoolFlag{Name: "disable-timestamps", Aliases: []string{"T"}, Usage: "accepted for sp-rtrace's command lines; rtrace always records timestamps"},
			&cli.StringFlag{Name: "toggle-signal", Aliases: []string{"S"}, Value: "SIGUSR1", Usage: "the `SIGNAL` that toggles tracing (rtrace intercepts it)"},
			&cli.BoolFlag{Name: "disable-packet-buffering", Aliases: []string{"B"}, Usage: "accepted for sp-rtrace's command lines; rtrace streams in batches either way"},
			&cli.BoolFlag{Name: "list", Aliases: []string{"l"}, Usage: "list the resource modules and their functions, and exit"},
			&cli.StringFlag{Name: "data", Aliases: []string{"d"}, Usage: "also write the function calls, and the resource calls among them, to the uftrace.data directory `DIR`"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no messages but errors"},
			&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "list the functions that could not be traced, with the reason"},
		},
		Action: func(c *cli.Context) error {
			if c.Bool("list") {
				launcher.ListModules(c.App.Writer)
				return nil
			}
			if c.IsSet("toggle") {
				if c.NArg() > 0 {
					return cli.Exit("sp-rtrace: -t PID toggles a running program: no program to start with it", 2)
				}
				sig, err := launcher.ParseSignal(c.String("toggle-signal"))
				if err != nil || !c.IsSet("toggle-signal") {
					sig = 0 // the one the recording announced
				}
				err = launcher.Toggle(launcher.ToggleOptions{Pid: c.Int("toggle"), Signal: sig, Follow: c.Bool("follow-forks"),
					OutDir: c.String("output-dir"), PostOpts: c.String("postproc"), Manage: c.Bool("manage-preproc"), Inherit: true, Stderr: c.App.ErrWriter})
				if err != nil {
					return cli.Exit("sp-rtrace: toggle: "+err.Error(), 1)
				}
				return nil
			}
			o := launcher.Options{
				Dir:           c.String("data"),
				Start:         c.Bool("start"),
				OutDir:        c.String("output-dir"),
				PostOpts:      c.String("postproc"),
				Backtrace:     c.Int("backtrace-depth"),
				BacktraceAll:  c.Bool("backtrace-all"),
				Manage:        c.Bool("manage-preproc"),
				Quiet:         c.Bool("quiet"),
				Verbose:       verbose(c),
				DefaultEngine: os.Getenv("RTRACE_ENGINE"),
				Cmdline:       cmdline(c),
				Version:       version,
				Stderr:        c.App.ErrWriter,
				Args:          c.Args().Slice(),
			}
			for _, m := range c.StringSlice("preload") {
				o.Modules = append(o.Modules, launcher.SplitModules(m)...)
			}
			o.Audit = c.StringSlice("audit")
			if len(o.Modules) == 0 && len(o.Audit) == 0 {
				return cli.Exit("sp-rtrace: choose the resources with -e MODULES (-l lists them)", 2)
			}
			if s := c.String("monitor"); s != "" {
				sizes, err := launcher.ParseSizes(s)
				if err != nil {
					return cli.Exit(fmt.Sprintf("sp-rtrace: -M %q: %v", s, err), 2)
				}
				o.Monitor = sizes
			}
			sig, err := launcher.ParseSignal(c.String("toggle-signal"))
			if err != nil {
				return cli.Exit("sp-rtrace: -S: "+err.Error(), 2)
			}
			o.ToggleSignal = sig
			return exit(launcher.Record(o))
		},
	}
}
