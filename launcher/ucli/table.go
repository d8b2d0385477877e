package ucli

import (
	"errors"
	"strconv"

	"rtrace/launcher"
)

// group is a section of --help.
type group int

const (
	recordGroup group = iota
	commonGroup
	configGroup
	globalGroup
	displayGroup
	rtraceGroup
	resourceGroup
	otherGroup // other uftrace commands' options: accepted, not listed
	hiddenGroup
)

var groupTitles = map[group]string{
	recordGroup:   "RECORD OPTIONS",
	commonGroup:   "COMMON OPTIONS (filters)",
	configGroup:   "RECORD CONFIG OPTIONS",
	globalGroup:   "GLOBAL OPTIONS",
	displayGroup:  "DISPLAY OPTIONS (uftrace replay's: for rtrace live; record ignores them, as uftrace does)",
	rtraceGroup:   "RTRACE OPTIONS (not uftrace's)",
	resourceGroup: "RESOURCE TRACING (sp-rtrace's long options; 'rtrace sp-rtrace' takes its letters)",
}

// Reasons shared by several options.
const (
	noKernel    = "kernel tracing needs uftrace's ftrace recorder; rtrace traces user space only"
	noLibmcount = "rtrace loads no libmcount: its recording code is injected through ptrace"
	otherCmd    = "an option of another uftrace command; record ignores it, as uftrace does"
)

