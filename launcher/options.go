package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"rtrace/internal/elfx"
	"rtrace/internal/uftrace"
	"rtrace/internal/withsyms"
	"rtrace/postproc"
	"rtrace/resolver"
	"rtrace/tracer"
	"rtrace/tracer/fast"
)

// Options are the options of a tracing session: `rtrace record` (Args
// set) or `rtrace attach` (Pid set). Both take the same options with the
// same meaning.
type Options struct {
	Args     []string      // record: the program and its arguments
	Pid      int           // attach: the process
	Duration time.Duration // attach: detach after this long (0: at Ctrl-C or the process's end)

	// Function tracing (uftrace's options).
	Dir     string   // -d: the uftrace.data directory ("" with -e: none; with -o: none)
	Filter  []string // -F
	NoTrace []string // -N
	// FilterOrder says, for each -F and -N in the order given, whether it
	// was -N (postproc.FuncOptions.FilterOrder); nil: every -N last.
	FilterOrder []bool
	Hide        []string // -H
	Loc         []string // -L: source files (LOCATION@hide: not these)
	Signals     []string // --signal SIG@ACTION: trace_on, trace_off, finish
	// Host (--host) is where `uftrace recv` listens, on Port (0: 8090):
	// the trace is sent there, named Dir, and not kept.
	Host string
	Port int
	// Nop (--nop): the trace is recorded into a temporary directory and
	// removed: a run that measures tracing and keeps nothing.
	Nop      bool
	Caller   []string // -C
	Trigger  []string // -T FUNC@ACTION[,ACTION...]
	Depth    int      // -D
	MaxStack int      // --max-stack
	Time     string   // -t: a time threshold ("100us"; a bare number is ns)
	ArgSpecs []string // -A: argument specs (func@arg1/i32,arg2/s)
	RetSpecs []string // -R: return-value specs (func@retval/s)
	AutoArgs bool     // -a: specs of every function from DWARF
	WithSyms string   // --with-syms: .sym files to read functions from
	Watch    []string // -W: uftrace's watch points (cpu)
	// KeepPid (--keep-pid): the program keeps the command's pid; a second
	// rtrace process traces it (keeppid.go).
	KeepPid bool
	// checkOnly: check makes no output (the --keep-pid command, whose
	// tracer makes them).
	checkOnly   bool
	NoLibcall   bool // --no-libcall
	NestLibcall bool // --nest-libcall
	// Patch (-P, and -U with Out) selects the functions traced, as
	// uftrace's dynamic patching does, in command-line order (the last
	// pattern that matches a function decides): FUNC the executable's
	// (with no -P for it, all are, as -P .), FUNC@LIB those of the shared
	// library LIB (none by default); FUNC@PROG, PROG the executable's
	// name, is the executable.
	Patch      []PatchRule
	SizeFilter int      // -Z: only functions of this many bytes or more
	Match      string   // --match: "regex" (the default) or "glob"
	Events     []string // -E provider:name globs: USDT probes
	Disable    bool     // --disable: tracing off until toggled
	// Agent (-g): tracing is on, and toggled from outside as with
	// --disable ('rtrace -p PID --trace=off', rtrace toggle), uftrace's agent.
	Agent bool
	// Env is added to rtrace's environment for the program (--no-pltbind:
	// LD_BIND_NOT=1).
	Env []string
	// NoRandomize (--no-randomize-addr) runs the program without address
	// space randomization.
	NoRandomize bool

	Quiet bool // -q
	// NoSummary leaves out the last line's account of a normal end
	// (records, where the trace is), not the other messages: rtrace live
	// shows the trace, from a directory it removes.
	NoSummary bool
	Verbose   bool // -v
	NoPin     bool // --no-pin
	// Srcline (--srcline): write each module's source lines (.dbg), as
	// uftrace record --srcline does.
	Srcline bool
	// Engine is how calls are recorded: "int3" (a ptrace stop per event)
	// or "fast" (code in the process, docs/FAST-PATH.md). "": DefaultEngine,
	// else fast; a default of fast falls back to int3 where fast cannot
	// apply (-e, a TSC that is not a clock).
	Engine        string
	DefaultEngine string // $RTRACE_ENGINE

	// Resource tracing (sp-rtrace's options).
	Modules []string // -e
	// Audit lists the functions the audit module records (--audit: names,
	// or @FILE with one a line); it implies -e audit.
	Audit        []string
	Start        bool   // --start: trace resources from the start
	OutDir       string // -o: raw <pid>-<n>.rtrace files
	PostOpts     string // -P "-l -c": post-process into <pid>-<n>.rtrace.txt
	Backtrace    int    // -b frames per backtrace
	BacktraceAll bool
	Monitor      []uint64
	ToggleSignal unix.Signal
	Manage       bool // --manage-preproc

	// EstimateReturn (-e): uftrace record -e hooks no return and writes
	// each exit when a later entry shows it happened; rtrace's returns are
	// its own hooks' and exact, so -e only marks the trace as uftrace's
	// does (info's ESTIMATE_RETURN feature).
	EstimateReturn bool
	// ShowTime (--time): print the program's running time as uftrace does
	// (elapsed, system and user time), on Stdout.
	ShowTime bool

	Cmdline string // rtrace's own command line, for info
	Version string
	Stdout  io.Writer // nil: os.Stdout
	Stderr  io.Writer
}

