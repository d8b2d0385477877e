package e2e_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"rtrace/internal/testutil"
)

// uftrace's spellings of its options (getopt_long's: attached values,
// prefixes of long names, clustered letters) mean the same in rtrace
// record: each command line is given as is to uftrace record of the -pg
// build and to rtrace record of the plain one, and the call trees match.
func TestUftraceSpellings(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	v := variants[0]
	plain := build(t, "chain.c", v, false, nil)
	pg := build(t, "chain.c", v, true, nil)
	for _, opts := range [][]string{
		{"-D2"},
		{"--depth=2"},
		{"--dep", "2"},
		{"-Fb"},
		{"-F^b$", "-D1"},
		{"-N^c$"},
		{"--notr=c", "--max-st=3"},
		{"--match=glob", "-F", "b*"},
		{"--force", "--no-event", "-s", "call"},
		{"--match=glob", "-A", "[ab]@arg1"}, // a regex [ab] would match main too
	} {
		t.Run(strings.Join(opts, " "), func(t *testing.T) { sameTrees(t, uft, pg, plain, opts) })
	}
}

// -P selects what is traced as uftrace's dynamic patching does, against
// uftrace -P on the same plain build: only the matching functions, the
// others left out; -U takes functions out again.
func TestUftracePatch(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	plain := build(t, "chain.c", variants[0], false, nil)
	for _, opts := range [][]string{
		{"-P", "^b$"},
		{"-P", "^[ab]$"},
		{"-P.", "-U", "^c$"},
		{"-P", "."},
		{"-P.", "-U", "^[cd]$", "-P", "^d$"},     // the last matching pattern decides
		{"-P", "^[ab]$@" + filepath.Base(plain)}, // the executable by its name
	} {
		t.Run(strings.Join(opts, " "), func(t *testing.T) { sameTrees(t, uft, plain, plain, opts) })
	}
}

// sameTrees records ref under uftrace and prog under rtrace with the
// same options (library calls left out) and compares the call trees.
func sameTrees(t *testing.T, uft, ref, prog string, opts []string) {
	t.Helper()
	sameTreesAs(t, uft, ref, prog, opts, opts)
}

// sameTreesAs is sameTrees with uftrace given uopts and rtrace opts. The
// traces are compared through uftrace replay (the call trees), report
// (the functions and their call counts) and graph (the call graph).
func sameTreesAs(t *testing.T, uft, ref, prog string, uopts, opts []string) {
	t.Helper()
	tmp := sameCallTrees(t, uft, ref, prog, uopts, opts)
	sameViews(t, filepath.Join(tmp, "U"), filepath.Join(tmp, "R"))
}

// sameCallTrees is sameTreesAs through uftrace replay only. It returns
// the directory of the traces, U (uftrace's) and R (rtrace's).
func sameCallTrees(t *testing.T, uft, ref, prog string, uopts, opts []string) string {
	t.Helper()
	tmp := t.TempDir()
	runCmd(t, tmp, uft, append(append([]string{"record", "--no-libcall", "--no-event", "-d", "U"}, uopts...), ref)...)
	want := tree(replay(t, filepath.Join(tmp, "U")))
	r := runCmd(t, tmp, rtraceBin, append(append([]string{"record", "--no-libcall", "-q", "-d", "R"}, opts...), prog)...)
	if code := map[bool]int{true: 18 % 7}[strings.Contains(prog, "chain")]; r.code != code {
		t.Fatalf("rtrace: %+v", r)
	}
	got := tree(replay(t, filepath.Join(tmp, "R")))
	if strings.Join(got, "|") != strings.Join(want, "|") || len(want) == 0 {
		t.Errorf("uftrace %v:\n%s\nrtrace:\n%s", opts, strings.Join(want, "|"), strings.Join(got, "|"))
	}
	return tmp
}

// sameViews compares what uftrace report and graph show of two traces,
// their times aside: want uftrace's, got rtrace's.
func sameViews(t *testing.T, want, got string) {
	t.Helper()
	for _, view := range []func(*testing.T, string) string{reportShape, graphShape} {
		if w, g := view(t, want), view(t, got); w != g {
			t.Errorf("%s:\n%s\nrtrace's:\n%s", filepath.Base(want), w, g)
		}
	}
}

// pgStartup are the calls -pg adds before main (uftrace.WithoutPgStartup)
// and _exit, which libmcount never writes (see TestRecordMatchesUftrace):
// what reportShape and graphShape leave out of the top level.
var pgStartup = map[string]bool{"__monstartup": true, "__cxa_atexit": true, "_exit": true}

