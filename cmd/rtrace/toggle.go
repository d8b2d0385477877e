package main

import "github.com/urfave/cli/v2"

func toggleCommand() *cli.Command {
	return &cli.Command{
		Name:      "toggle",
		Usage:     "switch resource tracing of a process started by rtrace on or off",
		ArgsUsage: "PID",
		Action:    notImplemented("toggle"),
	}
}