// PatchRule is one -P (or -U, Out) pattern.
type PatchRule struct {
	Pattern string
	Out     bool
}

// UsageError is a bad option or argument: the CLI exits 2 with its message.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// ExitError is an error with the exit status it calls for (126: a file
// that cannot be run, 127: one not found, as a shell says).
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// config is what a session runs: the options, checked and compiled.
type config struct {
	Options
	prog string     // record: the program's absolute path
	exe  *elfx.File // the program, or a script's interpreter
	// untraced: a script's interpreter (and what #!/usr/bin/env runs),
	// whose own functions are not traced (tracer.Config.Untraced).
	untraced  []string
	signals   map[unix.Signal]tracer.SignalAction // --signal
	send      *sender                             // --host
	nopDir    string                              // --nop: the temporary directory, removed at the end
	mods      []*tracer.ResModule
	funcs     postproc.FuncOptions // what the function trace keeps
	sel       tracer.Selection
	specs     func(exe *elfx.File, name string, value uint64) (args, rets []uftrace.ArgSpec)
	specLine  []uftrace.ArgSpecLine
	readTrigs []readTrigger                    // -T FUNC@read=
	watchCPU  bool                             // -W cpu
	post      func(io.Reader, io.Writer) error // -P OPTS for resource windows
	funcDir   string                           // the uftrace.data directory, absolute ("": none)
	rawDir    string                           // where the raw function stream goes ("": none)
}

