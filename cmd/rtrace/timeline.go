package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"rtrace/launcher"
	"rtrace/timeline"
)

func timelineCommand() *cli.Command {
	return &cli.Command{
		Name:      "timeline",
		Usage:     "draw a resource trace over time, as sp-rtrace-timeline: totals, activity, lifetimes, size histograms (PNG or SVG)",
		UsageText: "rtrace timeline -t|-a|-l|-c|-s [OPTIONS] [-i FILE] [-o OUT]",
		Description: `Reads a resource trace (raw or text, stdin by default) and draws
sp-rtrace-timeline's reports, each into OUT-<report>.png (-g: .svg):

   -t  totals: the resources held over time, each resource type a line
   -a  activity: allocations and releases per time slice (-S)
   -l  lifetimes: each allocation a segment at its size, from its allocation
       to its release; red: never released
   -c  a histogram of the number of allocations of each size
   -s  a histogram of the bytes allocated at each size

Each title says the numbers to look at: the peak and when, the busiest slice,
how many blocks were never released, the size most allocations took.
--filter-size, --filter-index and --filter-time keep the calls in a range:
[START]-[END] (100-200, 10k-, -1m; index 500-; time [+][HH:][MM:][SS][.sss],
+ relative: from the first call for the start, from the first call kept
for the end).

   rtrace timeline -t -g -i out/1234-0.rtrace -o heap        # heap-totals.svg
   rtrace timeline -t -a -l -c -s -i out/1234-0.rtrace        # 1234-0-totals.png ...
   rtrace timeline -l --filter-size 10k- -i out/1234-0.rtrace  # only blocks of 10 KiB or more`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "totals", Aliases: []string{"t"}, Usage: "draw the resources held over time"},
			&cli.BoolFlag{Name: "activity", Aliases: []string{"a"}, Usage: "draw the allocations and releases per time slice"},
			&cli.BoolFlag{Name: "lifetime", Aliases: []string{"l"}, Usage: "draw each allocation's life"},
			&cli.BoolFlag{Name: "histogram-count", Aliases: []string{"c"}, Usage: "draw the number of allocations of each size"},
			&cli.BoolFlag{Name: "histogram-size", Aliases: []string{"s"}, Usage: "draw the bytes allocated at each size"},
			&cli.BoolFlag{Name: "svg", Aliases: []string{"g"}, Usage: "write SVG (default: PNG)"},
			&cli.StringFlag{Name: "in", Aliases: []string{"i"}, Usage: "read `FILE` (default: stdin)"},
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "write `OUT`-<report>.png|svg (default: the input's name, or timeline)"},
			&cli.Float64Flag{Name: "slice", Aliases: []string{"S"}, Usage: "the activity's time slice in `MS` (default: a 20th of the time)"},
			&cli.Float64Flag{Name: "logscale-size", Aliases: []string{"L"}, Value: 10, Usage: "lifetimes: the size axis's log `BASE`; 1 or less: linear"},
			&cli.Float64Flag{Name: "scale", Usage: "scale the picture to `PERCENT` of its size"},
			&cli.Float64Flag{Name: "scalex", Value: 100, Usage: "scale its width to `PERCENT`"},
			&cli.Float64Flag{Name: "scaley", Value: 100, Usage: "scale its height to `PERCENT`"},
			&cli.StringFlag{Name: "filter-size", Usage: "keep the allocations of `[MIN]-[MAX]` bytes (k, m suffixes)"},
			&cli.StringFlag{Name: "filter-index", Usage: "keep the calls of index `[FIRST]-[LAST]`"},
			&cli.StringFlag{Name: "filter-time", Usage: "keep the calls from `[START]-[END]`, [+][HH:][MM:][SS][.sss]"},
		},
		UseShortOptionHandling: true,
		Action: func(c *cli.Context) error {
			if err := noEmpty(c, "in", "out"); err != nil {
				return err
			}
			if c.NArg() > 0 {
				return cli.Exit(fmt.Sprintf("timeline: %q: the input is -i FILE", c.Args().First()), 2)
			}
			o := timeline.Options{SVG: c.Bool("svg"), Slice: time.Duration(c.Float64("slice") * float64(time.Millisecond)),
				LogBase: c.Float64("logscale-size"), ScaleX: c.Float64("scalex"), ScaleY: c.Float64("scaley")}
			if c.IsSet("scale") {
				o.ScaleX, o.ScaleY = c.Float64("scale"), c.Float64("scale")
			}
			if o.ScaleX <= 0 || o.ScaleY <= 0 || o.ScaleX > 1000 || o.ScaleY > 1000 {
				return cli.Exit("timeline: --scale, --scalex, --scaley: want a percentage, 1 to 1000", 2)
			}
			if c.Float64("slice") < 0 {
				return cli.Exit("timeline: --slice: want a positive number of milliseconds", 2)
			}
			for _, r := range []struct{ flag, kind string }{{"totals", timeline.Totals}, {"activity", timeline.Activity},
				{"lifetime", timeline.Lifetime}, {"histogram-count", timeline.HistCount}, {"histogram-size", timeline.HistSize}} {
				if c.Bool(r.flag) {
					o.Reports = append(o.Reports, r.kind)
				}
			}
			if len(o.Reports) == 0 {
				return cli.Exit("timeline: which report? -t (totals), -a (activity), -l (lifetimes), -c or -s (size histograms)", 2)
			}
			var err error
			if v := c.String("filter-size"); v != "" {
				if o.Size, err = timeline.ParseSize(v); err != nil {
					return cli.Exit("timeline: --filter-size "+err.Error(), 2)
				}
			}
			if v := c.String("filter-index"); v != "" {
				if o.Index, err = timeline.ParseIndex(v); err != nil {
					return cli.Exit("timeline: --filter-index "+err.Error(), 2)
				}
			}
			if v := c.String("filter-time"); v != "" {
				if o.Time, err = timeline.ParseTime(v); err != nil {
					return cli.Exit("timeline: --filter-time "+err.Error(), 2)
				}
			}
			in, out := c.String("in"), c.String("out")
			if out == "" && in != "" {
				out = strings.TrimSuffix(strings.TrimSuffix(filepath.Base(in), ".txt"), ".rtrace")
			}
			if out == "" {
				out = "timeline"
			}
			rd, name, done, err := launcher.OpenTrace(in, c.App.Reader)
			if err != nil {
				return cli.Exit("timeline: "+err.Error(), 1)
			}
			defer done()
			files, err := timeline.Draw(rd, out, o)
			if err != nil {
				return cli.Exit(fmt.Sprintf("timeline: %s: %v", name, err), 1)
			}
			fmt.Fprintf(c.App.ErrWriter, "rtrace: timeline: wrote %s\n", strings.Join(files, ", "))
			return nil
		},
	}
}
