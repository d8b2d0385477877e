package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// run builds the CLI, runs it on args and returns the process exit status.
func run(args []string) int {
	args, err := helpArgs(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rtrace:", err)
		return 2
	}
	if verb, rest, ok := uftraceVerb(args); ok {
		return runUftrace(verb, rest, args, os.Stdout, os.Stderr)
	}
	app := newApp(os.Stdout, os.Stderr)
	app.Metadata = map[string]any{"argv": args}
	if args, err = getoptArgs(app, args); err != nil {
		fmt.Fprintln(os.Stderr, "rtrace", err)
		return 2
	}
	app.Metadata["spelled"] = args // the options in order (postproc's -F and -N)
	return exitStatus(app.Run(args), os.Stderr)
}

// exitStatus maps an error returned by app.Run to an exit status. urfave/cli
// reports flag errors without calling ExitErrHandler, so every error ends
// here and is printed once.
func exitStatus(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		if msg := err.Error(); msg != "" {
			fmt.Fprintln(stderr, "rtrace:", msg)
		}
		return ec.ExitCode()
	}
	fmt.Fprintln(stderr, "rtrace:", err)
	return 2
}

// newApp builds the command-line interface writing to stdout and stderr.
func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:    "rtrace",
		Usage:   "trace native Linux programs with ptrace breakpoints, no LD_PRELOAD, no recompiling",
		Version: version,
		Description: `rtrace starts a program under ptrace (or attaches to a running one), plants
int3 breakpoints at function entries, libc resource functions and USDT probes,
and streams what it sees through separate stages:

   tracer -> preproc (named pipe) -> postproc (filters) -> resolve

Function traces are written as uftrace.data directories that the real uftrace
reads (replay, report, graph, tui, dump --chrome). Resource traces follow
sp-rtrace: raw <pid>-<n>.rtrace streams and sp-rtrace text.

Function tracing takes uftrace's command line (rtrace record --help):
   record [OPTIONS] PROG [ARGS]   record PROG's function calls (uftrace record)
   live [OPTIONS] PROG [ARGS]     record, then show with uftrace replay (uftrace live)
   [OPTIONS] PROG [ARGS]          the same as live (uftrace PROG)
   script -S SCRIPT --record PROG record, then run uftrace script on the trace
   replay|report|graph|tui|dump|info|recv ...   the installed uftrace's verb

Examples:
   rtrace record ./prog args                      # writes uftrace.data/
   uftrace replay -d uftrace.data                 # look at it with uftrace
   rtrace -D3 ./prog args                         # record and show at once
   rtrace sp-rtrace -e memory -s -o out -x ./prog # resource calls, sp-rtrace style
   rtrace postproc -l -c -i out/1234-0.rtrace | rtrace resolve`,
		Writer:                    stdout,
		ErrWriter:                 stderr,
		HideHelpCommand:           true,
		DisableSliceFlagSeparator: true, // C++ names contain commas
		ExitErrHandler:            func(*cli.Context, error) {},
		// -v is uftrace's --verbose, for the verbs that have verbose
		// output, not the version (-V, --version).
		HideVersion: true,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "verbose output of record, live, attach and sp-rtrace (as their own -v)"},
			&cli.BoolFlag{Name: "version", Aliases: []string{"V"}, Usage: "print the version"},
		},
		Before: func(c *cli.Context) error {
			if c.Bool("version") {
				cli.ShowVersion(c)
				return cli.Exit("", 0)
			}
			if !c.Bool("verbose") {
				return nil
			}
			verb := c.Args().First()
			if verb != "" && c.App.Command(verb) == nil {
				return nil // the action says it is unknown
			}
			switch verb {
			case "attach", "sp-rtrace":
			case "":
				return cli.Exit("-v: which verb? (rtrace -v record|live|attach|sp-rtrace ...)", 2)
			default:
				return cli.Exit(fmt.Sprintf("-v: %s has no verbose output; -v applies to record, live, attach and sp-rtrace", verb), 2)
			}
			return nil
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cli.Exit(fmt.Sprintf("unknown command %q (run 'rtrace --help' for the list)", c.Args().First()), 2)
			}
			return cli.ShowAppHelp(c)
		},
		Commands: []*cli.Command{
			spRtraceCommand(),
			attachCommand(),
			toggleCommand(),
			preprocCommand(),
			postprocCommand(),
			resolveCommand(),
			calltreeCommand(),
			timelineCommand(),
			pagemapCommand(),
		},
	}
	return app
}

// verbose says whether -v was given to the verb or before it.
func verbose(c *cli.Context) bool {
	for _, x := range c.Lineage() {
		if x.IsSet("verbose") && x.Bool("verbose") {
			return true
		}
	}
	return false
}
