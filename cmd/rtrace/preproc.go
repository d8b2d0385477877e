package main

import "github.com/urfave/cli/v2"

func preprocCommand() *cli.Command {
	return &cli.Command{
		Name:   "preproc",
		Usage:  "read a trace stream from a named pipe, pipe or file and store it as a raw .rtrace file",
		Action: notImplemented("preproc"),
	}
}