// check validates o before anything starts and compiles it: every
// pattern, spec, time and output directory, the program or the process.
// A usage error is a *UsageError, a program that cannot run an *ExitError.
func check(ctx context.Context, o Options) (*config, error) {
	c := &config{Options: o}
	if c.Stdout == nil {
		c.Stdout = os.Stdout
	}
	if c.Stderr == nil {
		c.Stderr = os.Stderr
	}
	attach := o.Pid != 0
	if !attach && len(o.Args) == 0 {
		return nil, &UsageError{"record: no program given (usage: rtrace record [OPTIONS] [--] PROG [ARGS...])"}
	}
	if attach && o.KeepPid {
		return nil, &UsageError{"--keep-pid: an attached process keeps its pid anyway"}
	}
	var err error
	mods := o.Modules
	if len(o.Audit) > 0 && !slices.Contains(mods, "audit") {
		mods = append(slices.Clip(mods), "audit")
	}
	if c.mods, err = tracer.ResolveModules(mods); err != nil {
		return nil, &UsageError{"-e (--module): " + err.Error()}
	}
	for i, m := range c.mods {
		if m.Name != "audit" {
			continue
		}
		funcs, err := auditList(o.Audit)
		if err != nil {
			return nil, &UsageError{"--audit: " + err.Error()}
		}
		if len(funcs) == 0 {
			return nil, &UsageError{"the audit module records the functions --audit names: give them (--audit FUNC,FUNC or --audit @FILE)"}
		}
		c.mods[i] = tracer.AuditModule(funcs)
	}
	if len(c.mods) == 0 && (o.Start || o.PostOpts != "" || o.Manage || len(o.Monitor) > 0 || o.BacktraceAll) {
		return nil, &UsageError{"--start, -P OPTS, --monitor, --backtrace-all and --manage-preproc are options of resource tracing: choose modules with -e MODULES (rtrace sp-rtrace) or --module MODULES (rtrace record); --list-modules lists them"}
	}
	if o.PostOpts != "" {
		if c.post, err = postFunc(o.PostOpts); err != nil {
			return nil, &UsageError{fmt.Sprintf("-P (--postproc) %q: %v", o.PostOpts, err)}
		}
	}
	if o.WithSyms != "" {
		if fi, err := os.Stat(o.WithSyms); err != nil || !fi.IsDir() {
			return nil, &UsageError{fmt.Sprintf("--with-syms %s: not a directory", o.WithSyms)}
		}
		if abs, err := filepath.Abs(o.WithSyms); err == nil {
			o.WithSyms, c.WithSyms = abs, abs // the resolver may run elsewhere
		}
	}
	if o.Backtrace < 0 || o.Backtrace > 256 {
		return nil, &UsageError{fmt.Sprintf("-b (--backtrace-depth) %d: want a depth from 0 to 256", o.Backtrace)}
	}
	var trig trigRecord
	if c.funcs, trig, err = funcOptions(o); err != nil {
		return nil, err
	}
	c.readTrigs = trig.reads
	if c.sel, err = selection(o); err != nil {
		return nil, err
	}
	// uftrace's --disable waits for a trace_on trigger: the program runs
	// traced, and the function stage keeps nothing until one fires (rtrace's
	// own --disable, with no such trigger, waits for rtrace toggle).
	if o.Disable && slices.ContainsFunc(c.funcs.Triggers, func(tr uftrace.Trigger) bool { return tr.TraceOn }) {
		c.funcs.Disabled, c.Disable = true, false
	}
	if len(o.Loc) > 0 {
		c.funcs.Srcline = true // as uftrace's -L implies --srcline
	}
	if c.signals, err = signalTriggers(o.Signals); err != nil {
		return nil, err
	}
	// Outputs. Resource tracing alone records no function calls, unless
	// -d asks for a uftrace.data directory too; without -e, -o stores the
	// function trace's raw stream.
	switch {
	case o.Dir != "":
		c.funcDir = o.Dir
	case len(c.mods) == 0 && o.OutDir == "":
		c.funcDir = "uftrace.data"
	}
	if len(c.mods) == 0 && o.OutDir != "" {
		c.rawDir = o.OutDir
	}
	if o.Nop {
		if c.funcDir == "" || c.rawDir != "" || o.Host != "" {
			return nil, &UsageError{"--nop: keeps no function trace, so it takes no -e, -o or --host"}
		}
	}
	if o.Host != "" {
		if c.funcDir == "" || c.rawDir != "" || o.Pid != 0 {
			return nil, &UsageError{"--host: only a function trace recorded into a directory is sent (no -e, no -o, no attach)"}
		}
		if o.Port == 0 {
			o.Port = uftrace.RecvPort
		}
		if o.Port <= 0 || o.Port > 65535 {
			return nil, &UsageError{fmt.Sprintf("--port %d: want a TCP port, 1 to 65535", o.Port)}
		}
	}
	if c.funcDir != "" && !o.Nop && o.Host == "" {
		if c.funcDir, err = filepath.Abs(c.funcDir); err != nil {
			return nil, &UsageError{fmt.Sprintf("-d %s: %v", o.Dir, err)}
		}
		if err := checkTraceDir(c.funcDir); err != nil {
			return nil, &UsageError{"-d: " + err.Error()}
		}
	}
	if o.OutDir != "" && !(o.OutDir == StdoutDir && len(c.mods) > 0) {
		if err := checkOutDir(o.OutDir); err != nil {
			return nil, &UsageError{"-o: " + err.Error()}
		}
	}
	specOpts := c.Options
	specOpts.ArgSpecs = append(slices.Clip(o.ArgSpecs), trig.args...)
	specOpts.RetSpecs = append(slices.Clip(o.RetSpecs), trig.rets...)
	if len(c.mods) > 0 && c.funcDir != "" {
		a, r := resSpecs(c.mods, o.Match)
		specOpts.ArgSpecs = append(slices.Clip(specOpts.ArgSpecs), a...)
		specOpts.RetSpecs = append(slices.Clip(specOpts.RetSpecs), r...)
	}
	if c.specLine, c.specs, err = argSpecs(specOpts); err != nil {
		return nil, err
	}
	for _, w := range o.Watch {
		if w != "cpu" {
			return nil, &UsageError{fmt.Sprintf("-W %s: the watch point is cpu (as in uftrace 0.13)", w)}
		}
		c.watchCPU = true
	}
	var notFast []string
	for _, u := range []struct {
		set  bool
		name string
	}{{c.watchCPU && !fast.HasRDTSCP(), "-W cpu on a CPU without rdtscp"},
		// The stubs read a resource call's time with rdtscp (stub.S, NOWTSC).
		{len(c.mods) > 0 && !fast.HasRDTSCP(), "resource tracing on a CPU without rdtscp"}} {
		if u.set {
			notFast = append(notFast, u.name)
		}
	}
	if c.Engine, err = chooseEngine(o, notFast); err != nil {
		return nil, err
	}
	if attach {
		if err := checkAttach(o.Pid); err != nil {
			return nil, err
		}
		return c, c.openOutputs(ctx, o)
	}
	if c.prog, err = lookPath(o.Args[0]); err != nil {
		if o.EstimateReturn && !strings.Contains(o.Args[0], "/") {
			// sp-rtrace's habit: -e MODULES names resource modules there.
			err = fmt.Errorf("%w (-e is uftrace's --estimate-return here; sp-rtrace's -e %s is 'rtrace sp-rtrace -e %s' or --module %s)", err, o.Args[0], o.Args[0], o.Args[0])
		}
		return nil, &ExitError{127, err}
	}
	if err := checkRunnable(o.Args[0], c.prog); err != nil {
		return nil, err
	}
	exe := c.prog
	if c.untraced, err = interpreters(o.Args[0], c.prog); err != nil {
		return nil, err
	}
	if len(c.untraced) > 0 {
		exe = c.untraced[len(c.untraced)-1]
	}
	if c.exe, err = elfx.Open(exe); err != nil {
		return nil, &ExitError{126, fmt.Errorf("%s: cannot trace it: %w", o.Args[0], err)}
	}
	if c.exe, err = withsyms.Apply(o.WithSyms, c.exe); err != nil {
		return nil, &UsageError{"--with-syms: " + err.Error()}
	}
	elfx.Prefetch(c.exe)
	if o.checkOnly {
		return c, nil
	}
	return c, c.openOutputs(ctx, o)
}