// reportShape is `uftrace report` of dir: each function with its number
// of calls, sorted, the times left out; top-level pgStartup calls do not
// count.
func reportShape(t *testing.T, dir string) string {
	t.Helper()
	calls := map[string]int{}
	for _, line := range strings.Split(uftraceView(t, "report", dir), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || strings.HasPrefix(f[0], "=") || f[0] == "Total" {
			continue
		}
		n, err := strconv.Atoi(f[4])
		if err != nil {
			t.Fatalf("uftrace report: %q: no number of calls", line)
		}
		calls[strings.Join(f[5:], " ")] += n
	}
	for _, n := range graphNodes(uftraceView(t, "graph", dir)) {
		if n.depth == 1 && pgStartup[n.name] {
			calls[n.name] -= n.calls
		}
	}
	var lines []string
	for name, n := range calls {
		if n != 0 {
			lines = append(lines, fmt.Sprintf("report: %s %d", name, n))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// graphShape is `uftrace graph` of dir, each session's graph as a tree
// of calls with their counts, indented by depth, without times, the
// program's node named PROG and the top-level pgStartup calls left out.
func graphShape(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	skip := false // inside a call left out
	for _, n := range graphNodes(uftraceView(t, "graph", dir)) {
		switch {
		case n.depth == 0:
			n.name = "PROG"
		case n.depth == 1:
			skip = pgStartup[n.name]
		}
		if !skip {
			lines = append(lines, fmt.Sprintf("graph: %s(%d) %s", strings.Repeat("  ", n.depth), n.calls, n.name))
		}
	}
	return strings.Join(lines, "\n")
}

// graphNode is a call in uftrace graph's output.
type graphNode struct {
	depth, calls int
	name         string
}

// graphNodeLine reads a node of uftrace graph's drawing: the lines, then
// "+-" for one of several callees, the count and the name.
var graphNodeLine = regexp.MustCompile(`^([ |]*)(\+-)?\((\d+)\) (.*)$`)

// graphNodes reads the calls of uftrace graph's output, in order, with
// their depths: a node drawn "+-" at column c is a callee of the last
// node whose count starts at c-1; one drawn without, the only callee of
// the last node drawn at its column.
func graphNodes(out string) []graphNode {
	var nodes []graphNode
	type open struct{ col, depth int }
	var stack []open
	for _, line := range strings.Split(out, "\n") {
		_, drawing, ok := strings.Cut(line, " : ")
		m := graphNodeLine.FindStringSubmatch(drawing)
		if !ok || m == nil {
			continue
		}
		calls, _ := strconv.Atoi(m[3])
		col := len(m[1]) + len(m[2])
		parentCol := col
		if m[2] != "" {
			parentCol = len(m[1]) - 1
		}
		depth := 0
		for len(stack) > 0 && stack[len(stack)-1].col > parentCol {
			stack = stack[:len(stack)-1]
		}
		if n := len(stack); n > 0 && stack[n-1].col == parentCol {
			depth = stack[n-1].depth + 1
		}
		stack = append(stack, open{col, depth})
		nodes = append(nodes, graphNode{depth, calls, m[4]})
	}
	return nodes
}

// uftraceView runs uftrace's view (report, graph) on dir.
func uftraceView(t *testing.T, view, dir string) string {
	t.Helper()
	return testutil.Run(t, "", testutil.RequireTool(t, "uftrace"), view, "--no-pager", "-d", dir)
}

// A program named without a slash is found in the current directory
// first, as uftrace finds it; live (`rtrace PROG`, `rtrace live`) shows
// the trace as uftrace live does.
func TestUftraceLookupAndLive(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	tmp := t.TempDir()
	for src, dst := range map[string]string{build(t, "chain.c", variants[0], false, nil): "chain", build(t, "chain.c", variants[0], true, nil): "chain-pg"} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, dst), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	runCmd(t, tmp, uft, "record", "--no-libcall", "--no-event", "-d", "U", "chain-pg")
	want := tree(replay(t, filepath.Join(tmp, "U")))
	if r := runCmd(t, tmp, rtraceBin, "record", "--no-libcall", "-q", "-d", "R", "chain"); r.code != 18%7 || r.stdout != "chain 18\n" {
		t.Fatalf("rtrace record chain: %+v", r)
	}
	if got := tree(replay(t, filepath.Join(tmp, "R"))); strings.Join(got, "|") != strings.Join(want, "|") || len(want) == 0 {
		t.Errorf("record chain (no slash):\n%s\nuftrace:\n%s", strings.Join(got, "|"), strings.Join(want, "|"))
	}
	// live: the program's output, then replay's, with the display options.
	// uftrace exits 1 when the program fails; rtrace with the program's
	// status (4 here).
	u := runCmd(t, tmp, uft, "live", "--no-libcall", "--no-event", "--no-pager", "-D3", "-f", "none", "chain-pg")
	liveTmp := t.TempDir() // where live makes its directory: gone again after each run
	t.Setenv("TMPDIR", liveTmp)
	for _, args := range [][]string{
		{"--no-libcall", "--no-pager", "-D3", "-f", "none", "chain"},
		{"live", "--no-libcall", "--no-pager", "-D3", "-f", "none", "chain"},
		{"-D3", "live", "--no-libcall", "--no-pager", "-fnone", "./chain"},
	} {
		r := runCmd(t, tmp, rtraceBin, args...)
		if r.code != 18%7 || u.code == 0 || !strings.HasPrefix(r.stdout, "chain 18\n") {
			t.Errorf("rtrace %v: %+v; uftrace live exit %d", args, r, u.code)
			continue
		}
		if got, want := liveLines(r.stdout), liveLines(u.stdout); got != want || want == "" {
			t.Errorf("rtrace %v shows:\n%s\nuftrace live:\n%s", args, got, want)
		}
	}
	if ents, _ := filepath.Glob(filepath.Join(liveTmp, "rtrace-live-*")); len(ents) > 0 {
		t.Errorf("live left %v in its TMPDIR", ents)
	}
	// -d keeps the trace; a refused program does not show -d's old one.
	if r := runCmd(t, tmp, rtraceBin, "live", "--no-pager", "-d", "L", "chain"); r.code != 18%7 || !strings.Contains(r.stdout, "main()") {
		t.Errorf("live -d L: %+v", r)
	}
	if err := os.WriteFile(filepath.Join(tmp, "script"), []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if r := runCmd(t, tmp, rtraceBin, "live", "--no-pager", "-d", "L", "./script"); r.code == 0 || strings.Contains(r.stdout, "main()") {
		t.Errorf("live -d L ./script showed a trace: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(tmp, "L", "info")); err != nil {
		t.Errorf("the refusal removed -d's trace: %v", err)
	}
	// Nothing recorded: said, not shown.
	if r := runCmd(t, tmp, rtraceBin, "live", "--no-pager", "--disable", "chain"); r.code == 0 || !strings.Contains(r.stderr, "nothing saved") || strings.Contains(r.stdout, "main()") {
		t.Errorf("live --disable: %+v", r)
	}
	if ents, _ := filepath.Glob(filepath.Join(liveTmp, "rtrace-live-*")); len(ents) > 0 {
		t.Errorf("live left %v in its TMPDIR", ents)
	}
}

// liveLines are the replay lines of a live output, the program's own
// output left out.
func liveLines(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "(") || strings.HasPrefix(strings.TrimSpace(l), "}") || strings.HasPrefix(l, "#") {
			keep = append(keep, strings.TrimRight(l, " "))
		}
	}
	return strings.Join(keep, "\n")
}

// --no-randomize-addr runs the program with a fixed layout, and
// --no-pltbind with LD_BIND_NOT set, as uftrace does.
func TestUftraceProgramEnvironment(t *testing.T) {
	tmp := t.TempDir()
	maps := func(opts ...string) string {
		r := runCmd(t, tmp, rtraceBin, append(append([]string{"record", "-q", "-d", "R"}, opts...), "cat", "/proc/self/maps")...)
		if r.code != 0 || !strings.Contains(r.stdout, "[stack]") {
			t.Fatalf("rtrace record %v cat /proc/self/maps: %+v", opts, r)
		}
		var ranges []string // address range and path: rtrace's memfd has a new inode each run
		for _, l := range strings.Split(r.stdout, "\n") {
			if f := strings.Fields(l); len(f) >= 5 {
				ranges = append(ranges, f[0]+" "+strings.Join(f[5:], " "))
			}
		}
		return strings.Join(ranges, "\n")
	}
	if a, b := maps("--no-randomize-addr"), maps("--no-randomize-addr"); a != b {
		t.Errorf("--no-randomize-addr: two runs map differently:\n%s\n%s", a, b)
	}
	if v, _ := os.ReadFile("/proc/sys/kernel/randomize_va_space"); strings.TrimSpace(string(v)) == "2" {
		if a, b := maps(), maps(); a == b {
			t.Errorf("without --no-randomize-addr two runs map the same: the option proves nothing here")
		}
	}
	r := runCmd(t, tmp, rtraceBin, "record", "-q", "--no-pltbind", "-d", "R", "env")
	if r.code != 0 || !strings.Contains(r.stdout, "\nLD_BIND_NOT=1\n") && !strings.HasPrefix(r.stdout, "LD_BIND_NOT=1\n") {
		t.Errorf("--no-pltbind: env shows no LD_BIND_NOT=1: %+v", r)
	}
}

// Triggers and the caller filter act while recording as in uftrace record
// of the -pg build: depth=, notrace, filter, finish, trace_off, argument
// actions, -C. uftrace record leaves -H (and -T hide) to replay; rtrace
// records what uftrace replay -H shows of uftrace's full trace.
func TestUftraceTriggers(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	v := variants[0]
	plain := build(t, "callers.c", v, false, nil)
	pg := build(t, "callers.c", v, true, nil)
	for _, opts := range [][]string{
		{"-T", "b@depth=1"},
		{"-T", "b@notrace"},
		{"-T", "b@filter,depth=2"},
		{"-Tb@filter", "-T", "c@depth=1"},
		{"-C", "c"},
		{"--caller-filter=^d$", "-D", "3"},
		{"-T", "b@finish"},
		{"-T", "b@trace_off"},
		{"-T", "c@arg1,retval", "-T", "e@backtrace,color=red"},
		{"-A", "c"},
		{"-R", "c", "-A", "e@arg1"},
		{"--argument=^[ce]$", "--retval", "d"},
		{"-e"},
		{"--estimate-return", "-F", "b", "-A", "c"},
	} {
		t.Run(strings.Join(opts, " "), func(t *testing.T) { sameTrees(t, uft, pg, plain, opts) })
	}
	// A call a time= trigger keeps, under callers waiting for their exits
	// (-t): those are written first, in time order (mid's entry, before
	// fast's).
	slowPlain, slowPg := build(t, "slow.c", v, false, nil), build(t, "slow.c", v, true, nil)
	t.Run("-t 5ms -T fast@time=0", func(t *testing.T) {
		sameTrees(t, uft, slowPg, slowPlain, []string{"-t", "5ms", "-T", "fast@time=0"})
	})
	// Specs merge as uftrace's reader merges them: patterns in order, one
	// without '@' standing for DWARF's specs, each replacing the earlier
	// spec of the same argument in place (fi(2, 1, ...): uftrace shows
	// that order too); -a's specs only where no pattern gave one.
	auto, autoPg := build(t, "autotypes.c", v, false, nil), build(t, "autotypes.c", v, true, nil)
	for _, opts := range [][]string{
		{"-A", "fi@arg2/x", "-A", "fi"},
		{"-A", "fi", "-A", "fi@arg2/x", "-R", "fi"},
		{"-a", "-A", "fi@arg2/x", "-F", "^f[ice]$"},
	} {
		t.Run(strings.Join(opts, " "), func(t *testing.T) { sameTrees(t, uft, autoPg, auto, opts) })
	}
	// -e marks the trace as uftrace record -e does (its exits are
	// estimated, rtrace's exact: the trees above match).
	tmp := t.TempDir()
	if r := runCmd(t, tmp, rtraceBin, "record", "-q", "-e", "-d", "E", plain); r.code != 0 {
		t.Fatalf("record -e: %+v", r)
	}
	if dump := testutil.Run(t, tmp, uft, "dump", "-d", "E"); !strings.Contains(dump, "ESTIMATE_RETURN)") {
		t.Errorf("record -e: features without ESTIMATE_RETURN:\n%.600s", dump)
	}
	// The auto-args action is -A FUNC and -R FUNC, as uftrace's manual
	// says and its info file records; uftrace 0.13's own recorder then
	// drops the trigger and records no value.
	t.Run("-T c@auto-args", func(t *testing.T) {
		sameTreesAs(t, uft, pg, plain, []string{"-A", "c", "-R", "c", "-T", "d@depth=1", "-A", "d", "-R", "d"},
			[]string{"-T", "c@auto-args", "-T", "d@depth=1,auto-args"})
	})
	for _, opts := range [][]string{
		{"-H", "c"},
		{"-T", "^[bc]$@hide", "-D", "2"},
		{"-H", "b", "-C", "d"},
	} {
		t.Run(strings.Join(opts, " "), func(t *testing.T) {
			tmp := t.TempDir()
			runCmd(t, tmp, uft, "record", "--no-libcall", "--no-event", "-d", "U", pg)
			want := tree(testutil.Run(t, "", uft, append([]string{"replay", "--no-pager", "-f", "tid", "-d", filepath.Join(tmp, "U")}, opts...)...))
			if r := runCmd(t, tmp, rtraceBin, append(append([]string{"record", "--no-libcall", "-q", "-d", "R"}, opts...), plain)...); r.code != 0 {
				t.Fatalf("rtrace: %+v", r)
			}
			got := tree(replay(t, filepath.Join(tmp, "R")))
			if strings.Join(got, "|") != strings.Join(want, "|") || len(want) == 0 {
				t.Errorf("uftrace replay %v:\n%s\nrtrace:\n%s", opts, strings.Join(want, "\n"), strings.Join(got, "\n"))
			}
		})
	}
	// trace_on and trace_off keep the recorded depth, and the exits of
	// calls entered while tracing was off show once it is on again.
	for _, opts := range [][]string{
		{"--disable", "-T", "b@trace_on"},
		{"--disable", "-T", "c@trace_on", "-T", "b@trace_off"},
		{"-T", "a@trace_off", "-T", "c@trace_on"},
		{"-T", "b@trace_off", "-T", "d@trace-on"},
	} {
		t.Run(strings.Join(opts, " "), func(t *testing.T) { sameCalls(t, uft, pg, plain, opts) })
	}
	// What rtrace cannot do yet is refused, with the action named.
	for _, c := range []struct{ opt, want string }{
		{"b@read=pmu-cycle", "-T b@read=pmu-cycle: hardware counters (pmu-cycle) are not read yet"},
		{"b@libfoo.so,read=proc/statm", "read= and auto-args of one module's functions are not supported yet"},
		{"b@kernel,depth=1", "rtrace traces no kernel functions"},
		{"b@depth=x", "want a depth"},
		{"b", "want FUNC@ACTION"},
	} {
		r := runCmd(t, t.TempDir(), rtraceBin, "record", "-T", c.opt, plain)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("record -T %s: %+v, want exit 2 and one line with %q", c.opt, r, c.want)
		}
	}
}

// sameCalls records ref under uftrace and prog under rtrace with the same
// options (library calls left out) and compares the calls each shows, in
// order, and their replays line by line, depths included.
func sameCalls(t *testing.T, uft, ref, prog string, opts []string) {
	t.Helper()
	tmp := t.TempDir()
	runCmd(t, tmp, uft, append(append([]string{"record", "--no-libcall", "--no-event", "-d", "U"}, opts...), ref)...)
	r := runCmd(t, tmp, rtraceBin, append(append([]string{"record", "--no-libcall", "-q", "-d", "R"}, opts...), prog)...)
	if r.code != 0 {
		t.Fatalf("rtrace: %+v", r)
	}
	calls := func(dir string) string {
		var names []string
		for _, block := range tree(replay(t, filepath.Join(tmp, dir))) {
			names = append(names, strings.Fields(block)...)
		}
		return strings.Join(names, " ")
	}
	if got, want := calls("R"), calls("U"); got != want || want == "" {
		t.Errorf("uftrace %v: %s\nrtrace: %s", opts, want, got)
	}
	if got, want := replayLines(replay(t, filepath.Join(tmp, "R")), false), replayLines(replay(t, filepath.Join(tmp, "U")), false); got != want {
		t.Errorf("uftrace %v replays:\n%s\nrtrace's:\n%s", opts, want, got)
	}
}

// --time prints the program's running time after its output, in uftrace
// record --time's three lines.
func TestUftraceTime(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	plain := build(t, "callers.c", variants[0], false, nil)
	pg := build(t, "callers.c", variants[0], true, nil)
	line := regexp.MustCompile(`(?m)^(elapsed| system|   user) time: +\d+\.\d{9} sec$`)
	tmp := t.TempDir()
	u := runCmd(t, tmp, uft, "record", "--time", "-d", "U", pg)
	r := runCmd(t, tmp, rtraceBin, "record", "--time", "-d", "R", plain)
	labels := func(out string) string {
		var ls []string
		for _, m := range line.FindAllStringSubmatch(out, -1) {
			ls = append(ls, m[1])
		}
		return strings.Join(ls, ",")
	}
	if want := labels(u.stdout); want != "elapsed, system,   user" || labels(r.stdout) != want || !strings.HasPrefix(r.stdout, "callers 17\n") {
		t.Errorf("uftrace --time:\n%s\nrtrace --time:\n%s", u.stdout, r.stdout)
	}
}

// -L keeps the functions declared in the source files it names, as uftrace
// record -L does (a plain word is a path component; no match leaves every
// function), and implies --srcline.
func TestUftraceLocFilter(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	plain := build(t, "callers.c", variants[0], false, nil)
	pg := build(t, "callers.c", variants[0], true, nil)
	for _, opts := range [][]string{
		{"-L", "callers.c", "-D", "3"},
		{"-L", "testdata"},
		{"--loc-filter=nomatch"},
	} {
		t.Run(strings.Join(opts, " "), func(t *testing.T) { sameTrees(t, uft, pg, plain, opts) })
	}
	tmp := t.TempDir()
	runCmd(t, tmp, rtraceBin, "record", "-L", "testdata", "-d", "R", plain)
	out := testutil.Run(t, "", uft, "replay", "--srcline", "-d", filepath.Join(tmp, "R"))
	if !strings.Contains(out, "testdata/callers.c:") || strings.Contains(out, "printf") {
		t.Errorf("-L testdata: want source lines and no library call:\n%s", out)
	}
}

// --signal SIG@ACTION turns tracing off, on, or ends it at SIG, which the
// program never gets: trace_off leaves a gap in the one trace (as uftrace
// does), finish saves the trace at once and the program goes on, and
// trace_on after --disable starts the trace.
func TestUftraceSignal(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	prog := testutil.BuildC(t, "sigswitch.c", "-O0", "-g")
	pg := testutil.BuildC(t, "sigswitch.c", "-O0", "-g", "-pg")
	for _, c := range []struct {
		opts []string
		want string // the entries, in order
	}{
		{[]string{"--signal", "SIGUSR1@trace_off", "--signal", "USR2@trace_on"}, "main before raise after printf"},
		{[]string{"--signal=SIGUSR1@finish", "--signal=SIGUSR2@trace_on"}, "main before raise"},
		{[]string{"--disable", "--signal", "SIGUSR2@trace-on", "--signal", "SIGUSR1@traceoff"}, "after printf"},
		{[]string{"--signal", "SIGUSR1@trace_off", "--signal", "SIGUSR2@finish"}, "main before raise"},
	} {
		t.Run(strings.Join(c.opts, " "), func(t *testing.T) {
			tmp := t.TempDir()
			r := runCmd(t, tmp, rtraceBin, append(append([]string{"record", "-d", "R"}, c.opts...), prog)...)
			if r.code != 0 || r.stdout != "sigswitch 8\n" {
				t.Fatalf("rtrace record %v: %+v", c.opts, r)
			}
			var got []string
			for _, block := range tree(testutil.Run(t, "", uft, "replay", "--no-pager", "-d", filepath.Join(tmp, "R"))) {
				for _, l := range strings.Fields(block) {
					got = append(got, strings.TrimSuffix(l, "()"))
				}
			}
			if strings.Join(got, " ") != c.want {
				t.Errorf("entries %q, want %q", got, c.want)
			}
			if _, err := os.Stat(filepath.Join(tmp, "R.1")); err == nil {
				t.Errorf("a second trace directory: %s", filepath.Join(tmp, "R.1"))
			}
			// The program's own functions as uftrace record shows them.
			if c.opts[0] == "--disable" {
				// uftrace also records the exit of main, entered while
				// tracing was off: its report counts a call of main that
				// its replay does not show. rtrace keeps a call whole or
				// not at all.
				sameCallTrees(t, uft, pg, prog, c.opts, c.opts)
				return
			}
			sameTrees(t, uft, pg, prog, c.opts)
		})
	}
	r := runCmd(t, t.TempDir(), rtraceBin, "record", "--signal", "SIGUSR1@depth=1", prog)
	if r.code != 2 || !strings.Contains(r.stderr, "the actions of a signal are trace_on, trace_off and finish") {
		t.Errorf("--signal SIGUSR1@depth=1: %+v", r)
	}
}

// --host sends the trace to a running `uftrace recv`, which writes it
// under its -d directory by the name -d gives; nothing is kept here. A
// receiver that is not there fails the command before the program runs.
func TestUftraceHost(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	prog := build(t, "callers.c", variants[0], false, nil)
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	tmp, recvDir := t.TempDir(), t.TempDir()
	r := runCmd(t, tmp, rtraceBin, "record", "--host", "127.0.0.1", "--port", strconv.Itoa(port), "-d", "sent.data", prog)
	if r.code != 1 || !strings.Contains(r.stderr, "connection refused") || r.stdout != "" {
		t.Errorf("no receiver: %+v, want exit 1 before the program ran", r)
	}
	recv := exec.Command(uft, "recv", "-d", recvDir, "--port", strconv.Itoa(port))
	if err := recv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { recv.Process.Kill(); recv.Wait() }()
	// uftrace recv dies of a connection that sends nothing: its listening
	// socket is watched for in /proc/net/tcp instead.
	listening := fmt.Sprintf(":%04X 00000000:0000 0A", port)
	waitFor(t, "uftrace recv to listen", func() bool {
		b, _ := os.ReadFile("/proc/net/tcp")
		return strings.Contains(string(b), listening)
	})
	// Runs that send nothing (tracing never turned on, a bad option)
	// leave uftrace recv running, and no temporary files.
	tmpdir := t.TempDir()
	t.Setenv("TMPDIR", tmpdir)
	r = runCmd(t, tmp, rtraceBin, "record", "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--disable", "-d", "none.data", prog)
	if r.code != 0 || r.stdout != "callers 17\n" || !strings.Contains(r.stderr, "tracing was never turned on") {
		t.Errorf("rtrace record --host --disable: %+v", r)
	}
	r = runCmd(t, tmp, rtraceBin, "record", "--host", "127.0.0.1", "--port", strconv.Itoa(port), "-A", "main@argX", prog)
	if r.code != 2 || r.stdout != "" {
		t.Errorf("rtrace record --host with a bad -A: %+v", r)
	}
	r = runCmd(t, tmp, rtraceBin, "record", "--host", "127.0.0.1", "--port", strconv.Itoa(port), "-d", "sent.data", prog)
	if r.code != 0 || r.stdout != "callers 17\n" || !strings.Contains(r.stderr, "sent.data at 127.0.0.1:") {
		t.Fatalf("rtrace record --host: %+v", r)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("--host left %s here", ents[0].Name())
	}
	if left, _ := filepath.Glob(filepath.Join(tmpdir, "rtrace-send-*")); len(left) != 0 {
		t.Errorf("--host left %s", left)
	}
	if _, err := os.Stat(filepath.Join(recvDir, "none.data")); err == nil {
		t.Errorf("a run that recorded nothing made a directory at uftrace recv")
	}
	sent := filepath.Join(recvDir, "sent.data")
	waitFor(t, "uftrace recv to write the info file, sent last", func() bool {
		st, err := os.Stat(filepath.Join(sent, "info"))
		return err == nil && st.Size() > 40
	})
	runCmd(t, tmp, rtraceBin, "record", "-q", "-d", "local.data", prog)
	if got, want := tree(replay(t, sent)), tree(replay(t, filepath.Join(tmp, "local.data"))); strings.Join(got, "|") != strings.Join(want, "|") || len(want) == 0 {
		t.Errorf("received:\n%s\nrecorded here:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// waitFor polls cond until it holds, for what the test waits on that
// another process does (a file it writes, a socket it opens); it fails
// the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
	}
}

// --nop runs the program traced and keeps nothing: no trace directory,
// and the temporary one removed.
func TestUftraceNop(t *testing.T) {
	prog := build(t, "callers.c", variants[0], false, nil)
	dir, tmpdir := t.TempDir(), t.TempDir()
	cmd := exec.Command(rtraceBin, "record", "--nop", "-d", "X", prog)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "TMPDIR="+tmpdir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || string(out) != "callers 17\n" || !strings.Contains(stderr.String(), "no trace kept (--nop)") {
		t.Fatalf("record --nop: %v, stdout %q, stderr %q", err, out, stderr.String())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("--nop wrote %s", ents[0].Name())
	}
	if left, _ := filepath.Glob(filepath.Join(tmpdir, "rtrace-nop-*")); len(left) != 0 {
		t.Errorf("--nop left %s", left)
	}
	// live --nop shows nothing and exits with the program's status, as
	// uftrace live --nop; a bad option with --nop leaves nothing either.
	t.Setenv("TMPDIR", tmpdir)
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"live", "--nop", prog}, 0},
		{[]string{"record", "--nop", "-A", "main@argX", prog}, 2},
	} {
		r := runCmd(t, dir, rtraceBin, c.args...)
		if r.code != c.code || c.code == 0 && r.stdout != "callers 17\n" {
			t.Errorf("rtrace %v: %+v", c.args, r)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(tmpdir, "rtrace-nop-*")); len(left) != 0 {
		t.Errorf("left %s", left)
	}
}

