package main

import "github.com/urfave/cli/v2"

func attachCommand() *cli.Command {
	return &cli.Command{
		Name:      "attach",
		Usage:     "trace a running process, then detach leaving it unharmed",
		ArgsUsage: "PID",
		Action:    notImplemented("attach"),
	}
}