// table is every option of uftrace v0.13's command line (uftrace --help,
// uftrace-record(1), uftrace-live(1), uftrace(1)), then rtrace's own.
var table = []option{
	// RECORD OPTIONS (uftrace-record(1)).
	{long: "argument", short: 'A', arg: "SPEC", group: recordGroup, help: "record function arguments: FUNC@arg1/i32,arg2/s,fparg1; FUNC alone: those DWARF gives FUNC, or the built-in table of C library functions (repeatable)",
		set: appendTo(func(o *launcher.Options) *[]string { return &o.ArgSpecs })},
	{long: "retval", short: 'R', arg: "SPEC", group: recordGroup, help: "record function return values: FUNC@retval/s; FUNC alone: as DWARF, or the built-in table of C library functions, gives FUNC's (repeatable)",
		set: appendTo(func(o *launcher.Options) *[]string { return &o.RetSpecs })},
	{long: "patch", short: 'P', arg: "FUNC", group: recordGroup, help: "trace only the functions matching FUNC (repeatable; without -P every function is, as with -P .); FUNC@LIB selects inside the shared library LIB, dlopen'ed ones too",
		set: func(c *Cmd, v string) error {
			c.Options.Patch = append(c.Options.Patch, launcher.PatchRule{Pattern: v})
			return nil
		}},
	{long: "unpatch", short: 'U', arg: "FUNC", group: recordGroup, help: "do not trace the functions matching FUNC (FUNC@LIB: in LIB) (repeatable; with -P, the last pattern that matches a function decides)",
		set: func(c *Cmd, v string) error {
			c.Options.Patch = append(c.Options.Patch, launcher.PatchRule{Pattern: v, Out: true})
			return nil
		}},
	{long: "Event", short: 'E', arg: "EVENT", group: recordGroup, help: "record the USDT probes matching PROVIDER:NAME (globs: 'app:*') as uftrace EVENT records, and linux:task-name, the task name changes (perf's comm events, as uftrace); repeatable",
		set: appendTo(func(o *launcher.Options) *[]string { return &o.Events })},
	{long: "event", arg: "EVENT", group: hiddenGroup, exact: true, help: "as --Event (uftrace-record(1) spells it so; a prefix of it is --event-full's, as in uftrace)",
		set: appendTo(func(o *launcher.Options) *[]string { return &o.Events })},
	{long: "script", short: 'S', arg: "SCRIPT", group: recordGroup, help: "run a script at each function entry and exit", kind: refused,
		why: "record-time scripts run inside uftrace's libmcount; run the script on the trace instead: uftrace script -d DIR -S SCRIPT"},
	{long: "watch", short: 'W', arg: "POINT", group: recordGroup, help: "record POINT when it changes at a call or return: cpu, the CPU the thread runs on (repeatable)",
		set: appendTo(func(o *launcher.Options) *[]string { return &o.Watch })},
	{long: "auto-args", short: 'a', group: recordGroup, help: "record the arguments and return values of every function, typed from DWARF (build with -g), and of C library calls from a built-in table (open's flags by name)",
		set: func(c *Cmd, _ string) error { c.Options.AutoArgs = true; return nil }},
	{long: "nest-libcall", short: 'l', group: recordGroup, help: "also record the calls libraries make to other libraries",
		set: func(c *Cmd, _ string) error { c.Options.NestLibcall = true; return nil }},
	{long: "kernel", short: 'k', group: recordGroup, help: "trace kernel functions too", kind: refused, why: noKernel},
	{long: "kernel-depth", short: 'K', arg: "DEPTH", group: recordGroup, help: "kernel function depth", kind: refused, why: noKernel},
	{long: "clock", arg: "CLOCK", group: recordGroup, help: "the clock of the timestamps: mono only (rtrace converts its TSC readings to CLOCK_MONOTONIC)",
		set: func(_ *Cmd, v string) error {
			switch v {
			case "mono":
				return nil
			case "mono_raw", "boot":
				return errors.New("rtrace records CLOCK_MONOTONIC ('mono') only")
			}
			return errors.New("want mono (uftrace's mono_raw and boot are not recorded by rtrace)")
		}},
	{long: "host", arg: "HOST", group: recordGroup, help: "send the trace to 'uftrace recv' on HOST, as the directory -d names there (none is kept here)",
		set: func(c *Cmd, v string) error { c.Options.Host = v; return nil }},
	{long: "port", arg: "PORT", group: recordGroup, help: "the port of --host (default 8090)",
		set: setInt(func(o *launcher.Options) *int { return &o.Port })},
	{long: "signal", arg: "SIG@ACT", group: recordGroup, help: "at signal SIG, tracing turns on (trace_on), off (trace_off) or ends (finish: the trace is saved, the program goes on); the program does not get SIG (repeatable)",
		why: "a trace_on after --disable starts the trace directory, as rtrace toggle does; finish saves it at once",
		set: appendTo(func(o *launcher.Options) *[]string { return &o.Signals })},
	{long: "nop", group: recordGroup, help: "keep no trace: the program runs traced as usual, its records dropped at the end (for comparisons)",
		set: func(c *Cmd, _ string) error { c.Options.Nop = true; return nil }},
	{long: "force", group: recordGroup, help: "trace a program without mcount symbols", kind: inert,
		why: "rtrace needs no mcount symbol: every program is traced as it is"},
	{long: "time", group: recordGroup, help: "print the program's running time (elapsed, system, user) when it ends",
		set: func(c *Cmd, _ string) error { c.Options.ShowTime = true; return nil }},
	{long: "estimate-return", short: 'e', group: recordGroup, help: "as uftrace's (returns estimated from later entries); rtrace records the exact returns (not sp-rtrace's -e MODULES: 'rtrace sp-rtrace -e MODULES' or --module MODULES)",
		set: func(c *Cmd, _ string) error { c.Options.EstimateReturn = true; return nil }},

	// COMMON OPTIONS: filters.
	{long: "filter", short: 'F', arg: "FUNC", group: commonGroup, help: "trace only functions matching FUNC and their callees; FUNC@PLT: the program's library calls, FUNC@LIB: LIB's functions (repeatable)",
		set: func(c *Cmd, v string) error {
			c.Options.Filter, c.Options.FilterOrder = append(c.Options.Filter, v), append(c.Options.FilterOrder, false)
			return nil
		}},
	{long: "notrace", short: 'N', arg: "FUNC", group: commonGroup, help: "do not trace functions matching FUNC nor their callees (repeatable; of a function -F and -N both match, the last given decides)",
		set: func(c *Cmd, v string) error {
			c.Options.NoTrace, c.Options.FilterOrder = append(c.Options.NoTrace, v), append(c.Options.FilterOrder, true)
			return nil
		}},
	{long: "caller-filter", short: 'C', arg: "FUNC", group: commonGroup, help: "trace only the calls of functions matching FUNC (not their callees) and the calls they are made in (repeatable)",
		set: appendTo(func(o *launcher.Options) *[]string { return &o.Caller })},
	{long: "trigger", short: 'T', arg: "FUNC@ACT", group: commonGroup, help: "actions at functions matching FUNC: depth=N, time=T, size=N, filter, notrace, hide, caller, trace, trace_on, trace_off, finish, argN, fpargN, retval, read=proc/statm, read=page-fault (backtrace and color= are uftrace replay's; recover has nothing to do: callers' return addresses are always the real ones); repeatable",
		why: "not yet: read=pmu-cycle/pmu-cache/pmu-branch (hardware counters), read= of one module's functions (FUNC@MODULE,read=...); with threads, trace_on/trace_off/finish apply in the order of each thread's batches of records, not exactly in time; size=N as libmcount's, by the functions' symbol sizes",
		set: func(c *Cmd, v string) error {
			c.Options.Trigger = append(c.Options.Trigger, v)
			if r := replayTriggers(v); r != "" {
				c.Replay = append(c.Replay, "-T", r)
			}
			return nil
		}},
	{long: "depth", short: 'D', arg: "DEPTH", group: commonGroup, help: "trace functions within DEPTH nested levels",
		set: setInt(func(o *launcher.Options) *int { return &o.Depth })},
	{long: "time-filter", short: 't', arg: "TIME", group: commonGroup, replay: true, help: "leave out calls shorter than TIME (500, 500ns, 20us, 1.5ms, 2s; a bare number is ns)",
		set: func(c *Cmd, v string) error { c.Options.Time = v; return nil }},
	{long: "size-filter", short: 'Z', arg: "SIZE", group: commonGroup, help: "trace only functions of SIZE bytes or more (a library call counts its PLT entry's 16, as in uftrace)",
		set: setInt(func(o *launcher.Options) *int { return &o.SizeFilter })},
	{long: "loc-filter", short: 'L', arg: "LOCATION", group: commonGroup, replay: true, help: "trace only the functions DWARF declares in source files matching LOCATION, and no library call (LOCATION@hide: all but those); implies --srcline (repeatable)",
		set: appendTo(func(o *launcher.Options) *[]string { return &o.Loc })},
	{long: "hide", short: 'H', arg: "FUNC", group: commonGroup, replay: true, help: "leave out the calls of functions matching FUNC, keeping their callees a level up (repeatable)",
		set: appendTo(func(o *launcher.Options) *[]string { return &o.Hide })},
	{long: "no-libcall", group: commonGroup, replay: true, help: "do not record calls into shared libraries",
		set: func(c *Cmd, _ string) error { c.Options.NoLibcall = true; return nil }},
	{long: "no-event", group: commonGroup, help: "record no default events", kind: inert, why: "rtrace records no events but -E's"},
	{long: "no-sched", group: commonGroup, help: "record no schedule events", kind: inert, why: "rtrace records no schedule events"},
	{long: "match", arg: "TYPE", group: commonGroup, replay: true, help: "patterns are regex (the default) or glob",
		set: func(c *Cmd, v string) error {
			if v != "regex" && v != "glob" {
				return errors.New("want regex or glob")
			}
			c.Options.Match = v
			return nil
		}},
	{long: "disable", group: commonGroup, help: "start with tracing off: 'rtrace toggle PID' turns it on and off",
		set: func(c *Cmd, _ string) error { c.Options.Disable = true; return nil }},
	{long: "with-syms", arg: "DIR", group: commonGroup, replay: true, help: "read the functions of the program and its libraries from the .sym files in DIR (DIR/NAME.sym, as a trace holds them), not from the binaries: a stripped program traced by name",
		set: func(c *Cmd, v string) error { c.Options.WithSyms = v; return nil }},

	// RECORD CONFIG OPTIONS.
	{long: "libmcount-path", arg: "PATH", group: configGroup, help: "where libmcount is", kind: inert, why: noLibmcount},
	{long: "buffer", short: 'b', arg: "SIZE", group: configGroup, help: "the size of a thread's buffer", kind: inert,
		why: "rtrace's per-thread rings have a fixed size (1 MiB) and are drained while the program runs", set: size},
	{long: "kernel-buffer", arg: "SIZE", group: configGroup, help: "the kernel's buffer", kind: refused, why: noKernel},
	{long: "no-pltbind", group: configGroup, help: "run the program with LD_BIND_NOT set: its library calls stay unbound",
		set: func(c *Cmd, _ string) error { c.Options.Env = append(c.Options.Env, "LD_BIND_NOT=1"); return nil }},
	{long: "max-stack", arg: "DEPTH", group: configGroup, help: "record no call nested deeper than DEPTH",
		set: setInt(func(o *launcher.Options) *int { return &o.MaxStack })},
	{long: "num-thread", arg: "NUM", group: configGroup, help: "recorder threads", kind: inert, why: "rtrace drains every thread's ring without recorder threads to size"},
	{long: "libmcount-single", group: configGroup, help: "single-thread libmcount", kind: inert, why: noLibmcount},
	{long: "rt-prio", arg: "PRIO", group: configGroup, help: "real-time priority of the recorder", kind: inert, why: "rtrace's drain runs at normal priority",
		set: func(_ *Cmd, v string) error {
			if _, err := strconv.Atoi(v); err != nil {
				return errors.New("want a priority number")
			}
			return nil
		}},
	{long: "keep-pid", group: configGroup, help: "the program keeps the command's pid (a second rtrace process traces it and may still be writing the trace when the program's parent sees it end)",
		set: func(c *Cmd, _ string) error { c.Options.KeepPid = true; return nil }},
	{long: "no-randomize-addr", group: configGroup, help: "run the program without address space randomization",
		set: func(c *Cmd, _ string) error { c.Options.NoRandomize = true; return nil }},
	{long: "srcline", group: configGroup, replay: true, help: "keep each module's source lines (.dbg) for uftrace replay --srcline",
		set: func(c *Cmd, _ string) error { c.Options.Srcline = true; return nil }},
	{long: "list-event", group: configGroup, help: "list the USDT probes of PROG and exit",
		set: setTrue(func(c *Cmd) *bool { return &c.ListEvents })},

	// GLOBAL OPTIONS (uftrace(1)).
	{long: "help", short: 'h', group: globalGroup, help: "print this help and exit", set: setTrue(func(c *Cmd) *bool { return &c.Help })},
	{long: "usage", group: globalGroup, help: "print a short usage and exit", set: setTrue(func(c *Cmd) *bool { return &c.Usage })},
	{long: "version", short: 'V', group: globalGroup, help: "print the version and exit", set: setTrue(func(c *Cmd) *bool { return &c.Version })},
	{long: "verbose", short: 'v', group: globalGroup, help: "list the functions that could not be traced, with the reason",
		set: func(c *Cmd, _ string) error { c.Options.Verbose = true; return nil }},
	{long: "debug", group: globalGroup, help: "as -v", set: func(c *Cmd, _ string) error { c.Options.Verbose = true; return nil }},
	{long: "debug-domain", arg: "DOMAIN", group: globalGroup, help: "debug messages of these domains", kind: inert, why: "rtrace's -v has no domains"},
	{long: "data", short: 'd', arg: "DATA", group: globalGroup, help: "the uftrace.data directory to write (default: uftrace.data)",
		set: func(c *Cmd, v string) error { c.Options.Dir = v; return nil }},
	{long: "logfile", arg: "FILE", group: globalGroup, help: "write rtrace's messages to FILE instead of stderr", set: setString(func(c *Cmd) *string { return &c.LogFile })},
	{long: "color", arg: "VAL", group: globalGroup, replay: true, help: "color the output: yes, no or auto",
		set: oneOf("yes", "y", "true", "1", "on", "no", "n", "false", "0", "off", "auto")},
	{long: "no-pager", group: globalGroup, replay: true, help: "use no pager"},
	{long: "opt-file", arg: "FILE", group: globalGroup, help: "read options (and the program, if the command line names none) from FILE", set: optFile},

	// DISPLAY OPTIONS: uftrace replay's.
	{long: "output-fields", short: 'f', arg: "FIELD", group: displayGroup, replay: true, help: "the fields replay shows"},
	{long: "flat", group: displayGroup, replay: true, help: "flat output"},
	{long: "column-view", group: displayGroup, replay: true, help: "tasks in columns"},
	{long: "column-offset", arg: "DEPTH", group: displayGroup, replay: true, help: "offset of each column"},
	{long: "task-newline", group: displayGroup, replay: true, help: "a newline when the task changes"},
	{long: "no-comment", group: displayGroup, replay: true, help: "no comments after returns"},
	{long: "libname", group: displayGroup, replay: true, help: "library names beside symbols"},
	{long: "format", arg: "TYPE", group: displayGroup, replay: true, help: "normal or html"},
	{long: "no-args", group: displayGroup, replay: true, help: "no arguments and return values"},
	{long: "kernel-full", group: displayGroup, replay: true, help: "kernel functions outside user ones"},
	{long: "kernel-only", group: displayGroup, replay: true, help: "kernel data only"},
	{long: "event-full", group: displayGroup, replay: true, help: "every event outside functions"},
	{long: "tid", arg: "TID", group: displayGroup, replay: true, help: "only these tasks"},
	{long: "demangle", arg: "TYPE", group: displayGroup, replay: true, help: "full, simple or no"},
	{long: "time-range", short: 'r', arg: "TIME~TIME", group: displayGroup, replay: true, help: "only this time range"},
	{long: "no-sched-preempt", group: displayGroup, replay: true, help: "hide pre-emptive schedule events"},

	// Other commands' options, accepted by uftrace record.
	{long: "avg-self", group: otherGroup, kind: inert, why: otherCmd},
	{long: "avg-total", group: otherGroup, kind: inert, why: otherCmd},
	{long: "chrome", group: otherGroup, kind: inert, why: otherCmd},
	{long: "diff", arg: "DATA", group: otherGroup, kind: inert, why: otherCmd},
	{long: "diff-policy", arg: "POLICY", group: otherGroup, kind: inert, why: otherCmd},
	{long: "flame-graph", group: otherGroup, kind: inert, why: otherCmd},
	{long: "graphviz", group: otherGroup, kind: inert, why: otherCmd},
	{long: "no-merge", group: displayGroup, replay: true, help: "leaf calls shown with their braces, not merged into one line"},
	{long: "record", group: otherGroup, kind: inert, why: otherCmd},
	{long: "report", group: otherGroup, kind: inert, why: otherCmd},
	{long: "run-cmd", arg: "CMDLINE", group: otherGroup, kind: inert, why: otherCmd},
	{long: "sample-time", arg: "TIME", group: otherGroup, kind: inert, why: otherCmd},
	{long: "sort-column", arg: "INDEX", group: otherGroup, kind: inert, why: otherCmd},
	{long: "sort", short: 's', arg: "KEY", group: otherGroup, kind: inert, why: otherCmd + " (sp-rtrace's -s is --start, or 'rtrace sp-rtrace -s')"},
	{long: "symbols", group: otherGroup, kind: inert, why: otherCmd},
	{long: "task", group: otherGroup, kind: inert, why: otherCmd},
	{long: "kernel-skip-out", group: otherGroup, kind: inert, why: otherCmd},
	{long: "agent", short: 'g', group: recordGroup, help: "uftrace's agent: tracing is on and 'rtrace -p PID --trace=on|off' (or 'rtrace toggle PID') switches it, each time it turns on a new directory (DATA.1, .2 ...); rtrace takes the toggle signal (SIGUSR1, --toggle-signal) for it: the program does not get it",
		set: func(c *Cmd, _ string) error { c.Options.Agent = true; return nil }},
	{long: "pid", short: 'p', arg: "PID", group: globalGroup, help: "talk to the agent of the recording of PID (rtrace record -g, --disable or -e; rtrace's pid or its program's): with --trace=on|off, switch tracing; alone, check that it answers. Returns at once",
		set: func(c *Cmd, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return errors.New("want a process id")
			}
			c.AgentPid = n
			return nil
		}},
	{long: "trace", arg: "STATE", group: rtraceGroup, help: "with -p PID: turn tracing on or off (uftrace 0.14's agent option)",
		set: func(c *Cmd, v string) error {
			if v != "on" && v != "off" {
				return errors.New("want on or off")
			}
			c.AgentTrace = v
			return nil
		}},

	// RTRACE OPTIONS.
	{long: "quiet", short: 'q', group: rtraceGroup, help: "no messages but errors: no status line, no summary",
		set: func(c *Cmd, _ string) error { c.Options.Quiet = true; return nil }},
	{long: "engine", arg: "ENGINE", group: rtraceGroup, help: "fast (the default: recording code injected into the program, no stop per call) or int3 (a ptrace stop per call and return); $RTRACE_ENGINE sets the default",
		set: func(c *Cmd, v string) error { c.Options.Engine = v; return nil }},
	{long: "no-pin", group: rtraceGroup, help: "with the int3 engine, let the program run on any CPU (default: the tracer and the program share one)",
		set: func(c *Cmd, _ string) error { c.Options.NoPin = true; return nil }},
	{long: "output-dir", short: 'o', arg: "DIR", group: rtraceGroup, help: "also store the raw stream in DIR/<pid>-<n>.rtrace ('rtrace preproc' turns it into a trace later); with --module: the resource traces",
		set: func(c *Cmd, v string) error { c.Options.OutDir = v; return nil }},
	{long: "list-events", group: rtraceGroup, exact: true, help: "as --list-event", set: setTrue(func(c *Cmd) *bool { return &c.ListEvents })},
	{long: "toggle-signal", arg: "SIGNAL", group: rtraceGroup, help: "the signal that toggles tracing with --disable or --module (default SIGUSR1; rtrace intercepts it)",
		set: func(c *Cmd, v string) error {
			sig, err := launcher.ParseSignal(v)
			if err != nil {
				return err
			}
			c.Options.ToggleSignal, c.toggleSignalSet = sig, true
			return nil
		}},

	// RESOURCE TRACING (sp-rtrace's, by long name).
	{long: "module", arg: "MODULES", group: resourceGroup, help: "trace the resource calls of MODULES (memory, file, thread, shm, mmap, gobject, qobject, memtransfer, audit; join with ':')",
		set: func(c *Cmd, v string) error {
			c.Options.Modules = append(c.Options.Modules, launcher.SplitModules(v)...)
			return nil
		}},
	{long: "audit", arg: "FUNCS", group: resourceGroup, help: "record every call of FUNCS (comma-separated, or @FILE: one a line) with its backtrace, as functracer's audit module (implies --module audit)",
		set: func(c *Cmd, v string) error {
			c.Options.Audit = append(c.Options.Audit, v)
			return nil
		}},
	{long: "start", group: resourceGroup, help: "trace resources from the start (default: off until toggled)",
		set: func(c *Cmd, _ string) error { c.Options.Start = true; return nil }},
	{long: "postproc", arg: "OPTS", group: resourceGroup, help: "post-process resource traces with OPTS (\"-l -c -r\") into <pid>-<n>.rtrace.txt",
		set: func(c *Cmd, v string) error { c.Options.PostOpts = v; return nil }},
	{long: "backtrace-depth", arg: "N", group: resourceGroup, help: "N frames per resource call's backtrace (default 10; 0: none)",
		set: func(c *Cmd, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil {
				return errors.New("want a number")
			}
			c.Options.Backtrace = n
			return nil
		}},
	{long: "backtrace-all", group: resourceGroup, help: "backtraces for releases too",
		set: func(c *Cmd, _ string) error { c.Options.BacktraceAll = true; return nil }},
	{long: "monitor", arg: "SIZES", group: resourceGroup, help: "backtraces only for allocations of these sizes (comma-separated)",
		set: func(c *Cmd, v string) error {
			sizes, err := launcher.ParseSizes(v)
			c.Options.Monitor = append(c.Options.Monitor, sizes...)
			return err
		}},
	{long: "manage-preproc", group: resourceGroup, help: "when toggled on, pre-process in rtrace instead of streaming to a listening 'rtrace toggle'",
		set: func(c *Cmd, _ string) error { c.Options.Manage = true; return nil }},
	{long: "list-modules", group: resourceGroup, help: "list the resource modules and their functions, and exit",
		set: setTrue(func(c *Cmd) *bool { return &c.ListModules })},
}