// -T FUNC@read=proc/statm and read=page-fault record uftrace's builtin
// events at each call of FUNC and its return: replay shows them where it
// shows uftrace's of the -pg build (their values masked), and rtrace's own
// reader takes them through rtrace postproc.
func TestUftraceReadTrigger(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	plain := build(t, "chain.c", variants[0], false, nil)
	pg := build(t, "chain.c", variants[0], true, nil)
	opts := []string{"-T", "b@read=proc/statm", "-T", "^c$@read=page-fault,read=proc/statm"}
	number := regexp.MustCompile(`[+]?\d+`)
	show := func(dir string) string {
		return number.ReplaceAllString(testutil.Run(t, "", uft, "replay", "--no-pager", "-f", "none", "-d", dir), "N")
	}
	tmp := t.TempDir()
	runCmd(t, tmp, uft, append(append([]string{"record", "--no-libcall", "--no-event", "-d", "U"}, opts...), pg)...)
	want := show(filepath.Join(tmp, "U"))
	if !strings.Contains(want, "/* diff:page-fault (major=N minor=N) */") {
		t.Fatalf("uftrace's replay has no read events:\n%s", want)
	}
	for _, engine := range engines {
		dir := filepath.Join(tmp, "R-"+engine)
		if r := runCmd(t, tmp, rtraceBin, append(append([]string{"record", "--no-libcall", "-q", "--engine", engine, "-d", dir}, opts...), plain)...); r.code != 18%7 {
			t.Fatalf("%s: rtrace record: %+v", engine, r)
		}
		if got := show(dir); got != want {
			t.Errorf("%s: replay\n%s\nuftrace's:\n%s", engine, got, want)
		}
		out := filepath.Join(tmp, "P-"+engine)
		testutil.Run(t, tmp, rtraceBin, "postproc", "-i", dir, "-d", out, "-N", "^d$")
		if got := show(out); !strings.Contains(got, "/* read:page-fault") || strings.Contains(got, "d()") {
			t.Errorf("%s: rtrace postproc -N ^d$:\n%s", engine, got)
		}
	}
}