// openOutputs makes what --nop and --host record into (a temporary
// directory; the connection to uftrace recv, and its directory), last of
// all checks so that a bad option leaves nothing behind.
func (c *config) openOutputs(ctx context.Context, o Options) error {
	var err error
	switch {
	case o.Nop:
		if c.nopDir, err = os.MkdirTemp("", "rtrace-nop-"); err != nil {
			return err
		}
		c.funcDir = filepath.Join(c.nopDir, "uftrace.data")
	case o.Host != "":
		if c.send, err = newSender(ctx, o.Host, o.Port, o.Dir); err != nil {
			return err
		}
		c.funcDir = c.send.dir()
	}
	return nil
}

// close removes what openOutputs made.
func (c *config) close() {
	if c.send != nil {
		c.send.close()
	}
	if c.nopDir != "" {
		os.RemoveAll(c.nopDir)
	}
}

// trigRecord is what -T triggers ask of the recording: argument and
// return value specs (FUNC@arg1/s as -A takes it), and the counters read
// at functions' calls and returns (read=).
type trigRecord struct {
	args, rets []string
	reads      []readTrigger
}

// readTrigger is a read= action: what it reads at the calls of fn.
type readTrigger struct {
	fn   uftrace.Pattern
	kind uftrace.ReadKind
}

// reads says what the read= triggers read at the calls of a function
// (nil without any).
func (c *config) reads() func(name string) uftrace.ReadKind {
	if len(c.readTrigs) == 0 {
		return nil
	}
	return func(name string) uftrace.ReadKind {
		var k uftrace.ReadKind
		for _, r := range c.readTrigs {
			if r.fn.MatchSymbol(name) {
				k |= r.kind
			}
		}
		return k
	}
}

// funcOptions compiles the uftrace filters into what the post-processor's
// function stage keeps, and what -T triggers ask of the recording.
func funcOptions(o Options) (f postproc.FuncOptions, rec trigRecord, err error) {
	var triggers []string
	for _, t := range o.Trigger { // uftrace joins its -T values with ';' and splits them again
		triggers = append(triggers, strings.FieldsFunc(t, func(r rune) bool { return r == ';' })...)
	}
	isPat := map[string][]bool{} // of each -F and -N value, whether it is a pattern (not a trigger)
	for _, g := range []struct {
		flag, action string
		vals         []string
		to           *[]uftrace.Pattern
	}{{"-F", "filter", o.Filter, &f.Filters}, {"-N", "notrace", o.NoTrace, &f.NoTrace}, {"-H", "hide", o.Hide, &f.Hide}, {"-C", "caller", o.Caller, &f.Callers}} {
		pats, trigs, kept, err := filterTriggers(g.flag, g.action, g.vals, o.Match)
		if err != nil {
			return f, rec, err
		}
		if *g.to, err = compile(g.flag, o.Match, pats); err != nil {
			return f, rec, err
		}
		triggers = append(slices.Clip(triggers), trigs...)
		isPat[g.flag] = kept
	}
	if len(o.FilterOrder) == len(o.Filter)+len(o.NoTrace) {
		// The order of the -F and -N that are patterns.
		i, j := 0, 0
		for _, out := range o.FilterOrder {
			pat := false
			if out {
				pat, j = isPat["-N"][j], j+1
			} else {
				pat, i = isPat["-F"][i], i+1
			}
			if pat {
				f.FilterOrder = append(f.FilterOrder, out)
			}
		}
	}
	for _, s := range triggers {
		tr, err := trigger(s, o.Match, &rec)
		if err != nil {
			return f, rec, err
		}
		if tr != nil {
			f.Triggers = append(f.Triggers, *tr)
		}
	}
	f, err = funcLimits(o, f)
	return f, rec, err
}

// filterTriggers splits the values of a filter flag (-F, -N, -H, -C) that
// carry actions after '@', as uftrace's may (utils/filter.c,
// setup_trigger_action: -F foo@depth=2 is a filter with a depth): those
// become -T triggers with the flag's own action added, argument actions
// left out as uftrace ignores them there. FUNC and FUNC@MODULE stay
// patterns; isPat says of each value whether it did.
func filterTriggers(flag, action string, vals []string, kind string) (pats, trigs []string, isPat []bool, err error) {
	for _, v := range vals {
		fn, rest, ok := strings.Cut(v, "@")
		if !ok {
			pats, isPat = append(pats, v), append(isPat, true)
			continue
		}
		var keep, modules []string
		for _, act := range strings.Split(rest, ",") {
			one, err := uftrace.ParseTrigger(fn+"@"+act, kind)
			if err != nil {
				return nil, nil, nil, &UsageError{fmt.Sprintf("%s %s: %v", flag, v, err)}
			}
			switch {
			case len(one.Args)+len(one.Rets) > 0:
			case one.Module != "":
				modules = append(modules, act)
			default:
				keep = append(keep, act)
			}
		}
		isPat = append(isPat, len(keep) == 0)
		switch {
		case len(keep) > 0:
			trigs = append(trigs, fn+"@"+strings.Join(append(append(keep, modules...), action), ","))
		case len(modules) == 1:
			pats = append(pats, fn+"@"+modules[0])
		case len(modules) > 1:
			return nil, nil, nil, &UsageError{fmt.Sprintf("%s %s: one module at most", flag, v)}
		default:
			pats = append(pats, fn) // only arguments, ignored
		}
	}
	return pats, trigs, isPat, nil
}

