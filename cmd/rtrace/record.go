package main

import "github.com/urfave/cli/v2"

func recordCommand() *cli.Command {
	return &cli.Command{
		Name:      "record",
		Usage:     "run a program under rtrace and record its function calls",
		ArgsUsage: "[--] PROG [ARGS...]",
		Description: `Starts PROG under ptrace, plants a breakpoint at every function of the
executable and writes a uftrace.data directory.`,
		Action: notImplemented("record"),
	}
}