// --keep-pid: the program runs as the rtrace command's process, with its
// pid, and its parent gets its status; the trace is the same. (Wait
// returns once the tracer, which shares the command's stderr, has ended.)
func TestUftraceKeepPid(t *testing.T) {
	prog := testutil.BuildC(t, "pid.c", "-O0", "-g")
	for _, engine := range engines {
		tmp := t.TempDir()
		want := runCmd(t, tmp, rtraceBin, "record", "-q", "--engine", engine, "-d", "R", "--", prog)
		cmd := exec.Command(rtraceBin, "record", "--keep-pid", "--engine", engine, "-d", "K", "--", prog)
		cmd.Dir = tmp
		var out, errs strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errs
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 || out.String() != fmt.Sprintf("pid %d\n", cmd.Process.Pid) {
			t.Errorf("%s: rtrace record --keep-pid (pid %d): %v, stdout %q, stderr %q", engine, cmd.Process.Pid, err, out.String(), errs.String())
		}
		if !strings.Contains(errs.String(), "trace saved in K") {
			t.Errorf("%s: the tracer did not finish before Wait returned: %q", engine, errs.String())
		}
		if got, w := tree(replay(t, filepath.Join(tmp, "K"))), tree(replay(t, filepath.Join(tmp, "R"))); strings.Join(got, "") != strings.Join(w, "") || want.code != 3 {
			t.Errorf("%s: --keep-pid's trace\n%s\nwithout:\n%s", engine, strings.Join(got, ""), strings.Join(w, ""))
		}
	}
	if r := runCmd(t, t.TempDir(), rtraceBin, "record", "--keep-pid", "-d", "/proc/nowhere/K", "--", prog); r.code != 2 || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("--keep-pid with a bad -d: %+v, want one line and exit 2", r)
	}
	// The tracer is not the program's child: a wait for every child (the
	// shell's `wait`) does not wait for it (it would wait forever).
	if r := runCmd(t, t.TempDir(), rtraceBin, "record", "-q", "--keep-pid", "-d", "W", "--", "sh", "-c", "wait; echo waited"); r.stdout != "waited\n" || r.code != 0 {
		t.Errorf("--keep-pid sh -c 'wait': %+v", r)
	}
}

