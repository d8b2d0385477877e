package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"rtrace/internal/uftrace"
	"rtrace/launcher"
	"rtrace/launcher/ucli"
)

// The verbs launcher/ucli reads (uftrace's), and those urfave/cli reads;
// any other first word is a program to run live (uftrace PROG).
var (
	ucliVerbs = []string{"record", "live", "script"}
	cliVerbs  = []string{"attach", "toggle", "preproc", "postproc", "resolve", "calltree", "timeline", "pagemap", "sp-rtrace"}
	// uftraceVerbs read a trace: `rtrace VERB ...` runs the installed
	// uftrace's, with the same arguments (a uftrace user's reflex).
	uftraceVerbs = []string{"replay", "report", "graph", "tui", "dump", "info", "recv"}
)

// helpArgs turns `rtrace [OPTIONS] help [VERB]` into `rtrace VERB --help`
// (or `rtrace --help`); other command lines are returned as they are.
func helpArgs(args []string) ([]string, error) {
	k := ucli.FirstWord(args[min(len(args), 1):])
	if k < 0 || args[k+1] != "help" {
		return args, nil
	}
	rest := args[k+2:]
	switch {
	case len(rest) == 0:
		return []string{args[0], "--help"}, nil
	case len(rest) > 1:
		return nil, fmt.Errorf("help: one verb at most (rtrace help [VERB])")
	case slices.Contains(ucliVerbs, rest[0]) || slices.Contains(cliVerbs, rest[0]) || slices.Contains(uftraceVerbs, rest[0]):
		return []string{args[0], rest[0], "--help"}, nil
	}
	return nil, fmt.Errorf("help: unknown command %q (rtrace help lists them)", rest[0])
}

// uftraceVerb says whether args (os.Args) are a uftrace command line, and
// which verb with which words: `rtrace record ...`, `rtrace live ...`,
// `rtrace PROG ...` (live: verb "", the program's name first in rest),
// with uftrace's global options before the verb too (`rtrace -v record
// ...`, `rtrace -D3 ./prog`).
func uftraceVerb(args []string) (verb string, rest []string, ok bool) {
	if len(args) < 2 {
		return "", nil, false
	}
	k := ucli.FirstWord(args[1:])
	if k < 0 {
		// Options only: rtrace's help and version are urfave's; uftrace's
		// --usage and an --opt-file that names the program are live's.
		for _, a := range args[1:] {
			if a == "--" {
				break
			}
			if n := ucli.LongName(a); n == "usage" || n == "opt-file" {
				return "", args[1:], true
			}
		}
		for _, a := range args[1:] {
			if a == "--" {
				break
			}
			if ucli.LongName(a) == "pid" || strings.HasPrefix(a, "-p") && !strings.HasPrefix(a, "--") {
				return "", args[1:], true // rtrace -p PID [--trace=on|off]: the agent's client
			}
		}
		return "", nil, false
	}
	k++
	switch w := args[k]; {
	case args[k-1] == "--":
		return "", args[1:], true // a program, whatever its name: live
	case slices.Contains(uftraceVerbs, w):
		return w, args[1:], true
	case slices.Contains(ucliVerbs, w):
		return w, append(slices.Clip(args[1:k]), args[k+1:]...), true
	case slices.Contains(cliVerbs, w):
		return "", nil, false
	}
	return "", args[1:], true
}

