package e2e_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"rtrace/internal/testutil"
)

// Every verb reads its options as record does (getopt_long): a typo is one
// line naming the verb and the closest option, exit 2, nothing on stdout.
func TestVerbTypos(t *testing.T) {
	tmp := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"record", "--nest-libcalls", "true"}, "rtrace record: unknown option --nest-libcalls (did you mean --nest-libcall?)"},
		{[]string{"live", "--no-libcalls", "true"}, "rtrace live: unknown option --no-libcalls (did you mean --no-libcall?)"},
		{[]string{"--no-libcalls", "true"}, "rtrace live: unknown option --no-libcalls (did you mean --no-libcall?)"},
		{[]string{"attach", "--duraton", "1s", "1"}, "rtrace attach: unknown option --duraton (did you mean --duration?)"},
		{[]string{"toggle", "--timeot", "1s", "1"}, "rtrace toggle: unknown option --timeot (did you mean --timeout?)"},
		{[]string{"preproc", "--inptu", "x"}, "rtrace preproc: unknown option --inptu (did you mean --input?)"},
		{[]string{"postproc", "--leaks", "-i", "x"}, "rtrace postproc: unknown option --leaks (did you mean --filter-leaks?)"},
		{[]string{"resolve", "--full-paths", "-i", "x"}, "rtrace resolve: unknown option --full-paths (did you mean --full-path?)"},
		{[]string{"calltree", "--limt", "5", "x"}, "rtrace calltree: unknown option --limt (did you mean --limit?)"},
		{[]string{"timeline", "--totls", "x"}, "rtrace timeline: unknown option --totls (did you mean --totals?)"},
		{[]string{"pagemap", "--pgaes", "x"}, "rtrace pagemap: unknown option --pgaes (did you mean --pages?)"},
		{[]string{"sp-rtrace", "--preloda", "memory", "-x", "true"}, "rtrace sp-rtrace: unknown option --preloda (did you mean --preload?)"},
	} {
		r := runCmd(t, tmp, rtraceBin, c.args...)
		if r.code != 2 || r.stdout != "" || r.stderr != c.want+"\n" {
			t.Errorf("rtrace %q: %+v\nwant exit 2 and the one line %q", c.args, r, c.want)
		}
	}
}

// Values attach to letters as in getopt (-D2, -P-t, -lc): every verb
// takes them as the separate words.
func TestVerbAttachedValues(t *testing.T) {
	tmp := t.TempDir()
	for _, pair := range [][2][]string{
		{{"postproc", "-D2", "-i", "none"}, {"postproc", "-D", "2", "-i", "none"}},
		{{"postproc", "-lc", "-bx", "-i", "none"}, {"postproc", "-l", "-c", "-b", "x", "-i", "none"}},
		{{"sp-rtrace", "-emem", "-P-t", "-onone/x", "-x", "/nonexistent"}, {"sp-rtrace", "-e", "mem", "-P", "-t", "-o", "none/x", "-x", "/nonexistent"}},
		{{"calltree", "--lim=5", "none"}, {"calltree", "--limit", "5", "none"}},
		// As urfave/cli (Go's flag package) took them before: -X=VALUE,
		// and a switch's --name=true.
		{{"postproc", "-i=none"}, {"postproc", "-i", "none"}},
		{{"postproc", "--filter-leaks=true", "-i", "none"}, {"postproc", "-l", "-i", "none"}},
		// sp-rtrace's -x ends the options; a "--" after it too.
		{{"sp-rtrace", "-e", "memory", "-x", "--", "/nonexistent"}, {"sp-rtrace", "-e", "memory", "-x", "/nonexistent"}},
	} {
		a, b := runCmd(t, tmp, rtraceBin, pair[0]...), runCmd(t, tmp, rtraceBin, pair[1]...)
		if a != b || strings.Contains(a.stderr, "flag provided but not defined") {
			t.Errorf("rtrace %q: %+v\nrtrace %q: %+v", pair[0], a, pair[1], b)
		}
	}
}

