package main

import (
	"fmt"
	"strconv"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"rtrace/launcher"
)

func toggleCommand() *cli.Command {
	return &cli.Command{
		Name:      "toggle",
		Usage:     "switch tracing of a process running under rtrace on or off",
		ArgsUsage: "PID",
		Description: `PID is a program running under 'rtrace record --disable' (function
tracing) or 'rtrace sp-rtrace -e MODULES' (resource tracing), or the rtrace
tracing it: rtrace prints the program's pid when tracing starts off.
Until toggled on, the program runs untraced, at full speed.

The first toggle turns tracing on: it makes a named pipe in a private
directory ($TMPDIR/rtrace-<uid>/<pid>, mode 0600), sends the toggle signal,
which rtrace intercepts (the program never sees it), and writes what rtrace
streams until tracing is turned off: a function trace into a new window of
its uftrace.data directory (DIR, then DIR.1, DIR.2, ...), a resource trace
into <pid>-<n>.rtrace in -o DIR ('rtrace sp-rtrace -t PID', as sp-rtrace's
listener, takes the recording's own -o DIR and -P OPTS by default). The
second toggle (from another shell)
turns it off: the first one then finishes its output and exits.

   rtrace record --disable -d out.data -- ./server &   # prints the pid
   rtrace toggle 4242            # on; keeps running until the window ends
   rtrace toggle 4242            # off: out.data is complete

   rtrace sp-rtrace -e memory -o out -- ./server &
   rtrace toggle -o out 4242     # on
   rtrace toggle 4242            # off: out/4242-0.rtrace is complete

With -m the toggle only switches and returns once the recording did; the
recording then writes the trace itself, as when no toggle listens.

One recording streams the whole traced process tree, so -f (children too)
is what toggling always does.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output-dir", Aliases: []string{"o"}, Usage: "write a resource trace's raw file into `DIR` (default: the current directory)"},
			&cli.StringFlag{Name: "postproc", Aliases: []string{"P"}, Usage: "post-process with these `OPTS` (\"-l -c -r\") into <pid>-<n>.rtrace.txt"},
			&cli.StringFlag{Name: "toggle-signal", Aliases: []string{"S"}, Usage: "send `SIGNAL` (default: the one the recording announced, --toggle-signal's)"},
			&cli.BoolFlag{Name: "follow-forks", Aliases: []string{"f"}, Usage: "toggle the traced children too (always the case: one recording covers the tree)"},
			&cli.BoolFlag{Name: "manage-preproc", Aliases: []string{"m"}, Usage: "only switch, returning once done: the recording writes the trace itself (in its -o DIR, with its -P), as sp-rtrace -m -t"},
			&cli.DurationFlag{Name: "timeout", Value: 0, Usage: "give up when the target does not answer within `D` (default 10s)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("toggle: want one PID (usage: rtrace toggle [OPTIONS] PID)", 2)
			}
			pid, err := strconv.Atoi(c.Args().First())
			if err != nil || pid <= 0 {
				return cli.Exit(fmt.Sprintf("toggle: %q is not a process id", c.Args().First()), 2)
			}
			var sig unix.Signal
			if s := c.String("toggle-signal"); s != "" {
				if sig, err = launcher.ParseSignal(s); err != nil {
					return cli.Exit("toggle: --toggle-signal: "+err.Error(), 2)
				}
			}
			err = launcher.Toggle(launcher.ToggleOptions{Pid: pid, Signal: sig, Follow: c.Bool("follow-forks"),
				OutDir: c.String("output-dir"), PostOpts: c.String("postproc"), Manage: c.Bool("manage-preproc"), Timeout: c.Duration("timeout"), Stderr: c.App.ErrWriter})
			if err != nil {
				return cli.Exit("toggle: "+err.Error(), 1)
			}
			return nil
		},
	}
}
