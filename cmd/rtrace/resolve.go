package main

import "github.com/urfave/cli/v2"

func resolveCommand() *cli.Command {
	return &cli.Command{
		Name:   "resolve",
		Usage:  "turn addresses into function names and source lines",
		Action: notImplemented("resolve"),
	}
}