// rtrace script -S SCRIPT --record records (with the script's
// uftrace-option lines) and runs uftrace script on the trace: the script
// prints what it prints of uftrace's own record of the -pg build. The
// verbs that read a trace are the installed uftrace's.
func TestScriptAndUftraceVerbs(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	tmp := t.TempDir()
	script := filepath.Join(tmp, "show.py")
	if err := os.WriteFile(script, []byte(`# uftrace-option: -A c@arg1 --no-libcall
def uftrace_entry(ctx):
    if "args" in ctx:
        print("%s(%s)" % (ctx["name"], ctx["args"][0]))
    else:
        print(ctx["name"])

def uftrace_exit(ctx):
    pass
`), 0o644); err != nil {
		t.Fatal(err)
	}
	pg := build(t, "chain.c", variants[0], true, nil)
	plain := build(t, "chain.c", variants[0], false, nil)
	u := runCmd(t, tmp, uft, "script", "-S", script, "--record", "-d", "U", pg)
	r := runCmd(t, tmp, rtraceBin, "script", "-S", script, "--record", "-d", "R", plain)
	keep := func(out string) string { // the program's line, then the script's
		var l []string
		for _, s := range strings.Split(out, "\n") {
			if s != "" && !strings.HasPrefix(s, "__") {
				l = append(l, s)
			}
		}
		return strings.Join(l, "\n")
	}
	// (rtrace exits with the program's status, as its record does; uftrace
	// script with 0.)
	if r.code != 18%7 || keep(r.stdout) != keep(u.stdout) || !strings.Contains(r.stdout, "c(2)\n") {
		t.Errorf("rtrace script: %+v\nuftrace script: %+v", r, u)
	}
	// replay is uftrace's, arguments as given.
	want := testutil.Run(t, tmp, uft, "replay", "--no-pager", "-f", "none", "-d", "R")
	if got := runCmd(t, tmp, rtraceBin, "replay", "--no-pager", "-f", "none", "-d", "R"); got.stdout != want || got.code != 0 || !strings.Contains(want, "c(1)") {
		t.Errorf("rtrace replay: %+v\nuftrace replay:\n%s", got, want)
	}
	// Without uftrace in PATH: one line saying so.
	t.Setenv("PATH", tmp)
	if got := runCmd(t, tmp, rtraceBin, "report", "-d", "R"); got.code != 127 || strings.Count(got.stderr, "\n") != 1 || !strings.Contains(got.stderr, "uftrace is not installed") {
		t.Errorf("rtrace report without uftrace: %+v", got)
	}
}

// uftrace's agent: record -g traces from the start, and `rtrace -p PID
// --trace=off|on` switches it from outside, returning once the recording
// did; each time tracing turns on, a new directory (W, then W.1).
func TestAgent(t *testing.T) {
	prog := testutil.BuildC(t, "attachee.c", "-O0", "-g")
	tmp := t.TempDir()
	s, errs, pid := startStepped(t, tmp, nil, "record", "-g", "-A", "step@arg1/i32", "-d", "W", "--", prog)
	agent := func(args ...string) {
		t.Helper()
		if r := runCmd(t, tmp, rtraceBin, append([]string{"-p", strconv.Itoa(pid)}, args...)...); r.code != 0 || r.stdout != "" || r.stderr != "" {
			t.Fatalf("rtrace -p %d %v: %+v\n%s", pid, args, r, errs.String())
		}
	}
	s.steps(2)
	agent() // alone: it answers
	agent("--trace=off")
	agent("--trace=off") // off already: nothing to do
	s.steps(2)
	agent("--trace=on")
	s.steps(3)
	s.in.Close()
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("rtrace record -g: %v\n%s", err, errs.String())
	}
	if got := stepIndexes(t, filepath.Join(tmp, "W")); !slices.Equal(got, span(0, 2)) {
		t.Errorf("W: steps %v, want 0 and 1", got)
	}
	if got := stepIndexes(t, filepath.Join(tmp, "W.1")); !slices.Equal(got, span(4, 7)) {
		t.Errorf("W.1: steps %v, want 4 to 6", got)
	}
	if r := runCmd(t, tmp, rtraceBin, "-p", strconv.Itoa(pid), "--trace=on"); r.code != 1 || !strings.Contains(r.stderr, "no such process") {
		t.Errorf("-p of a process gone: %+v", r)
	}
}
