package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"rtrace/internal/uftrace"
	"rtrace/launcher"
)

// cmdline is rtrace's own command line as uftrace writes its own in the
// trace's info (uftrace.Cmdline): the argv run was given, else the command
// and its arguments.
func cmdline(c *cli.Context) string {
	argv, ok := c.App.Metadata["argv"].([]string)
	if !ok || len(argv) == 0 {
		argv = append([]string{"rtrace", c.Command.Name}, c.Args().Slice()...)
	}
	return uftrace.Cmdline(argv)
}

// exit turns a session's exit code and error into the verb's result.
func exit(code int, err error) error {
	var ee *launcher.ExitError
	if errors.As(err, &ee) {
		return cli.Exit(err.Error(), ee.Code) // the code it says, 0 too (the program's, a trace that failed)
	}
	if err != nil {
		return cli.Exit(err.Error(), max(code, 1))
	}
	if code != 0 {
		return cli.Exit("", code)
	}
	return nil
}

// sessionFlags are the options record and attach share, with the same
// meaning.
func sessionFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "data", Aliases: []string{"d"}, Usage: "write the trace to the uftrace.data directory `DIR` (default: uftrace.data; with -e or -o alone: none)"},
		&cli.StringSliceFlag{Name: "filter", Aliases: []string{"F"}, Usage: "trace only functions matching `REGEX` and their callees (repeatable)"},
		&cli.StringSliceFlag{Name: "notrace", Aliases: []string{"N"}, Usage: "do not trace functions matching `REGEX` nor their callees (repeatable)"},
		&cli.IntFlag{Name: "depth", Aliases: []string{"D"}, Usage: "record at most `N` nested levels (0: no limit)"},
		&cli.IntFlag{Name: "max-stack", Usage: "record no call nested deeper than `N`, hidden calls included (0: no limit)"},
		&cli.StringFlag{Name: "time-filter", Aliases: []string{"t"}, Usage: "leave out calls shorter than `TIME` (500, 500ns, 20us, 1.5ms, 2s; a bare number is ns) unless a callee is kept"},
		&cli.StringSliceFlag{Name: "argument", Aliases: []string{"A"}, Usage: "record arguments of functions matching FUNC, `SPEC` in uftrace syntax: FUNC@arg1/i32,arg2/s,fparg1 (repeatable)"},
		&cli.StringSliceFlag{Name: "retval", Aliases: []string{"R"}, Usage: "record return values, `SPEC` in uftrace syntax: FUNC@retval/s (repeatable)"},
		&cli.BoolFlag{Name: "auto-args", Aliases: []string{"a"}, Usage: "record the arguments and return values of every function, typed from DWARF (build with -g)"},
		&cli.BoolFlag{Name: "srcline", Usage: "keep each module's source lines (a .dbg file from its DWARF) for uftrace replay --srcline, as uftrace record --srcline does; 'rtrace resolve -i DIR' adds them later too"},
		&cli.BoolFlag{Name: "no-libcall", Usage: "do not record calls into shared libraries (printf(), malloc()...; recorded by default, at the caller's depth, as uftrace does)"},
		&cli.BoolFlag{Name: "nest-libcall", Aliases: []string{"l"}, Usage: "also record the calls libraries make to other libraries through their PLT (not those of libc, libgcc_s, libpthread, libdl and the loader)"},
		&cli.StringSliceFlag{Name: "patch", Aliases: []string{"P"}, Usage: "also trace the functions matching FUNC inside the shared library LIB, `FUNC@LIB` (e.g. 'plug_.*@libplug.so'; LIB is a file name, libplug.so also matches libplug.so.1; libraries loaded by dlopen too) (repeatable); a value starting with '-' is --postproc OPTS"},
		&cli.StringSliceFlag{Name: "event", Aliases: []string{"E"}, Usage: "record the USDT probes matching `PROVIDER:NAME` (globs: 'app:*'), in the executable and its libraries, also after dlopen: EVENT records, and their arguments in DIR/usdt.txt (repeatable)"},
		&cli.BoolFlag{Name: "disable", Usage: "start with tracing off: 'rtrace toggle PID' turns it on and off, each window its own uftrace.data directory"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no messages but errors: no status line, no summary"},
		&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "list the functions that could not be traced, with the reason"},
		&cli.StringFlag{Name: "engine", Usage: "how calls are recorded: `ENGINE` fast (the default: recording code injected into the program, no stop per call; functions whose arguments or return value are recorded stop at each call) or int3 (a ptrace stop per call and return, about 11 µs each). Without the option, $RTRACE_ENGINE names the default, and fast falls back to int3 where it cannot apply (-e resource tracing, a CPU whose TSC is not a clock)"},
		&cli.BoolFlag{Name: "no-pin", Usage: "let the target run on any CPU (default: pin the tracer and the target to one CPU, ~15x cheaper stops on VMs; multi-threaded targets then share that CPU)"},
		&cli.StringSliceFlag{Name: "module", Aliases: []string{"e"}, Category: "resource tracing", Usage: "trace the resource calls of `MODULES` (memory, file, thread, shm, mmap, gobject, qobject, memtransfer, audit; join with ':')"},
		&cli.StringSliceFlag{Name: "audit", Category: "resource tracing", Usage: "record every call of `FUNCS` (comma-separated, or @FILE: one a line) with its backtrace, as functracer's audit module (implies -e audit)"},
		&cli.BoolFlag{Name: "start", Aliases: []string{"s"}, Category: "resource tracing", Usage: "trace resources from the start (default: off until toggled)"},
		&cli.StringFlag{Name: "output-dir", Aliases: []string{"o"}, Category: "resource tracing", Usage: "write raw streams into `DIR`: resource traces (-e), or the function trace's when there is no -e"},
		&cli.StringFlag{Name: "postproc", Category: "resource tracing", Usage: "post-process resource traces with these `OPTS` (\"-l -c -r\", split into words as a shell splits them: quote a file name with spaces) into <pid>-<n>.rtrace.txt; -P works too when OPTS start with '-'"},
		&cli.IntFlag{Name: "backtrace-depth", Aliases: []string{"b"}, Value: 10, Category: "resource tracing", Usage: "`N` frames per resource call backtrace (0: none)"},
		&cli.BoolFlag{Name: "backtrace-all", Category: "resource tracing", Usage: "backtraces for releases too, not only allocations"},
		&cli.StringFlag{Name: "monitor", Category: "resource tracing", Usage: "backtraces only for allocations of these `SIZES` (comma-separated)"},
		&cli.StringFlag{Name: "toggle-signal", Value: "SIGUSR1", Usage: "the `SIGNAL` that toggles tracing (with -e or --disable; rtrace intercepts it)"},
		&cli.BoolFlag{Name: "manage-preproc", Category: "resource tracing", Usage: "when toggled on, pre-process in rtrace itself instead of streaming to a listening 'rtrace toggle'"},
	}
}