// -W cpu records the CPU a thread runs on when it changes at a call or
// return, as uftrace's watch point: pinned to CPU 0, each thread's first
// call shows it, where uftrace shows it of the -pg build.
func TestUftraceWatch(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	taskset := testutil.RequireTool(t, "taskset")
	for _, f := range []struct{ src, flags string }{{"chain.c", ""}, {"threads.c", "-pthread"}} {
		var libs []string
		if f.flags != "" {
			libs = []string{f.flags}
		}
		plain, pg := build(t, f.src, variants[0], false, libs), build(t, f.src, variants[0], true, libs)
		tmp := t.TempDir()
		runCmd(t, tmp, taskset, "-c", "0", uft, "record", "--no-libcall", "--no-event", "-W", "cpu", "-d", "U", pg)
		want := replayLines(testutil.Run(t, tmp, uft, "replay", "--no-pager", "-f", "tid", "-d", "U"), true)
		if !strings.Contains(want, "/* watch:cpu (cpu=0) */") {
			t.Fatalf("%s: no watch event in uftrace's replay:\n%s", f.src, want)
		}
		for _, engine := range engines {
			dir := "R-" + engine
			runCmd(t, tmp, taskset, "-c", "0", rtraceBin, "record", "-q", "--no-libcall", "--engine", engine, "-W", "cpu", "-d", dir, plain)
			if got := replayLines(replay(t, filepath.Join(tmp, dir)), true); got != want {
				t.Errorf("%s %s: replay\n%s\nuftrace's:\n%s", f.src, engine, got, want)
			}
		}
	}
	if r := runCmd(t, t.TempDir(), rtraceBin, "record", "-W", "var", "true"); r.code != 2 || !strings.Contains(r.stderr, "-W var: the watch point is cpu") {
		t.Errorf("-W var: %+v", r)
	}
}