// trigger reads the -T argument s, patterns of kind. Its actions go where
// rtrace applies them: those on what is kept to the function stage (tr,
// nil when there is none), those on how calls are recorded to rec
// (arguments and return values: FUNC@arg1/s; read=). backtrace and
// color= show in uftrace replay only: recorded, they change nothing, as
// in uftrace record. The others are refused with the reason.
func trigger(s, kind string, rec *trigRecord) (tr *uftrace.Trigger, err error) {
	if _, err := uftrace.ParseTrigger(s, kind); err != nil {
		return nil, &UsageError{"-T: " + err.Error()}
	}
	var args, rets []string
	var reads uftrace.ReadKind
	fn, acts, _ := strings.Cut(s, "@")
	var kept []string
	module := ""
	for _, act := range strings.Split(acts, ",") {
		one, _ := uftrace.ParseTrigger(fn+"@"+act, kind) // all parsed: each does
		switch {
		case strings.EqualFold(one.Module, "kernel"):
			return nil, &UsageError{fmt.Sprintf("-T %s: rtrace traces no kernel functions", s)}
		case one.Module != "":
			module = act // FUNC@MODULE: the module's functions only
		case one.Read != "":
			k, err := uftrace.ParseReadKind(one.Read)
			if err != nil {
				return nil, &UsageError{fmt.Sprintf("-T %s: %v", s, err)}
			}
			reads |= k
		case one.Recover:
			// Nothing to do, as in uftrace on x86-64: only the innermost
			// call's return address is rtrace's while it runs (auto-recover).
		case one.Backtrace, one.Color != "":
		case one.AutoArgs:
			// As uftrace (utils/auto-args.c, extract_trigger_args): -A FUNC
			// and -R FUNC, DWARF's or the table's specs.
			args, rets = append(args, fn), append(rets, fn)
		case len(one.Args) > 0:
			args = append(args, fn+"@"+act)
		case len(one.Rets) > 0:
			rets = append(rets, fn+"@"+act)
		default:
			kept = append(kept, act)
		}
	}
	if module != "" && (reads != 0 || slices.ContainsFunc(append(slices.Clip(args), rets...), func(a string) bool { return !strings.Contains(a, "@") })) {
		return nil, &UsageError{fmt.Sprintf("-T %s: read= and auto-args of one module's functions are not supported yet (without @MODULE they apply in every module)", s)}
	}
	if module != "" { // FUNC@MODULE,argN: the spec names its module, as -A's may
		for _, l := range []*[]string{&args, &rets} {
			for i := range *l {
				(*l)[i] += "," + module
			}
		}
	}
	rec.args, rec.rets = append(rec.args, args...), append(rec.rets, rets...)
	if reads != 0 {
		p, err := uftrace.ParsePattern(fn, kind)
		if err != nil {
			return nil, &UsageError{fmt.Sprintf("-T %s: %v", s, err)}
		}
		rec.reads = append(rec.reads, readTrigger{p, reads})
	}
	if len(kept) == 0 {
		return nil, nil
	}
	if module != "" {
		kept = append(kept, module)
	}
	t, err := uftrace.ParseTrigger(fn+"@"+strings.Join(kept, ","), kind)
	if err != nil {
		return nil, &UsageError{"-T: " + err.Error()}
	}
	return &t, nil
}

// funcLimits checks and sets the depth and time limits of o in f.
func funcLimits(o Options, f postproc.FuncOptions) (postproc.FuncOptions, error) {
	var err error
	if o.MaxStack < 0 {
		return f, &UsageError{fmt.Sprintf("--max-stack %d: the depth must be positive", o.MaxStack)}
	}
	if o.Depth < 0 {
		return f, &UsageError{fmt.Sprintf("-D %d: the depth must be positive", o.Depth)}
	}
	f.Depth, f.MaxStack, f.Srcline, f.WithSyms = o.Depth, o.MaxStack, o.Srcline, o.WithSyms
	if o.Time != "" {
		if f.Threshold, err = uftrace.ParseTime(o.Time); err != nil {
			return f, &UsageError{"-t: " + err.Error()}
		}
	}
	return f, nil
}

