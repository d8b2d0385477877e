package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"rtrace/launcher"
)

// resourceOptions reads record's resource-tracing flags. -P is uftrace's
// FUNC@LIB, or sp-rtrace's post-processor options when its value starts
// with '-' (a function pattern never does).
func resourceOptions(c *cli.Context) (launcher.RecordOptions, error) {
	var o launcher.RecordOptions
	for _, m := range c.StringSlice("module") {
		for _, n := range strings.Split(m, ":") {
			if n != "" {
				o.Modules = append(o.Modules, n)
			}
		}
	}
	o.PostOpts = c.String("postproc")
	for _, p := range c.StringSlice("patch") {
		if strings.HasPrefix(p, "-") {
			o.PostOpts = strings.TrimSpace(o.PostOpts + " " + p)
			continue
		}
		o.Patch = append(o.Patch, p)
	}
	o.Start, o.OutDir, o.Manage = c.Bool("start"), c.String("output-dir"), c.Bool("manage-preproc")
	o.Backtrace, o.BacktraceAll = c.Int("backtrace-depth"), c.Bool("backtrace-all")
	if o.Backtrace < 0 || o.Backtrace > 256 {
		return o, fmt.Errorf("-b %d: want a depth from 0 to 256", o.Backtrace)
	}
	if s := c.String("monitor"); s != "" {
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(f), 0, 64)
			if err != nil {
				return o, fmt.Errorf("--monitor %q: %q is not a size", s, f)
			}
			o.Monitor = append(o.Monitor, n)
		}
	}
	sig, err := launcher.ParseSignal(c.String("toggle-signal"))
	if err != nil {
		return o, fmt.Errorf("--toggle-signal: %w", err)
	}
	o.ToggleSignal = sig
	if len(o.Modules) == 0 && (o.Start || o.OutDir != "" || o.PostOpts != "" || c.IsSet("monitor") || o.Manage) {
		return o, fmt.Errorf("--start, -o, --postproc, --monitor and --manage-preproc are options of resource tracing: choose modules with -e (see --list-modules)")
	}
	return o, nil
}