// With -W cpu, a thread's first call is followed by its first watch
// event: a thread blocked for good in that call when the process exits
// (testdata/blocked.c) has both, the call left open as uftrace leaves it.
func TestUftraceWatchBlockedThread(t *testing.T) {
	prog := testutil.BuildC(t, "blocked.c", "-O0", "-g", "-pthread")
	for _, engine := range engines {
		tmp := t.TempDir()
		if r := runCmd(t, tmp, rtraceBin, "record", "-q", "--engine", engine, "-W", "cpu", "-d", "R", "--", prog); r.stdout != "blocked 3\n" || r.code != 0 {
			t.Fatalf("%s: %+v", engine, r)
		}
		out := testutil.Run(t, tmp, testutil.RequireTool(t, "uftrace"), "replay", "--no-pager", "-d", "R")
		if !regexp.MustCompile(`\| worker\(\) \{\n.*\| +/\* watch:cpu`).MatchString(out) || strings.Contains(out, "} /* worker */") || !strings.Contains(out, "] worker\n") {
			t.Errorf("%s: worker() not left open, or no watch event in it:\n%s", engine, out)
		}
	}
}

// live hands replay what uftrace live's replay honours (cmds/live.c,
// reset_live_opts): --no-merge and --column-view as given, and of -T only
// the actions replay takes (backtrace, color=, hide, time=, trace...).
func TestLiveReplayOptions(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	tmp := t.TempDir()
	pg := build(t, "chain.c", variants[0], true, nil)
	plain := build(t, "chain.c", variants[0], false, nil)
	t.Setenv("TMPDIR", t.TempDir())
	for _, opts := range [][]string{
		{"--no-merge"},
		{"--column-view", "--column-offset=4", "--no-merge"},
		{"-T", "b@depth=1", "-T", "d@backtrace"},
		{"-T", "c@depth=1;b@hide"},
		{"--disable", "-T", "c@trace_on"}, // shown at the recorded depth, as uftrace live's replay does
	} {
		base := []string{"live", "--no-libcall", "--no-event", "--no-pager", "-f", "none"}
		u := runCmd(t, tmp, uft, append(append(base, opts...), pg)...)
		r := runCmd(t, tmp, rtraceBin, append(append(base, opts...), plain)...)
		if r.code != 18%7 || r.stderr != "chain done\n" {
			t.Errorf("rtrace live %v: %+v", opts, r)
			continue
		}
		if got, want := liveLines(r.stdout), liveLines(u.stdout); got != want || want == "" {
			t.Errorf("rtrace live %v shows:\n%s\nuftrace live:\n%s", opts, got, want)
		}
	}
}