// runUftrace runs `rtrace record` or `rtrace live` from their uftrace
// command line (rest) and returns the exit status; argv is rtrace's whole
// command line, for the trace's info.
func runUftrace(verb string, rest, argv []string, stdout, stderr io.Writer) int {
	implicit := verb == ""
	if implicit {
		verb = "live"
	}
	if slices.Contains(uftraceVerbs, verb) {
		return runInstalledUftrace(verb, rest, stderr)
	}
	parse := ucli.Parse
	if verb == "script" {
		parse = ucli.ParseScript
	}
	cmd, err := parse(rest)
	if err != nil {
		fmt.Fprintf(stderr, "rtrace %s: %v\n", verb, err)
		return 2
	}
	if verb == "script" && !cmd.Record && !cmd.Help {
		return runInstalledUftrace(verb, argv[1:], stderr) // a trace recorded before
	}
	switch {
	case cmd.Help:
		ucli.Help(stdout, verb)
		return 0
	case cmd.Usage:
		fmt.Fprintln(stdout, ucli.UsageLine(verb))
		return 0
	case cmd.Version:
		fmt.Fprintf(stdout, "rtrace version %s\n", version)
		return 0
	case cmd.ListModules:
		launcher.ListModules(stdout)
		return 0
	}
	if cmd.AgentPid != 0 {
		// uftrace's agent client (cmds/live.c, forward_options).
		if cmd.Program {
			fmt.Fprintf(stderr, "rtrace %s: -p %d talks to a running recording: no program with it\n", verb, cmd.AgentPid)
			return 2
		}
		if err := launcher.Agent(cmd.AgentPid, cmd.AgentTrace, 10*time.Second); err != nil {
			fmt.Fprintf(stderr, "rtrace %s: -p %d: %v\n", verb, cmd.AgentPid, err)
			return 1
		}
		return 0
	}
	if cmd.AgentTrace != "" {
		fmt.Fprintf(stderr, "rtrace %s: --trace=%s needs -p PID, the recording to switch\n", verb, cmd.AgentTrace)
		return 2
	}
	if !cmd.Program {
		fmt.Fprintf(stderr, "rtrace %s: no program given (%s)\n", verb, ucli.UsageLine(verb))
		return 2
	}
	if cmd.ListEvents {
		if err := launcher.ListEvents(cmd.Options.Args[0], stdout); err != nil {
			fmt.Fprintln(stderr, "rtrace:", err)
			return 1
		}
		return 0
	}
	o := cmd.Options
	o.Cmdline, o.Version, o.Stderr = uftrace.Cmdline(argv), version, stderr
	if cmd.LogFile != "" {
		f, err := os.Create(cmd.LogFile)
		if err != nil {
			fmt.Fprintf(stderr, "rtrace %s: --logfile: %v\n", verb, err)
			return 2
		}
		defer f.Close()
		o.Stderr = f
	}
	if o.Verbose {
		for _, l := range cmd.Ignored {
			fmt.Fprintln(o.Stderr, "rtrace:", l)
		}
	}
	if implicit {
		if hint := verbTypo(o.Args[0]); hint != "" {
			fmt.Fprintf(stderr, "rtrace: %s\n", hint)
			return 2
		}
	}
	if verb == "live" {
		return live(o, cmd.Replay, stdout, stderr)
	}
	if verb == "script" {
		return script(o, cmd, stdout, stderr)
	}
	code, err := launcher.Record(o)
	if err != nil {
		fmt.Fprintln(o.Stderr, "rtrace:", err)
	}
	return code
}

// verbTypo catches `rtrace recrod ./prog`: a word run live as a program
// that names none but is close to a verb.
func verbTypo(prog string) string {
	if strings.Contains(prog, "/") {
		return ""
	}
	if _, err := os.Stat(prog); err == nil {
		return ""
	}
	if _, err := exec.LookPath(prog); err == nil {
		return ""
	}
	for _, v := range slices.Concat(ucliVerbs, cliVerbs, uftraceVerbs, []string{"help"}) {
		if ucli.Distance(prog, v) <= 2 {
			return fmt.Sprintf("%s: no such program (did you mean 'rtrace %s'?)", prog, v)
		}
	}
	return ""
}