// compile compiles patterns (uftrace's rule, uftrace.Pattern) of the
// kind --match names.
func compile(flag, kind string, pats []string) ([]uftrace.Pattern, error) {
	ps, err := uftrace.ParsePatterns(flag, kind, pats)
	if err != nil {
		return nil, &UsageError{err.Error()}
	}
	return ps, nil
}

// selection compiles -P, -U and -Z into the rules that choose what is
// traced. A pattern is FUNC (the
// executable's functions) or FUNC@LIB (those of the library LIB: a file
// name, and libfoo.so also names libfoo.so.1; LIB the executable's own
// name is the executable), FUNC as -F patterns are.
func selection(o Options) (tracer.Selection, error) {
	sel := tracer.Selection{MinSize: uint64(max(o.SizeFilter, 0))}
	if o.SizeFilter < 0 {
		return sel, &UsageError{fmt.Sprintf("-Z %d: the size must be positive", o.SizeFilter)}
	}
	exe := ""
	if len(o.Args) > 0 {
		exe = filepath.Base(o.Args[0])
	}
	for _, p := range o.Patch {
		flag := "-P"
		if p.Out {
			flag = "-U"
		}
		fn, lib := p.Pattern, ""
		if i := strings.LastIndex(p.Pattern, "@"); i >= 0 {
			fn, lib = p.Pattern[:i], p.Pattern[i+1:]
			if lib == "" || strings.Contains(lib, "/") || strings.Contains(fn, "@") {
				return sel, &UsageError{fmt.Sprintf("%s %q: name the library by its file name, FUNC@LIB (e.g. %s 'plug_.*@libplug.so')", flag, p.Pattern, flag)}
			}
			if lib == exe {
				lib = ""
			}
		}
		ps, err := compile(flag, o.Match, []string{fn})
		if err != nil {
			return sel, err
		}
		sel.Rules = append(sel.Rules, tracer.Rule{Func: ps[0], Lib: lib, Out: p.Out})
	}
	for _, l := range o.Loc {
		file, act, hide := strings.Cut(l, "@")
		if hide && act != "hide" {
			return sel, &UsageError{fmt.Sprintf("-L %q: want LOCATION, LOCATION@hide or !LOCATION", l)}
		}
		if f, ok := strings.CutPrefix(file, "!"); ok {
			file, hide = f, true
		}
		p, err := uftrace.ParseLocPattern(file, o.Match)
		if err != nil {
			return sel, &UsageError{fmt.Sprintf("-L %q: %v", l, err)}
		}
		sel.Locs = append(sel.Locs, tracer.LocRule{File: p, Hide: hide})
	}
	return sel, nil
}

// checkTraceDir refuses a uftrace.data directory that cannot be written:
// an existing file, a directory that is no trace and not empty (a trace
// is moved aside to DIR.old when tracing starts, as uftrace does), or a
// parent that is missing or not writable.
func checkTraceDir(dir string) error {
	st, err := os.Stat(dir)
	switch {
	case err == nil && !st.IsDir():
		return fmt.Errorf("%s exists and is not a directory", dir)
	case err == nil:
		if _, err := os.Stat(filepath.Join(dir, "info")); err != nil {
			if ents, _ := os.ReadDir(dir); len(ents) > 0 {
				return fmt.Errorf("%s exists and is not a trace; remove it or choose another directory", dir)
			}
		}
		return writable(filepath.Dir(dir))
	case errors.Is(err, os.ErrNotExist):
		return writable(filepath.Dir(dir))
	}
	return err
}

// checkOutDir refuses a raw-file directory that cannot be made or written.
func checkOutDir(dir string) error {
	st, err := os.Stat(dir)
	switch {
	case err == nil && !st.IsDir():
		return fmt.Errorf("%s exists and is not a directory", dir)
	case err == nil:
		return writable(dir)
	case errors.Is(err, os.ErrNotExist):
		// MkdirAll makes the parents too: the nearest existing one must
		// be writable.
		parent := filepath.Dir(filepath.Clean(dir))
		for {
			if _, err := os.Stat(parent); err == nil || parent == filepath.Dir(parent) {
				return writable(parent)
			}
			parent = filepath.Dir(parent)
		}
	}
	return err
}

// writable says why rtrace cannot create files in dir, nil if it can.
func writable(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("directory %s: %w", dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return fmt.Errorf("cannot write into %s: %w", dir, err)
	}
	return nil
}

// moveAside renames an existing uftrace.data directory to DIR.old, as
// uftrace record does, so a new trace never mixes with an old one. The
// DIR.old it replaces is removed in the background (a large trace takes
// milliseconds to delete, and the program waits to start): done is closed
// when it is gone.
func moveAside(dir string) (done <-chan struct{}, err error) {
	ch := make(chan struct{})
	if _, err := os.Stat(filepath.Join(dir, "info")); err != nil {
		close(ch)
		if os.Remove(dir) == nil || errors.Is(err, os.ErrNotExist) {
			return ch, nil // absent, or an empty directory now gone
		}
		return ch, err
	}
	old := strings.TrimRight(dir, "/") + ".old"
	gone := fmt.Sprintf("%s.rtrace-removing-%d", old, os.Getpid())
	if os.Rename(old, gone) == nil {
		go func() {
			defer close(ch)
			os.RemoveAll(gone)
		}()
	} else {
		os.RemoveAll(old) // no older trace, or it cannot move: removed now
		close(ch)
	}
	return ch, os.Rename(dir, old)
}