// -A/-R specs may name a module as uftrace's do (FUNC@MODULE,argN): PLT,
// the program's library calls, or a prefix of a module's file name
// (chain- names the program chain-<hash>). A spec applies in its module
// only; replay shows what uftrace shows of the -pg build.
func TestRecordModuleSpecs(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	pg := build(t, "chain.c", variants[0], true, nil)
	plain := build(t, "chain.c", variants[0], false, nil)
	tmp := t.TempDir()
	specs := []string{"-A", "^[bc]$@chain-,arg1", "-A", "printf@PLT,arg1/s", "-A", "d@PLT,arg1", "-R", "c@libc,retval", "-R", "a@plt,retval", "-R", "^b$@retval,chain-", "-T", "a@chain-,arg1", "-T", "d@libc,arg1"}
	runCmd(t, tmp, uft, append(append([]string{"record", "--no-event", "-d", "U"}, specs...), pg)...)
	if r := runCmd(t, tmp, rtraceBin, append(append([]string{"record", "-q", "-d", "R"}, specs...), plain)...); r.code != 18%7 {
		t.Fatalf("rtrace record: %+v", r)
	}
	want := replayLines(testutil.Run(t, tmp, uft, "replay", "--no-pager", "-f", "tid", "-d", "U"), false)
	got := replayLines(testutil.Run(t, tmp, uft, "replay", "--no-pager", "-f", "tid", "-d", "R"), false)
	if got != want || !strings.Contains(got, `printf("chain %d\n");`) || !strings.Contains(got, "c(2) {") || !strings.Contains(got, "} = 12; /* b */") || !strings.Contains(got, "a(2) {") {
		t.Errorf("replay differs\nuftrace -pg:\n%s\nrtrace:\n%s", want, got)
	}
}

// Of a function both -F and -N match, the one given last decides, as in
// uftrace; the traces of rtrace and uftrace -pg are the same for each order.
func TestFilterOrder(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	pg := build(t, "chain.c", variants[0], true, nil)
	plain := build(t, "chain.c", variants[0], false, nil)
	for _, opts := range [][]string{
		{"-F", "a", "-N", "^[bc]$", "-F", "c"},
		{"-N", "c", "-F", "^[a-d]$"},
		{"-F", "^[a-d]$", "-N", "c"},
		{"-N", "b", "-F", "b@chain-"},
	} {
		t.Run(strings.Join(opts, " "), func(t *testing.T) { sameTrees(t, uft, pg, plain, opts) })
	}
	// rtrace postproc reads them in order too, on a trace kept whole.
	tmp := t.TempDir()
	runCmd(t, tmp, rtraceBin, "record", "-q", "--no-libcall", "-d", "R", plain)
	for i, opts := range [][]string{{"-N", "c", "-F", "^[a-d]$"}, {"-F", "^[a-d]$", "-N", "c"}} {
		runCmd(t, tmp, uft, append(append([]string{"record", "--no-libcall", "--no-event", "-d", "U"}, opts...), pg)...)
		out := fmt.Sprintf("P%d", i)
		if r := runCmd(t, tmp, rtraceBin, append(append([]string{"postproc"}, opts...), "-i", "R", "-d", out)...); r.code != 0 {
			t.Fatalf("postproc %v: %+v", opts, r)
		}
		want, got := tree(replay(t, filepath.Join(tmp, "U"))), tree(replay(t, filepath.Join(tmp, out)))
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("postproc %v:\n%s\nuftrace record:\n%s", opts, strings.Join(got, "|"), strings.Join(want, "|"))
		}
	}
}

// -Z takes a PLT stub's size (16 bytes) as its library call's, as uftrace
// does: -Z 33 leaves out every library call, and the functions of fewer
// bytes (chain.c at -O0: a, c and d in both builds, -pg's mcount call
// aside), as uftrace -Z 33 does of the -pg build.
func TestSizeFilterLibcalls(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	pg := build(t, "chain.c", variants[0], true, nil)
	plain := build(t, "chain.c", variants[0], false, nil)
	for _, z := range []string{"33", "16"} {
		tmp := t.TempDir()
		runCmd(t, tmp, uft, "record", "--no-event", "-Z", z, "-d", "U", pg)
		if r := runCmd(t, tmp, rtraceBin, "record", "-q", "-Z", z, "-d", "R", plain); r.code != 18%7 {
			t.Fatalf("rtrace: %+v", r)
		}
		want := tree(replay(t, filepath.Join(tmp, "U")))
		got := tree(replay(t, filepath.Join(tmp, "R")))
		if z == "16" {
			// d (14 bytes plain, 24 with -pg's mcount call) is the one
			// difference of the builds: compare the library calls.
			want, got = libcallLines(want), libcallLines(got)
		}
		if strings.Join(got, "|") != strings.Join(want, "|") || len(want) == 0 {
			t.Errorf("-Z %s: uftrace:\n%s\nrtrace:\n%s", z, strings.Join(want, "|"), strings.Join(got, "|"))
		}
	}
}