// sessionOptions reads the options record and attach share. -P is
// uftrace's FUNC@LIB, or sp-rtrace's post-processor options when its
// value starts with '-' (a function pattern never does).
func sessionOptions(c *cli.Context) (launcher.Options, error) {
	o := launcher.Options{
		Dir:           c.String("data"),
		Filter:        c.StringSlice("filter"),
		NoTrace:       c.StringSlice("notrace"),
		Depth:         c.Int("depth"),
		MaxStack:      c.Int("max-stack"),
		Time:          c.String("time-filter"),
		ArgSpecs:      c.StringSlice("argument"),
		RetSpecs:      c.StringSlice("retval"),
		AutoArgs:      c.Bool("auto-args"),
		NoLibcall:     c.Bool("no-libcall"),
		NestLibcall:   c.Bool("nest-libcall"),
		Events:        c.StringSlice("event"),
		Disable:       c.Bool("disable"),
		Quiet:         c.Bool("quiet"),
		Verbose:       verbose(c),
		NoPin:         c.Bool("no-pin"),
		Srcline:       c.Bool("srcline"),
		Engine:        c.String("engine"),
		DefaultEngine: os.Getenv("RTRACE_ENGINE"),
		Cmdline:       cmdline(c),
		Version:       version,
		Stderr:        c.App.ErrWriter,
	}
	for _, m := range c.StringSlice("module") {
		o.Modules = append(o.Modules, launcher.SplitModules(m)...)
	}
	o.Audit = c.StringSlice("audit")
	o.PostOpts = c.String("postproc")
	for _, p := range c.StringSlice("patch") {
		if strings.HasPrefix(p, "-") {
			o.PostOpts = strings.TrimSpace(o.PostOpts + " " + p)
			continue
		}
		o.Patch = append(o.Patch, launcher.PatchRule{Pattern: p})
	}
	o.Start, o.OutDir, o.Manage = c.Bool("start"), c.String("output-dir"), c.Bool("manage-preproc")
	o.Backtrace, o.BacktraceAll = c.Int("backtrace-depth"), c.Bool("backtrace-all")
	if s := c.String("monitor"); s != "" {
		sizes, err := launcher.ParseSizes(s)
		if err != nil {
			return o, fmt.Errorf("--monitor %q: %v", s, err)
		}
		o.Monitor = sizes
	}
	sig, err := launcher.ParseSignal(c.String("toggle-signal"))
	if err != nil {
		return o, fmt.Errorf("--toggle-signal: %w", err)
	}
	o.ToggleSignal = sig
	if c.IsSet("toggle-signal") && len(o.Modules) == 0 && !o.Disable {
		return o, errors.New("--toggle-signal: toggling needs --disable (function tracing) or -e MODULES (resource tracing)")
	}
	return o, nil
}
