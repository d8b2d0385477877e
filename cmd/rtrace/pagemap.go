package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"rtrace/launcher"
	"rtrace/pagemap"
)

func pagemapCommand() *cli.Command {
	return &cli.Command{
		Name:      "pagemap",
		Usage:     "draw the pages of a traced process's writable memory at its end, as sp-rtrace-pagemap: page types, block density, mapping counts",
		UsageText: "rtrace pagemap -p|-d|-c [-s] [OPTIONS] [-i FILE] [-o FILE]",
		Description: `Reads a resource trace recorded with --module pagemap (raw, or a text report
of it; stdin by default) and draws sp-rtrace-pagemap's reports: each writable
mapping of the process when it ended, a character a page, 48 pages a line.

   -p  page types: ' ' a clean zero page, '.' a clean page, '#' a dirty page
       in RAM, '0' a dirty page of zeros, 'S' swapped, 'Z' swapped zeros;
       then each mapping's counts (pages, kB, share of the mapping and of
       all writable pages)
   -d  density: how much of each page the blocks still allocated at the end
       take, '0'-'9' in tenths, '#' all of it
   -c  mapping counts: by how many processes each page is mapped
   -s  the page type summary: pages by the kernel's flags (page-types' marks)

The page map is taken when the process's last thread ends. Dirty pages, the
mapping counts and the summary are the kernel's (/proc/kpageflags and
kpagecount) where rtrace could read them, as root; without, '#' is an
anonymous page in RAM (the kernel counts those swap-backed, which sp-rtrace
counts dirty), -c tells pages mapped once ('1') from shared ones ('+'), and
the summary has no flags.

   rtrace record --module memory --module pagemap -o out ./prog
   rtrace pagemap -p -s -i out/1234-0.rtrace
   rtrace postproc -l -i out/1234-0.rtrace | rtrace pagemap -d -N heap -T 3`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "in", Aliases: []string{"i"}, Usage: "read `FILE` (default: stdin); the page map's files are looked up beside it"},
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "write the report to `FILE` (default: stdout)"},
			&cli.BoolFlag{Name: "pages", Aliases: []string{"p"}, Usage: "draw the page types"},
			&cli.BoolFlag{Name: "density", Aliases: []string{"d"}, Usage: "draw how much of each page the live blocks take"},
			&cli.BoolFlag{Name: "count", Aliases: []string{"c"}, Usage: "draw how many processes map each page"},
			&cli.BoolFlag{Name: "summary", Aliases: []string{"s"}, Usage: "add the summary of the pages by the kernel's flags"},
			&cli.IntFlag{Name: "top", Aliases: []string{"T"}, Usage: "list the `N` live blocks at the highest addresses of each mapping"},
			&cli.IntFlag{Name: "bottom", Aliases: []string{"B"}, Usage: "list the `N` live blocks at the lowest addresses"},
			&cli.StringFlag{Name: "filter-name", Aliases: []string{"N"}, Usage: "draw only the mappings whose path contains `NAME` (heap, libc...)"},
			&cli.StringFlag{Name: "filter-address", Aliases: []string{"A"}, Usage: "draw only the mapping holding the hex address `ADDR`"},
			&cli.StringFlag{Name: "filter-page", Aliases: []string{"P"}, Usage: "sp-rtrace's filter of the trace by page type: not supported"},
			&cli.BoolFlag{Name: "help-pages", Usage: "list the kernel's page flags the summary marks"},
		},
		UseShortOptionHandling: true,
		Action: func(c *cli.Context) error {
			if err := noEmpty(c, "in", "out"); err != nil {
				return err
			}
			if c.Bool("help-pages") {
				fmt.Fprint(c.App.Writer, pagemap.FlagHelp())
				return nil
			}
			if c.IsSet("filter-page") {
				return cli.Exit("pagemap: -P/--filter-page: sp-rtrace-pagemap's filter mode (the trace cut to the blocks on pages of a type) is not supported; the reports take -N and -A", 2)
			}
			if c.NArg() > 0 {
				return cli.Exit(fmt.Sprintf("pagemap: %q: the input is -i FILE (or stdin)", c.Args().First()), 2)
			}
			var o pagemap.Options
			n := 0
			for _, r := range []string{"pages", "density", "count"} {
				if c.Bool(r) {
					o.Report, n = r, n+1
				}
			}
			o.Summary = c.Bool("summary")
			switch {
			case n > 1:
				return cli.Exit("pagemap: -p, -d and -c are three reports: give one (and -s for the summary after it)", 2)
			case n == 0 && !o.Summary:
				return cli.Exit("pagemap: no report: give -p (page types), -d (density), -c (mapping counts) or -s (summary)", 2)
			}
			o.Top, o.Bottom, o.Name = c.Int("top"), c.Int("bottom"), c.String("filter-name")
			if o.Top < 0 || o.Bottom < 0 {
				return cli.Exit("pagemap: -T and -B take a count of blocks, 0 or more", 2)
			}
			if a := c.String("filter-address"); c.IsSet("filter-address") {
				v, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(a, "0x"), "0X"), 16, 64)
				if err != nil {
					return cli.Exit(fmt.Sprintf("pagemap: -A %q: not a hex address", a), 2)
				}
				o.Addr, o.HasAddr = v, true
			}
			in := c.String("in")
			rd, name, done, err := launcher.OpenTrace(in, c.App.Reader)
			if err != nil {
				return cli.Exit("pagemap: "+err.Error(), 1)
			}
			defer done()
			dir := ""
			if in != "" {
				dir = filepath.Dir(in)
			}
			d, err := pagemap.Read(rd, dir)
			if d == nil {
				return cli.Exit(fmt.Sprintf("pagemap: %s: %v", name, err), 1)
			}
			var out bytes.Buffer
			if err != nil {
				fmt.Fprintf(&out, "INCOMPLETE: %s: %v: these are the blocks read before\n\n", name, err)
			}
			if werr := pagemap.Write(&out, d, o); werr != nil {
				return cli.Exit("pagemap: "+werr.Error(), 1)
			}
			if p := c.String("out"); p != "" {
				if werr := os.WriteFile(p, out.Bytes(), 0o644); werr != nil {
					return cli.Exit("pagemap: "+werr.Error(), 1)
				}
			} else if _, werr := c.App.Writer.Write(out.Bytes()); werr != nil {
				return cli.Exit("pagemap: "+werr.Error(), 1)
			}
			if err != nil {
				return cli.Exit(fmt.Sprintf("pagemap: %s: %v", name, err), 1)
			}
			return nil
		},
	}
}