// libcallLines keeps the library calls of chain.c's trees.
func libcallLines(trees []string) []string {
	var out []string
	for _, tr := range trees {
		for _, l := range strings.Split(tr, "\n") {
			if f := strings.TrimSpace(l); f == "printf()" || f == "fwrite()" || f == "fputs()" {
				out = append(out, f)
			}
		}
	}
	return out
}

// -R on setjmp shows both its returns, 0 at the call and longjmp's value
// at the jump, as uftrace does: rtrace writes a setjmp's exits itself.
func TestSetjmpRetval(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	pg := build(t, "longjmp.c", variants[0], true, nil)
	plain := build(t, "longjmp.c", variants[0], false, nil)
	specs := []string{"-A", ".?longjmp@arg2", "-R", ".?setjmp@retval", "-A", "third@arg1"}
	tmp := t.TempDir()
	runCmd(t, tmp, uft, append(append([]string{"record", "--no-event", "-d", "U"}, specs...), pg)...)
	want := replayLines(testutil.Run(t, tmp, uft, "replay", "--no-pager", "-f", "tid", "-d", "U"), false)
	for _, engine := range engines {
		if r := runCmd(t, tmp, rtraceBin, append(append([]string{"record", "-q", "--engine", engine, "-d", "R-" + engine}, specs...), plain)...); r.code != 0 {
			t.Fatalf("%s: %+v", engine, r)
		}
		got := replayLines(testutil.Run(t, tmp, uft, "replay", "--no-pager", "-f", "tid", "-d", "R-"+engine), false)
		if got != want || !strings.Contains(got, "} = 3; /* _setjmp */") || !strings.Contains(got, "_setjmp() = 0;") {
			t.Errorf("%s: replay\n%s\nuftrace -pg:\n%s", engine, got, want)
		}
	}
}

// -E linux:task-name records the task name changes as uftrace does, with
// perf's comm events in perf-cpuN.dat: replay shows each change inside
// the call that made it, and the task column follows, a new thread's too.
func TestTaskNameEvents(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	pg := build(t, "taskname.c", variants[0], true, []string{"-pthread"})
	plain := build(t, "taskname.c", variants[0], false, []string{"-pthread"})
	tmp := t.TempDir()
	runCmd(t, tmp, uft, "record", "-E", "linux:task-name", "-d", "U", pg)
	for _, engine := range engines {
		dir := "R-" + engine
		if r := runCmd(t, tmp, rtraceBin, "record", "-q", "--engine", engine, "-E", "linux:task-name", "-d", dir, plain); r.code != 0 || r.stderr != "" {
			t.Fatalf("%s: %+v", engine, r)
		}
		want := taskLines(testutil.Run(t, tmp, uft, "replay", "--no-pager", "-f", "tid,task", "-d", "U"))
		got := taskLines(testutil.Run(t, tmp, uft, "replay", "--no-pager", "-f", "tid,task", "-d", dir))
		if got != want || !strings.Contains(got, `worker | /* linux:task-name (comm="worker") */`) || !strings.Contains(got, `foo | /* linux:task-name (comm="foo") */`) {
			t.Errorf("%s: replay\n%s\nuftrace -pg:\n%s", engine, got, want)
		}
	}
	// An -E that selects nothing is said, once.
	r := runCmd(t, tmp, rtraceBin, "record", "-q", "-E", "nosuch:probe", "-E", "linux:*", "-d", "N", plain)
	if r.code != 0 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, `-E "nosuch:probe" matches no USDT probe`) {
		t.Errorf("-E nosuch:probe: %+v", r)
	}
}

// taskLines are the lines of a replay -f tid,task, each task's apart
// ("NAME | CALL", the task ids left out, the program's own name PROG),
// tasks sorted, -pg's start-up calls and the schedule events uftrace
// records by default left out.
func taskLines(out string) string {
	line := regexp.MustCompile(`^ *\[ *(\d+)\] +(\S+) \| (.*)$`)
	tasks := map[string][]string{}
	for _, l := range strings.Split(out, "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil || pgStartup[strings.TrimSuffix(strings.TrimSpace(m[3]), "();")] || strings.Contains(m[3], "linux:sched") {
			continue
		}
		name := m[2]
		if strings.HasPrefix(name, "taskname-") {
			name = "PROG" // the program's name: taskname-<hash of the build>
		}
		tasks[m[1]] = append(tasks[m[1]], name+" | "+strings.TrimSpace(m[3]))
	}
	// A call another task's records came inside of is shown open then
	// closed ("f() {", "} /* f */"): a leaf all the same.
	leaf := regexp.MustCompile(`(?m)^(\S+) \| (\S+)\(\) \{\n\S+ \| \} /\* (\S+) \*/$`)
	var all []string
	for _, ls := range tasks {
		all = append(all, leaf.ReplaceAllStringFunc(strings.Join(ls, "\n"), func(m string) string {
			g := leaf.FindStringSubmatch(m)
			if g[2] != g[3] {
				return m
			}
			return g[1] + " | " + g[2] + "();"
		}))
	}
	slices.Sort(all)
	return strings.Join(all, "\n--\n")
}

// -T FUNC@size=N leaves out, from FUNC's call on and until it returns,
// the functions smaller than N bytes, FUNC among them, their calls kept
// (libmcount's size filter): chain.c's a, c and d are under 33 bytes in
// both builds and b over, so a@size=33 shows b under main, and b@size=1000
// leaves a alone. Compared with uftrace's record of the -pg build.
func TestSizeTrigger(t *testing.T) {
	pg := build(t, "chain.c", variants[0], true, nil)
	plain := build(t, "chain.c", variants[0], false, nil)
	for _, c := range []struct{ trigger, must, mustNot string }{
		{"a@size=33", "b()", "a()"},
		{"b@size=1000", "a()", "c()"},
	} {
		tmp := t.TempDir()
		_, want, got := sideBySide(t, tmp, pg, plain, "-T", c.trigger)
		w, g := tree(want), tree(got)
		if strings.Join(w, "|") != strings.Join(g, "|") || !strings.Contains(got, c.must) || strings.Contains(got, c.mustNot) {
			t.Errorf("-T %s: uftrace:\n%s\nrtrace:\n%s", c.trigger, want, got)
		}
	}
}
