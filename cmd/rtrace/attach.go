package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"rtrace/launcher"
)

func attachCommand() *cli.Command {
	return &cli.Command{
		Name:      "attach",
		Usage:     "trace a running process, then detach leaving it unharmed",
		ArgsUsage: "PID",
		Description: `Seizes every thread of PID (PTRACE_SEIZE, no SIGSTOP), plants the
breakpoints and traces until Ctrl-C, --duration, or the process ends. Then
every breakpoint comes out, every original byte, return address and USDT
semaphore is restored, and the process goes on as if rtrace was never there.

   rtrace attach -e memory -o out --duration 10s 4242   # resource calls
   rtrace attach -d fn.data -F 'handle_.*' 4242          # function calls

With -e the resource calls go to out/<pid>-<n>.rtrace (or text with -P);
without -e, or with -d, the function calls go to a uftrace.data directory.
Attaching needs ptrace permission: the same user and
/proc/sys/kernel/yama/ptrace_scope 0, or root (CAP_SYS_PTRACE).`,
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "module", Aliases: []string{"e"}, Usage: "trace the resource calls of `MODULES` (memory, file, thread, shm, mmap; join with ':')"},
			&cli.StringFlag{Name: "output-dir", Aliases: []string{"o"}, Usage: "write resource traces into `DIR` (default: the current directory)"},
			&cli.StringFlag{Name: "postproc", Aliases: []string{"P"}, Usage: "post-process resource traces with `OPTS` into <pid>-<n>.rtrace.txt"},
			&cli.IntFlag{Name: "backtrace-depth", Aliases: []string{"b"}, Value: 10, Usage: "`N` frames per backtrace (0: none)"},
			&cli.StringFlag{Name: "data", Aliases: []string{"d"}, Usage: "write the function calls to the uftrace.data directory `DIR`"},
			&cli.StringSliceFlag{Name: "filter", Aliases: []string{"F"}, Usage: "trace only functions matching `REGEX` and their callees"},
			&cli.StringSliceFlag{Name: "notrace", Aliases: []string{"N"}, Usage: "do not trace functions matching `REGEX` nor their callees"},
			&cli.DurationFlag{Name: "duration", Usage: "detach after `D` (e.g. 10s; default: at Ctrl-C or the process's end)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("attach: want one PID (usage: rtrace attach [OPTIONS] PID)", 2)
			}
			pid, err := strconv.Atoi(c.Args().First())
			if err != nil || pid <= 0 {
				return cli.Exit(fmt.Sprintf("attach: %q is not a process id", c.Args().First()), 2)
			}
			var mods []string
			for _, m := range c.StringSlice("module") {
				mods = append(mods, strings.Split(m, ":")...)
			}
			err = launcher.Attach(launcher.AttachOptions{Pid: pid, Modules: mods, OutDir: c.String("output-dir"),
				PostOpts: c.String("postproc"), Backtrace: c.Int("backtrace-depth"), Dir: c.String("data"),
				Filter: c.StringSlice("filter"), NoTrace: c.StringSlice("notrace"), Duration: c.Duration("duration"),
				Stderr: c.App.ErrWriter, Version: version, Cmdline: cmdline(c)})
			if err != nil {
				var ue *launcher.UsageError
				if errors.As(err, &ue) {
					return cli.Exit("attach: "+err.Error(), 2)
				}
				return cli.Exit("attach: "+err.Error(), 1)
			}
			return nil
		},
	}
}