// chooseEngine returns the engine of o: the one --engine names, refused
// where it cannot apply; else $RTRACE_ENGINE's or fast, with int3 where
// fast cannot apply (notFast: the options it does not support).
func chooseEngine(o Options, notFast []string) (string, error) {
	engine, from := o.Engine, "--engine"
	if engine == "" {
		engine, from = o.DefaultEngine, "$RTRACE_ENGINE"
	}
	switch engine {
	case "int3":
		return engine, nil
	case "fast", "":
		if len(notFast) > 0 {
			if o.Engine == "" {
				return "int3", nil
			}
			return "", &UsageError{fmt.Sprintf("--engine=fast does not support %s yet: use --engine=int3", strings.Join(notFast, ", "))}
		}
		if err := fast.CheckTSC(); err != nil {
			if o.Engine == "" {
				return "int3", nil
			}
			return "", &UsageError{fmt.Sprintf("--engine=fast: %v: use --engine=int3", err)}
		}
		return "fast", nil
	}
	return "", &UsageError{fmt.Sprintf("%s %q: want fast or int3", from, engine)}
}

// lookPath finds the program as uftrace does: a name with a slash as
// is, a bare name in the current directory (a regular file there with an
// execute bit), then in PATH.
func lookPath(prog string) (string, error) {
	p := prog
	if !strings.Contains(prog, "/") {
		if st, err := os.Stat(prog); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			p = "./" + prog
		} else if p, err = exec.LookPath(prog); err != nil {
			return "", fmt.Errorf("%s: not found in the current directory nor in PATH", prog)
		}
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(abs); err != nil {
		return "", fmt.Errorf("%s: %w", prog, errors.Unwrap(err))
	}
	return abs, nil
}

// checkRunnable refuses, with one line and exit 126 as a shell would, a
// program rtrace cannot start: a directory, a file without execute
// permission, an empty file.
func checkRunnable(name, path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return &ExitError{127, fmt.Errorf("%s: %w", name, err)}
	}
	refuse := func(why string) error { return &ExitError{126, fmt.Errorf("%s: %s", name, why)} }
	switch {
	case st.IsDir():
		return refuse("is a directory")
	case st.Mode()&0o111 == 0 || unix.Access(path, unix.X_OK) != nil:
		return refuse("permission denied (not executable)")
	case st.Size() == 0:
		return refuse("empty file: nothing to run")
	}
	return nil
}

// interpreters returns, for a script at path (named name on the command
// line), its interpreter as its #! line names it and, for #!/usr/bin/env
// PROG, the PROG env runs, found in PATH: the executables the kernel and
// env run before the script's own commands. Their functions are not
// traced; what the script runs is. nil for a program that is no script.
func interpreters(name, path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &ExitError{126, fmt.Errorf("%s: %w", name, err)}
	}
	defer f.Close()
	// The kernel reads at most BINPRM_BUF_SIZE (256) bytes of the #! line
	// (include/uapi/linux/binfmts.h).
	head := make([]byte, 256)
	n, _ := io.ReadFull(f, head)
	line, ok := strings.CutPrefix(string(head[:n]), "#!")
	if !ok {
		return nil, nil
	}
	line, _, _ = strings.Cut(line, "\n")
	words := strings.Fields(line)
	if len(words) == 0 {
		return nil, &ExitError{126, fmt.Errorf("%s: a script whose #! line names no interpreter", name)}
	}
	interp := []string{words[0]}
	if filepath.Base(words[0]) == "env" && len(words) > 1 && !strings.HasPrefix(words[1], "-") {
		if p, err := exec.LookPath(words[1]); err == nil {
			interp = append(interp, p)
		}
	}
	for _, p := range interp {
		if _, err := os.Stat(p); err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, &ExitError{126, fmt.Errorf("%s: its interpreter %s: %w (#!%s)", name, p, err, strings.TrimSpace(line))}
		}
	}
	return interp, nil
}

