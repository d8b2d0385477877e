package main

import (
	"errors"
	"strings"

	"github.com/urfave/cli/v2"

	"rtrace/launcher"
)

// cmdline is rtrace's own command line as the shell would show it, for the
// trace's info: the argv run was given, else the command and its arguments.
func cmdline(c *cli.Context) string {
	argv, ok := c.App.Metadata["argv"].([]string)
	if !ok || len(argv) == 0 {
		argv = append([]string{"rtrace", c.Command.Name}, c.Args().Slice()...)
	}
	quoted := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}()<>|&;#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		quoted[i] = a
	}
	return strings.Join(quoted, " ")
}

func recordCommand() *cli.Command {
	return &cli.Command{
		Name:      "record",
		Usage:     "run a program under rtrace and record its function calls",
		ArgsUsage: "[--] PROG [ARGS...]",
		Description: `Starts PROG under ptrace with the caller's stdin, stdout, stderr and
environment, plants a breakpoint at every function of the executable, and
writes a uftrace.data directory that the real uftrace reads:

   rtrace record -d out.data -- ./prog arg1 arg2
   uftrace replay -d out.data

The program needs no -pg, no -finstrument-functions and no LD_PRELOAD.
rtrace exits with PROG's exit code (128+N if a signal N killed it). Its own
messages go to stderr. An existing output directory is renamed to DIR.old.
Ctrl-C or SIGTERM kills PROG and keeps everything recorded so far.

Filters follow uftrace record: -F shows only functions called from a
matching one, -N hides a function and its callees, -D limits the depth.
As in uftrace, a pattern with regex characters (.?*+-^$|()[]{}) is a Go
regular expression matched anywhere in the name; one without them matches
one name exactly. C++ functions match by their short demangled name
(geo::Shape::area) or their symbol. -A and -R patterns work the same way.

Calls from the program into shared libraries (printf(), malloc()) are
recorded at the caller's depth, as uftrace's PLT hooks show them, whether
the program binds lazily, with -z now, or has no PLT (-fno-plt);
--no-libcall leaves them out. Functions inside a library are traced with
-P FUNC@LIB, including libraries loaded later by dlopen. USDT probes
(<sys/sdt.h>) are listed with --list-events and recorded with -E as
uftrace EVENT records; their decoded arguments go to DIR/usdt.txt.

Resource tracing (sp-rtrace): -e memory:file:thread:shm:mmap puts
breakpoints on the library functions that allocate and release those
resources (malloc/free, open/close, fopen/fclose, ...; --list-modules) and
streams every call with its backtrace to a raw <pid>-<n>.rtrace file in -o
DIR (never overwriting one), or, with -P "OPTS", through the post-processor
into <pid>-<n>.rtrace.txt. Without --start tracing is off and the program
runs at full speed until 'rtrace toggle PID' (or its toggle signal) turns
it on; toggling again closes that file. With -d a uftrace.data directory
is written too, where the resource calls show with their sizes and
results:

   rtrace record -e memory --start -b 10 -o out -- ./leaky
   rtrace postproc -l -c -i out/1234-0.rtrace | rtrace resolve
   rtrace record -e memory --start -P "-l -c -r" -o out -- ./leaky
   rtrace record -e memory -o out -- ./server &   rtrace toggle $!`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "data", Aliases: []string{"d"}, Value: "uftrace.data", Usage: "write the trace to `DIR`"},
			&cli.StringSliceFlag{Name: "filter", Aliases: []string{"F"}, Usage: "trace only functions matching `REGEX` and their callees (repeatable)"},
			&cli.StringSliceFlag{Name: "notrace", Aliases: []string{"N"}, Usage: "do not trace functions matching `REGEX` nor their callees (repeatable)"},
			&cli.StringSliceFlag{Name: "event", Aliases: []string{"E"}, Usage: "record the USDT probes matching `PROVIDER:NAME` (globs: 'app:*'), in the executable and its libraries, also after dlopen: EVENT records, and their arguments in DIR/usdt.txt (repeatable)"},
			&cli.BoolFlag{Name: "list-events", Usage: "list the USDT probes of PROG (provider:name, operands, semaphore) and exit"},
			&cli.IntFlag{Name: "depth", Aliases: []string{"D"}, Usage: "record at most `N` nested levels (0: no limit)"},
			&cli.StringSliceFlag{Name: "argument", Aliases: []string{"A"}, Usage: "record arguments of functions matching FUNC, `SPEC` in uftrace syntax: FUNC@arg1/i32,arg2/s,fparg1 (repeatable)"},
			&cli.StringSliceFlag{Name: "retval", Aliases: []string{"R"}, Usage: "record return values, `SPEC` in uftrace syntax: FUNC@retval/s (repeatable)"},
			&cli.BoolFlag{Name: "no-libcall", Usage: "do not record calls into shared libraries (printf(), malloc()...; recorded by default, at the caller's depth, as uftrace does)"},
			&cli.BoolFlag{Name: "nest-libcall", Aliases: []string{"l"}, Usage: "also record the calls libraries make to other libraries through their PLT (not those of libc, libgcc_s, libpthread, libdl and the loader)"},
			&cli.StringSliceFlag{Name: "patch", Aliases: []string{"P"}, Usage: "also trace the functions matching FUNC inside the shared library LIB, `FUNC@LIB` (e.g. 'plug_.*@libplug.so'; LIB is a file name, libplug.so also matches libplug.so.1; libraries loaded by dlopen too) (repeatable)"},
			&cli.IntFlag{Name: "max-stack", Usage: "record no call nested deeper than `N`, hidden calls included (0: no limit)"},
			&cli.StringFlag{Name: "time-filter", Aliases: []string{"t"}, Usage: "leave out calls shorter than `TIME` (500ns, 20us, 1.5ms, 2s) unless a callee is kept"},
			&cli.BoolFlag{Name: "auto-args", Aliases: []string{"a"}, Usage: "record the arguments and return values of every function, typed from DWARF (build with -g)"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no status line, no summary"},
			&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "list the functions that could not be traced, with the reason"},
			&cli.StringSliceFlag{Name: "module", Aliases: []string{"e"}, Usage: "trace the resource calls of `MODULES` (memory, file, thread, shm, mmap; join with ':')"},
			&cli.BoolFlag{Name: "list-modules", Usage: "list the resource modules and their functions, and exit"},
			&cli.BoolFlag{Name: "start", Aliases: []string{"s"}, Usage: "trace resources from the start (default: off until toggled)"},
			&cli.StringFlag{Name: "output-dir", Aliases: []string{"o"}, Usage: "write resource traces into `DIR` (default: the current directory)"},
			&cli.StringFlag{Name: "postproc", Usage: "post-process resource traces with these `OPTS` (\"-l -c -r\") into <pid>-<n>.rtrace.txt; -P works too when OPTS start with '-'"},
			&cli.IntFlag{Name: "backtrace-depth", Aliases: []string{"b"}, Value: 10, Usage: "`N` frames per resource call backtrace (0: none)"},
			&cli.BoolFlag{Name: "backtrace-all", Usage: "backtraces for releases too, not only allocations"},
			&cli.StringFlag{Name: "monitor", Usage: "backtraces only for allocations of these `SIZES` (comma-separated)"},
			&cli.StringFlag{Name: "toggle-signal", Value: "SIGUSR1", Usage: "the `SIGNAL` that toggles resource tracing (rtrace intercepts it)"},
			&cli.BoolFlag{Name: "manage-preproc", Usage: "when toggled on, pre-process in rtrace itself instead of streaming to a listening 'rtrace toggle'"},
			&cli.BoolFlag{Name: "no-pin", Usage: "let the target run on any CPU (default: pin the tracer and the target to one CPU, ~15x cheaper stops on VMs; multi-threaded targets then share that CPU)"},
		},
		Action: func(c *cli.Context) error {
			if c.Bool("list-events") {
				if c.NArg() == 0 {
					return cli.Exit("record --list-events: no program given (usage: rtrace record --list-events PROG)", 2)
				}
				if err := launcher.ListEvents(c.Args().First(), c.App.Writer); err != nil {
					return cli.Exit("rtrace: "+err.Error(), 1)
				}
				return nil
			}
			if c.Bool("list-modules") {
				launcher.ListModules(c.App.Writer)
				return nil
			}
			ro, err := resourceOptions(c)
			if err != nil {
				return cli.Exit(err.Error(), 2)
			}
			dir := c.String("data")
			if len(ro.Modules) > 0 && !c.IsSet("data") {
				dir = "" // resource tracing alone
			}
			code, err := launcher.Record(launcher.RecordOptions{
				Modules: ro.Modules, Start: ro.Start, OutDir: ro.OutDir, PostOpts: ro.PostOpts,
				Backtrace: ro.Backtrace, BacktraceAll: ro.BacktraceAll, Monitor: ro.Monitor,
				ToggleSignal: ro.ToggleSignal, Manage: ro.Manage,
				Dir:         dir,
				Args:        c.Args().Slice(),
				Filter:      c.StringSlice("filter"),
				NoTrace:     c.StringSlice("notrace"),
				ArgSpecs:    c.StringSlice("argument"),
				RetSpecs:    c.StringSlice("retval"),
				AutoArgs:    c.Bool("auto-args"),
				Time:        c.String("time-filter"),
				MaxStack:    c.Int("max-stack"),
				NoLibcall:   c.Bool("no-libcall"),
				NestLibcall: c.Bool("nest-libcall"),
				Patch:       ro.Patch,
				Events:      c.StringSlice("event"),
				Depth:       c.Int("depth"),
				Quiet:       c.Bool("quiet"),
				Verbose:     c.Bool("verbose"),
				NoPin:       c.Bool("no-pin"),
				Cmdline:     cmdline(c),
				Version:     version,
				Stderr:      c.App.ErrWriter,
			})
			if err != nil {
				var ue *launcher.UsageError
				if errors.As(err, &ue) {
					return cli.Exit(err.Error(), 2)
				}
				return cli.Exit(err.Error(), code)
			}
			if code != 0 {
				return cli.Exit("", code)
			}
			return nil
		},
	}
}