// live records into a temporary directory (or -d's, kept), then shows the
// trace with uftrace replay and the display options, as uftrace live does.
// The status is the program's when it failed, else replay's.
func live(o launcher.Options, replay []string, stdout, stderr io.Writer) int {
	if o.Nop || o.Host != "" {
		// Nothing is kept here to show: record alone, as uftrace live
		// --nop does (cmds/live.c, can_skip_replay).
		code, err := launcher.Record(o)
		if err != nil {
			fmt.Fprintln(stderr, "rtrace:", err)
		}
		return code
	}
	// Ctrl-C, SIGTERM or SIGHUP from here on ends the program (the
	// session's own handling) or replay, never rtrace before it removes
	// its directory. Caught, not ignored: an ignored signal would stay
	// ignored in replay.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	uft, lookErr := exec.LookPath("uftrace")
	if o.Dir == "" {
		tmp, err := os.MkdirTemp("", "rtrace-live-")
		if err != nil {
			fmt.Fprintln(stderr, "rtrace live:", err)
			return 1
		}
		defer os.RemoveAll(tmp)
		o.Dir = filepath.Join(tmp, "uftrace.data")
	}
	o.NoSummary = true // no line naming a directory about to go
	info := filepath.Join(o.Dir, "info")
	before, _ := os.Stat(info) // -d DIR's trace of an earlier run, moved aside if this one starts
	code, err := launcher.Record(o)
	if err != nil {
		fmt.Fprintln(o.Stderr, "rtrace:", err)
		if errors.Is(err, launcher.ErrAborted) {
			return code // aborted: the trace is unfinished
		}
	}
	after, statErr := os.Stat(info)
	if statErr != nil || before != nil && os.SameFile(before, after) {
		if err == nil {
			fmt.Fprintln(o.Stderr, "rtrace live: nothing was recorded to show")
		}
		return max(code, 1)
	}
	if lookErr != nil {
		fmt.Fprintf(stderr, "rtrace live: uftrace replay shows the trace, and uftrace is not in PATH (rtrace record -d DIR keeps a trace to read later)\n")
		return max(code, 1)
	}
	rp := exec.Command(uft, append([]string{"replay", "-d", o.Dir}, replay...)...)
	rp.Stdin, rp.Stdout, rp.Stderr = os.Stdin, stdout, stderr
	rerr := rp.Start()
	if rerr == nil {
		done := make(chan struct{})
		go func() { // a signal sent to rtrace alone ends replay too
			for {
				select {
				case sig := <-sigs:
					rp.Process.Signal(sig)
				case <-done:
					return
				}
			}
		}()
		rerr = rp.Wait()
		close(done)
	}
	if code != 0 {
		return code
	}
	return childStatus(rerr, "rtrace live: uftrace replay", stderr)
}

// childStatus is rtrace's exit status for a uftrace command it ran that
// ended with err (Wait's): its own, or 128+N when signal N killed it; an
// error that is no exit status is said, under what, and is 1.
func childStatus(err error, what string, stderr io.Writer) int {
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	case err != nil:
		fmt.Fprintln(stderr, what+":", err)
		return 1
	}
	return 0
}

// runInstalledUftrace runs the installed uftrace with args (its verb among
// them) in rtrace's place, so that `rtrace replay ...` is `uftrace replay
// ...`; when uftrace is not installed it says so in one line.
func runInstalledUftrace(verb string, args []string, stderr io.Writer) int {
	uft, err := exec.LookPath("uftrace")
	if err != nil {
		fmt.Fprintf(stderr, "rtrace %s: uftrace %s reads the trace, and uftrace is not installed (Debian: apt-get install uftrace; https://github.com/namhyung/uftrace)\n", verb, verb)
		return 127
	}
	if self, err := os.Executable(); err == nil {
		if a, err1 := filepath.EvalSymlinks(uft); err1 == nil {
			if b, err2 := filepath.EvalSymlinks(self); err2 == nil && a == b {
				fmt.Fprintf(stderr, "rtrace %s: the uftrace in PATH (%s) is rtrace itself: uftrace %s reads the trace; install the real uftrace\n", verb, uft, verb)
				return 127
			}
		}
	}
	err = syscall.Exec(uft, append([]string{"uftrace"}, args...), os.Environ())
	fmt.Fprintf(stderr, "rtrace %s: running %s: %v\n", verb, uft, err)
	return 126
}

// script records the program, then runs the installed uftrace's script
// command on the trace, as `uftrace script -S SCRIPT --record PROG` does
// (cmds/script.c): with the script's uftrace-option lines among record's
// options (ucli.ParseScript), and replay's options for the script's run.
func script(o launcher.Options, cmd *ucli.Cmd, stdout, stderr io.Writer) int {
	if cmd.Script == "" {
		fmt.Fprintln(stderr, "rtrace script: -S SCRIPT names the script to run (rtrace script -S SCRIPT --record PROG)")
		return 2
	}
	uft, err := exec.LookPath("uftrace")
	if err != nil {
		fmt.Fprintln(stderr, "rtrace script: uftrace script runs the script, and uftrace is not installed (Debian: apt-get install uftrace)")
		return 127
	}
	if o.Dir == "" {
		o.Dir = "uftrace.data"
	}
	o.NoSummary = true
	code, err := launcher.Record(o)
	if err != nil {
		fmt.Fprintln(o.Stderr, "rtrace:", err)
		if code == 0 {
			code = 1
		}
		return code
	}
	sc := exec.Command(uft, append([]string{"script", "-d", o.Dir, "-S", cmd.Script}, cmd.Replay...)...)
	sc.Stdin, sc.Stdout, sc.Stderr = os.Stdin, stdout, stderr
	serr := sc.Run()
	if code != 0 {
		return code
	}
	return childStatus(serr, "rtrace script: uftrace script", stderr)
}