// argSpecs checks -A and -R and returns info's argspec lines and the lookup
// the tracer uses to find each function's specs, nil without any. With -a
// (auto-args), each executable's DWARF adds the specs the resolver writes
// as its .dbg A:/R: lines, merged as uftrace's reader merges them.
func argSpecs(o Options) ([]uftrace.ArgSpecLine, func(exe *elfx.File, name string, value uint64) (args, rets []uftrace.ArgSpec), error) {
	var lines []uftrace.ArgSpecLine
	for _, g := range []struct {
		flag, key string
		specs     []string
	}{{"-A", "argspec", o.ArgSpecs}, {"-R", "retspec", o.RetSpecs}} {
		if len(g.specs) == 0 {
			continue
		}
		for _, s := range g.specs {
			pat := s
			var err error
			if strings.Contains(s, "@") {
				var fs uftrace.FuncSpec
				fs, err = uftrace.ParseFuncSpec(s)
				pat = fs.Pattern
				if err == nil && pat == "" {
					err = fmt.Errorf("no function before '@'")
				}
			}
			if err == nil {
				// Without '@': the arguments (-A) or return value (-R)
				// DWARF gives the functions it matches, as uftrace's -A FUNC.
				_, err = uftrace.ParsePattern(pat, o.Match)
			}
			if err != nil {
				return nil, nil, &UsageError{fmt.Sprintf("%s %q: %v", g.flag, s, err)}
			}
		}
		lines = append(lines, uftrace.ArgSpecLine{Key: g.key, Value: strings.Join(g.specs, ";")})
	}
	if len(lines) == 0 && !o.AutoArgs {
		return nil, nil, nil
	}
	// As uftrace record: the built-in table of library functions, then
	// auto-args.
	libc := uftrace.Libc()
	lines = append(lines, libc.Lines()...)
	if o.AutoArgs {
		lines = append(lines, uftrace.ArgSpecLine{Key: "auto-args", Value: "1"})
	}
	table, err := uftrace.NewSpecs(lines, o.Match) // as uftrace's reader will, by info's pattern type
	if err != nil {
		return nil, nil, &UsageError{err.Error()}
	}
	// DWARF's A: and R: specs, by module, by link-time address: as uftrace's
	// reader finds them (utils/dwarf.c, get_dwarf_argspec: by address), so
	// two static functions of one name each get their own.
	auto := map[string]map[uint64][2][]uftrace.ArgSpec{}
	dwarfSpecs := func(exe *elfx.File) map[uint64][2][]uftrace.ArgSpec {
		specs, ok := auto[exe.Path]
		if ok {
			return specs
		}
		specs = map[uint64][2][]uftrace.ArgSpec{}
		dbg, _ := resolver.DebugFuncs(exe.Path, exe, true) // no DWARF: no auto specs
		base := exe.MinVaddr()
		for _, d := range dbg {
			var both [2][]uftrace.ArgSpec
			for i, s := range []string{d.ArgSpec, d.RetSpec} {
				if fs, err := uftrace.ParseFuncSpec(s); err == nil && s != "" {
					both[i] = fs.Args
				}
			}
			specs[d.Addr+base] = both
		}
		auto[exe.Path] = specs
		return specs
	}
	return lines, func(exe *elfx.File, name string, value uint64) (args, rets []uftrace.ArgSpec) {
		// -A FUNC, -R FUNC without '@' and -a: the specs DWARF gives
		// the function, else the table's, merged as the reader will.
		autoSpecs := func(i int, builtin func(string) []uftrace.ArgSpec) func() []uftrace.ArgSpec {
			return func() []uftrace.ArgSpec {
				if value != 0 {
					if specs := dwarfSpecs(exe)[value][i]; len(specs) > 0 {
						return specs
					}
				}
				return builtin(name)
			}
		}
		// FUNC@PLT names library calls: a stub's value is 0 (Config.Specs).
		w := uftrace.Where{Module: exe.Path, PLT: value == 0}
		return table.Resolve(name, w, autoSpecs(0, libc.Args), autoSpecs(1, libc.Rets))
	}, nil
}

// env is the program's environment: rtrace's with Env added (nil: rtrace's
// as it is).
func (c *config) env() []string {
	if len(c.Env) == 0 {
		return nil
	}
	return append(os.Environ(), c.Env...)
}

// auditList reads --audit's items as functracer's audit module reads
// them: function names, and @FILE for a file of them, one a line.
func auditList(items []string) ([]string, error) {
	var out []string
	for _, it := range items {
		for _, f := range strings.Split(it, ",") {
			f = strings.TrimSpace(f)
			switch {
			case f == "":
			case strings.HasPrefix(f, "@"):
				b, err := os.ReadFile(f[1:])
				if err != nil {
					return nil, err
				}
				for _, l := range strings.Split(string(b), "\n") {
					if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
						out = append(out, l)
					}
				}
			default:
				out = append(out, f)
			}
		}
	}
	return out, nil
}

// SplitModules splits a list of resource modules as sp-rtrace writes it
// (memory:file), empty names left out.
func SplitModules(list string) []string {
	var out []string
	for _, n := range strings.Split(list, ":") {
		if n != "" {
			out = append(out, n)
		}
	}
	return out
}

// ParseSizes reads a comma-separated list of sizes (--monitor).
func ParseSizes(s string) ([]uint64, error) {
	var out []uint64
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(f), 0, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a size", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// StdoutDir as -o's directory of a resource trace is sp-rtrace's "write to
// standard output" (sp-rtrace -o stdout): the text (or raw stream) goes to
// Options.Stdout, the processes of a traced tree one after the other.
const StdoutDir = "stdout"
