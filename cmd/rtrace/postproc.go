package main

import "github.com/urfave/cli/v2"

func postprocCommand() *cli.Command {
	return &cli.Command{
		Name:   "postproc",
		Usage:  "filter a trace (leaks, compress, context...) and write text, wire, uftrace.data or pprof",
		Action: notImplemented("postproc"),
	}
}
