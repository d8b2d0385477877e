package main

import (
	"fmt"
	"strconv"

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
It takes record's function-trace options (-d, -F, -N, -D, -t, -A, -R, -a,
--disable...) and resource tracing's (-e MODULES, -o, -P OPTS, -b), as
'rtrace sp-rtrace' spells them:

   rtrace attach -d fn.data -F 'handle_.*' -D 3 4242   # function calls
   rtrace attach -q -D 2 -t 1us --duration 10s 4242
   rtrace attach -e memory -o out --duration 10s 4242   # resource calls

With -e the resource calls go to out/<pid>-<n>.rtrace (or text with -P);
without -e, or with -d, the function calls go to a uftrace.data directory.
A process already traced (by a debugger, strace, another rtrace) is refused
with the tracer's pid and name. The tracing is done by a child process of
this command: if the command is killed, even with SIGKILL, the child
detaches first, as at Ctrl-C (docs/RELIABILITY.md). Attaching needs ptrace permission: the same
user and /proc/sys/kernel/yama/ptrace_scope 0, or root (CAP_SYS_PTRACE).`,
		Flags: append(sessionFlags(),
			&cli.DurationFlag{Name: "duration", Usage: "detach after `D` (e.g. 10s; default: at Ctrl-C or the process's end)"},
		),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("attach: want one PID (usage: rtrace attach [OPTIONS] PID)", 2)
			}
			pid, err := strconv.Atoi(c.Args().First())
			if err != nil || pid <= 0 {
				return cli.Exit(fmt.Sprintf("attach: %q is not a process id", c.Args().First()), 2)
			}
			o, err := sessionOptions(c)
			if err != nil {
				return cli.Exit("attach: "+err.Error(), 2)
			}
			o.Pid, o.Duration = pid, c.Duration("duration")
			code, err := launcher.Attach(o)
			if err != nil {
				err = fmt.Errorf("attach: %w", err)
			}
			return exit(code, err)
		},
	}
}
