package e2e_test

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"rtrace/internal/testutil"
	"rtrace/internal/uftrace"
)

// vfork: the child borrows the parent's stack until it execs or _exits.
// uftrace -pg shows the child's calls in the parent's task (libmcount's
// state is shared with the parent), so the expected trees are written out:
// the child's calls are its own, after a FORK, at the inherited depth.
func TestRecordVfork(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			prog := build(t, "vfork.c", v, false, nil)
			chain := build(t, "chain.c", v, false, nil)
			for _, c := range []struct {
				args  []string
				child string
			}{
				{nil, "leaf()\n"},
				{[]string{chain}, "main()\n  a()\n    b()\n      c()\n        d()\n      c()\n        d()\n  a()\n    b()\n      c()\n        d()\n      c()\n        d()\n"},
			} {
				for _, engine := range engines {
					tmp := t.TempDir()
					got := runCmd(t, tmp, rtraceBin, append([]string{"record", "--no-libcall", "-q", "--engine", engine, "-d", "R", "--", prog}, c.args...)...)
					if bare := runCmd(t, tmp, prog, c.args...); got != bare {
						t.Errorf("%s: under rtrace the program printed/exited differently:\nwithout: %+v\nwith:    %+v", engine, bare, got)
					}
					trees := tree(replay(t, filepath.Join(tmp, "R")))
					want := []string{c.child, "main()\n  spawn()\n  leaf()\n"}
					if strings.Join(trees, "|") != strings.Join(want, "|") {
						t.Errorf("%s: args %v: trees\n%q\nwant\n%q", engine, c.args, trees, want)
					}
				}
			}
		})
	}
}

// posix_spawn: its child runs on a stack of its own in the parent's memory
// until it execs, never in the parent's frames: the parent's tree is whole
// (posix_spawn a call of its own), and the program run again is a tree of
// its own, as uftrace shows both of the -pg build.
func TestRecordPosixSpawn(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	for _, v := range []variant{variants[0], variants[3]} {
		t.Run(v.name, func(t *testing.T) {
			prog, pg := build(t, "spawn.c", v, false, nil), build(t, "spawn.c", v, true, nil)
			tmp := t.TempDir()
			runCmd(t, tmp, uft, "record", "--no-event", "-d", "U", pg)
			want := uftrace.WithoutPgStartup(tree(replay(t, filepath.Join(tmp, "U"))))
			for _, engine := range engines {
				dir := "R-" + engine
				r := runCmd(t, tmp, rtraceBin, "record", "-q", "--engine", engine, "-d", dir, "--", prog)
				got := tree(replay(t, filepath.Join(tmp, dir)))
				if r.code != 0 || r.stdout != "spawn 4\n" || strings.Join(got, "|") != strings.Join(want, "|") {
					t.Errorf("%s: %+v\ntrees %q\nuftrace %q", engine, r, got, want)
				}
				// task.txt as uftrace's: each process's SESS, TASK once.
				task, err := os.ReadFile(filepath.Join(tmp, dir, "task.txt"))
				lines := strings.Split(strings.TrimSpace(string(task)), "\n")
				if err != nil || len(lines) != 5 || len(slices.Compact(slices.Clone(lines))) != len(lines) {
					t.Errorf("%s: task.txt (%v):\n%s", engine, err, task)
				}
			}
		})
	}
}

// A SIGSEGV is recorded: rtrace exits 128+11, says so, and the trace shows
// the calls up to the crash, the crash site's frames left open: replay
// shows them as it shows uftrace's record of the -pg build.
func TestRecordCrash(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			prog := build(t, "crash.c", v, false, nil)
			tmp := t.TempDir()
			runCmd(t, tmp, uft, "record", "--no-event", "-d", "U", build(t, "crash.c", v, true, nil))
			want := testutil.Run(t, tmp, uft, "replay", "--no-pager", "-d", "U")
			for _, engine := range engines {
				crashCase(t, uft, prog, engine, want)
			}
		})
	}
}

// crashCase records prog, which crashes, with engine; want is uftrace's
// replay of the -pg build.
func crashCase(t *testing.T, uft, prog, engine, want string) {
	t.Helper()
	tmp := t.TempDir()
	r := runCmd(t, tmp, rtraceBin, "record", "--engine", engine, "-d", "R", "--", prog)
	if r.code != 128+int(syscall.SIGSEGV) || r.stdout != "crash\n" {
		t.Errorf("%s: exit %d stdout %q: want %d and the program's output", engine, r.code, r.stdout, 128+int(syscall.SIGSEGV))
	}
	if !strings.Contains(r.stderr, "signal 11") {
		t.Errorf("%s: stderr %q does not report the crash", engine, r.stderr)
	}
	got := replay(t, filepath.Join(tmp, "R"))
	if g, w := strings.Join(tree(got), ""), "main()\n  puts()\n  fflush()\n  middle()\n    crash()\n      leaf()\n"; g != w {
		t.Errorf("%s: tree %q, want %q", engine, g, w)
	}
	entries, exits := testutil.CountRecords(t, filepath.Join(tmp, "R"))
	if entries != 6 || exits != 3 {
		t.Errorf("%s: %d entries, %d exits: want 6 calls, main, middle and crash open", engine, entries, exits)
	}
	remaining := regexp.MustCompile(`remaining functions\n=+\ntask: \d+\n((\[\d\] \w+\n)*)`)
	if g, w := replayLines(got, false), replayLines(want, false); g != w || !strings.Contains(w, "crash() {") {
		t.Errorf("%s: replay\n%s\nuftrace -pg:\n%s", engine, g, w)
	}
	if g, w := remaining.FindStringSubmatch(got), remaining.FindStringSubmatch(want); g == nil || w == nil || g[1] != w[1] {
		t.Errorf("%s: the functions left open differ:\n%s\nuftrace -pg:\n%s", engine, got, want)
	}
	info := testutil.Run(t, tmp, uft, "info", "-d", "R")
	if !strings.Contains(info, "terminated by signal: 11") {
		t.Errorf("%s: info does not show the signal:\n%s", engine, info)
	}
}

// -F, -N and -D select the same calls as uftrace record's filters on the
// -pg build.
func TestRecordFilters(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	for _, v := range variants[:2] {
		plain := build(t, "chain.c", v, false, nil)
		pg := build(t, "chain.c", v, true, nil)
		for _, opts := range [][]string{
			{"-F", "^b$"},
			{"-N", "^c$"},
			{"-D", "2"},
			{"-F", "^a$", "-N", "^d$"},
			{"-F", "^c$", "-D", "1"},
			{"--max-stack", "3"},
			{"-N", "^b$", "--max-stack", "2"},
		} {
			t.Run(v.name+"/"+strings.Join(opts, " "), func(t *testing.T) { sameTrees(t, uft, pg, plain, opts) })
		}
	}
}

// A function whose first instruction cannot be displaced is skipped: the
// summary counts it, -v names it with the reason and lists the functions
// left with an int3 entry, and the rest is traced.
func TestRecordSkipped(t *testing.T) {
	prog := testutil.BuildC(t, "skip.c", "-O0")
	tmp := t.TempDir()
	r := runCmd(t, tmp, rtraceBin, "record", "-d", "R", "--", prog)
	if r.code != 0 || r.stdout != "skip 42\n" || !strings.Contains(r.stderr, "1 function(s) not traced (-v lists them)") {
		t.Errorf("without -v: %+v", r)
	}
	// -v before the verb is uftrace's global --verbose: the same as after.
	// (The int3 engine: the fast one copies loopy whole,
	// TestRecordShortFunctions.)
	for _, args := range [][]string{{"record", "-v", "--engine", "int3"}, {"-v", "record", "--engine", "int3"}} {
		r = runCmd(t, tmp, rtraceBin, append(args, "-d", "R", "--", prog)...)
		if !regexp.MustCompile(`(?m)^  odd: .*jrcxz has only a rel8 form`).MatchString(strings.ToLower(r.stderr)) {
			t.Errorf("%v does not explain the skip:\n%s", args, r.stderr)
		}
		if !regexp.MustCompile(`(?m)^  loopy: a branch lands inside the detour jump$`).MatchString(r.stderr) {
			t.Errorf("%v does not say why loopy keeps an int3 entry:\n%s", args, r.stderr)
		}
	}
	if r := runCmd(t, tmp, rtraceBin, "-v", "postproc", "-i", "R"); r.code != 2 || !strings.Contains(r.stderr, "postproc has no verbose output") {
		t.Errorf("-v postproc: %+v, want a refusal", r)
	}
	if got, want := strings.Join(tree(replay(t, filepath.Join(tmp, "R"))), ""), "main()\n  even()\n    loopy()\n  printf()\n"; got != want {
		t.Errorf("tree %q, want %q", got, want)
	}
	// -O2 keeps functions too short for a detour jump: -v lists them.
	small := testutil.BuildC(t, "chain.c", "-O2", "-fno-inline")
	r = runCmd(t, tmp, rtraceBin, "record", "-v", "-d", "R", "--", small)
	if !regexp.MustCompile(`(?m)int3 entry instead of a detour jump:\n(  \w+: .*too short.*\n)+`).MatchString(r.stderr) {
		t.Errorf("-v does not list the int3 entries:\n%s", r.stderr)
	}
}

// The trace's info holds rtrace's real command line, flags included,
// written as uftrace writes its own: words joined by spaces, newlines as
// spaces, double quotes escaped (uftrace dump --chrome puts it in JSON).
func TestRecordInfoCmdline(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	prog := build(t, "chain.c", variants[0], false, nil)
	pg := build(t, "chain.c", variants[0], true, nil)
	tmp := t.TempDir()
	args := []string{"an arg", `say "hi"`, "two\nlines", "", "it's"}
	runCmd(t, tmp, uft, append([]string{"record", "-d", "U", pg}, args...)...)
	runCmd(t, tmp, rtraceBin, append([]string{"record", "-q", "-D", "3", "-d", "R", "--", prog}, args...)...)
	cmdline := func(dir, prefix string) string {
		info := testutil.Run(t, tmp, uft, "info", "-d", dir)
		_, line, _ := strings.Cut(info, "# cmdline             : ")
		line, _, _ = strings.Cut(line, "\n")
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			t.Errorf("%s: cmdline %q does not start with %q", dir, line, prefix)
		}
		return rest
	}
	want := cmdline("U", uft+" record -d U "+pg)
	got := cmdline("R", rtraceBin+" record -q -D 3 -d R -- "+prog)
	if got != want || !strings.Contains(got, `say \"hi\"`) {
		t.Errorf("cmdline after the program: uftrace %q, rtrace %q", want, got)
	}
	// And uftrace dump --chrome, which writes it into JSON, stays valid.
	out := testutil.Run(t, tmp, uft, "dump", "--chrome", "-d", "R")
	if !json.Valid([]byte(out)) {
		t.Errorf("uftrace dump --chrome is not JSON:\n%.600s", out)
	}
}

// Under a terminal, rtrace never erases nor joins the program's output:
// record shows no live line (the program writes to rtrace's own terminal),
// only a summary line after the program's output; -q not even that.
func TestStatusLineTerminal(t *testing.T) {
	prog := testutil.BuildC(t, "prompt.c", "-O0")
	want := "name? 5999000\r\ndone\r\n" // the terminal turns \n into \r\n
	for _, quiet := range []bool{false, true} {
		t.Run(fmt.Sprintf("quiet=%v", quiet), func(t *testing.T) {
			m, s := testutil.OpenPty(t)
			defer m.Close()
			args := []string{"record", "-d", filepath.Join(t.TempDir(), "R")}
			if quiet {
				args = append(args, "-q")
			}
			cmd := exec.Command(rtraceBin, append(args, "--", prog)...)
			cmd.Stdout, cmd.Stderr = s, s
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			s.Close()
			tty, _ := io.ReadAll(m) // EIO once every writer is gone
			if err := cmd.Wait(); err != nil {
				t.Fatalf("record: %v\n%q", err, tty)
			}
			got := string(tty)
			if strings.Contains(got, "\x1b") || strings.Contains(strings.ReplaceAll(got, "\r\n", ""), "\r") {
				t.Errorf("escape sequences or carriage returns on the terminal: %q", got)
			}
			summary := regexp.MustCompile(`^rtrace: \d+ records, 0 lost, in [\d.]+m?s; trace saved in \S+/R\r\n$`)
			rest, ok := strings.CutPrefix(got, want)
			switch {
			case !ok:
				t.Errorf("the program's output is not intact at the start of the terminal: %q", got)
			case quiet && rest != "":
				t.Errorf("-q: rtrace wrote %q", rest)
			case !quiet && !summary.MatchString(rest):
				t.Errorf("after the program's output: %q, want one summary line", rest)
			}
		})
	}
}

// With --srcline, replay --srcline shows the same source lines as for
// uftrace's own recording of the -pg build: rtrace's .dbg file is read.
// Without it, neither writes a .dbg file.
func TestRecordSrcline(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	tmp := t.TempDir()
	plain := build(t, "chain.c", variants[0], false, nil)
	pg := build(t, "chain.c", variants[0], true, nil)
	runCmd(t, tmp, uft, "record", "--no-libcall", "--no-event", "-d", "U0", pg)
	runCmd(t, tmp, rtraceBin, "record", "--no-libcall", "-q", "-d", "R0", "--", plain)
	for _, dir := range []string{"U0", "R0"} {
		if dbg, _ := filepath.Glob(filepath.Join(tmp, dir, "*.dbg")); len(dbg) > 0 {
			t.Errorf("%s: .dbg files without --srcline: %v", dir, dbg)
		}
	}
	runCmd(t, tmp, uft, "record", "--srcline", "--no-libcall", "--no-event", "-d", "U", pg)
	runCmd(t, tmp, rtraceBin, "record", "--srcline", "--no-libcall", "-q", "-d", "R", "--", plain)
	want := testutil.Run(t, tmp, uft, "replay", "--no-pager", "--srcline", "-f", "none", "-d", "U")
	got := testutil.Run(t, tmp, uft, "replay", "--no-pager", "--srcline", "-f", "none", "-d", "R")
	if !strings.Contains(got, "d(); /* "+filepath.Join(testutil.Root(), "testdata", "chain.c")+":4 */") || got != want {
		t.Errorf("--srcline:\n%s\nuftrace's own:\n%s", got, want)
	}
}

// pthread_exit two traced frames deep: its forced unwind must get past the
// hijacked return addresses, or work()'s cleanup never runs. uftrace -pg
// loses that cleanup itself (it prints nothing), so the tree is written
// out: done() runs under work() as the unwind passes it, and its printf()
// (a tail call at -O2) under it.
func TestRecordPthreadExit(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			prog := build(t, "pexit.c", v, false, []string{"-pthread", "-fexceptions"})
			tmp := t.TempDir()
			got := runCmd(t, tmp, rtraceBin, "record", "-q", "-d", "R", "--", prog)
			bare := runCmd(t, tmp, prog)
			if got != bare || !strings.Contains(bare.stdout, "cleanup 1") {
				t.Errorf("under rtrace the program printed/exited differently:\nwithout: %+v\nwith:    %+v", bare, got)
			}
			trees := tree(replay(t, filepath.Join(tmp, "R")))
			want := []string{"main()\n  pthread_create()\n  pthread_join()\n  leaf()\n  printf()\n",
				"start()\n  work()\n    quit()\n      leaf()\n      pthread_exit()\n    done()\n      printf()\n"}
			if strings.Join(trees, "|") != strings.Join(want, "|") {
				t.Errorf("trees\n%q\nwant\n%q", trees, want)
			}
		})
	}
}

// sideBySide records the -pg build with `uftrace record --no-libcall
// --no-event` into tmp/U and the plain build with `rtrace record
// --no-libcall -q` into
// tmp/R, both with opts, and returns rtrace's run and the `replay -f none`
// of each: uftrace's, then rtrace's.
func sideBySide(t *testing.T, tmp, pg, plain string, opts ...string) (r run, want, got string) {
	t.Helper()
	uft := testutil.RequireTool(t, "uftrace")
	runCmd(t, tmp, uft, append(append([]string{"record", "--no-libcall", "--no-event", "-d", "U"}, opts...), pg)...)
	r = runCmd(t, tmp, rtraceBin, append(append([]string{"record", "--no-libcall", "-q", "-d", "R"}, opts...), "--", plain)...)
	if r.stderr != "" {
		t.Logf("rtrace record %v said: %s (exit %d)", opts, r.stderr, r.code)
	}
	want = testutil.Run(t, tmp, uft, "replay", "--no-pager", "-f", "none", "-d", "U")
	got = testutil.Run(t, tmp, uft, "replay", "--no-pager", "-f", "none", "-d", "R")
	sameViews(t, filepath.Join(tmp, "U"), filepath.Join(tmp, "R"))
	return r, want, got
}

// argSpecs are the -A/-R options of TestRecordArguments: every spec kind.
var argSpecs = []string{
	"-A", "ints@arg1/i8,arg2/i16,arg3/i32,arg4,arg5/u32",
	"-A", "chars@arg1/c,arg2/c",
	"-A", "strs@arg1/s,arg2/s,arg3/s",
	"-A", "floats@fparg1/32,fparg2,arg1,fparg3/64",
	"-A", "half@fparg1/32",
	"-A", "ptr@arg1/x",
	"-A", "many@arg1,arg2,arg3,arg4,arg5,arg6,arg7,arg8",
	"-A", "mixed@arg1/i32,fparg1,arg5/i32,arg6/i32,fparg3",
	"-A", "scale@arg1",
	"-A", "name@arg1/d32",
	"-R", "ints@retval/i32", "-R", "chars@retval/c", "-R", "strs@retval/u",
	"-R", "scale@retval/f64", "-R", "half@retval/f32", "-R", "ptr@retval/p",
	"-R", "many@retval", "-R", "name@retval/s",
	"-R", "^n.g$@retval/i32",
}

// -A/-R record what uftrace records of the -pg build with the same specs:
// replay shows the same values. (uftrace 0.13 -pg shows a double return
// value as 0.000000 when the function also has fparg specs, so floats()
// and mixed() have no -R here; scale() checks double returns.)
func TestRecordArguments(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			plain := build(t, "args.c", v, false, nil)
			pg := build(t, "args.c", v, true, nil)
			tmp := t.TempDir()
			r, want, got := sideBySide(t, tmp, pg, plain, argSpecs...)
			if bare := runCmd(t, tmp, plain); r != bare {
				t.Errorf("under rtrace the program printed/exited differently:\nwithout: %+v\nwith:    %+v", bare, r)
			}
			if got != want || !strings.Contains(got, `strs("hello", "NULL", "a string`) {
				t.Errorf("replay differs\nuftrace -pg:\n%s\nrtrace:\n%s", want, got)
			}
			for _, cmd := range [][]string{{"report"}, {"dump"}, {"graph"}} {
				testutil.Run(t, tmp, uft, append(cmd, "--no-pager", "-d", "R")...)
			}
		})
	}
}

// A malformed spec is refused before the program runs, naming the spec.
func TestRecordBadArgSpec(t *testing.T) {
	prog := testutil.BuildC(t, "chain.c", "-O0")
	tmp := t.TempDir()
	for _, c := range []struct{ flag, spec, want string }{
		{"-A", "a@arg1/z", "unknown format"},
		{"-A", "a@argx", "bad argument number"},
		{"-A", "a(", "missing closing )"},
		{"-R", "@retval", "no function"},
		{"-A", "(@arg1", "missing closing )"},
	} {
		r := runCmd(t, tmp, rtraceBin, "record", c.flag, c.spec, "--", prog)
		if r.code != 2 || !strings.Contains(r.stderr, c.spec) || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
			t.Errorf("%s %s: %+v, want exit 2 naming the spec and %q", c.flag, c.spec, r, c.want)
		}
	}
}

// A double return value of a function with float arguments: uftrace -pg
// shows 0.000000 there, rtrace reads xmm0 at the return.
func TestRecordFloatReturn(t *testing.T) {
	prog := testutil.BuildC(t, "args.c", "-O0")
	tmp := t.TempDir()
	runCmd(t, tmp, rtraceBin, "record", "-q", "-d", "R", "-A", "floats@fparg1/32,fparg2", "-R", "floats@retval/f64", "--", prog)
	got := testutil.Run(t, tmp, testutil.RequireTool(t, "uftrace"), "replay", "--no-pager", "-f", "none", "-d", "R")
	if !strings.Contains(got, "floats(1.500000, -2.250000) = 10000000003.625000;") {
		t.Errorf("replay:\n%s", got)
	}
}

// -a types every function's arguments and return value from DWARF, as
// uftrace -a does for the -pg build: replay shows the same calls and values.
func TestRecordAutoArgs(t *testing.T) {
	for _, v := range variants[:2] {
		t.Run(v.name, func(t *testing.T) {
			plain := build(t, "args.c", v, false, nil)
			pg := build(t, "args.c", v, true, nil)
			tmp := t.TempDir()
			_, want, got := sideBySide(t, tmp, pg, plain, "-a")
			// uftrace -pg records some double return values as 0 (floats()'s,
			// see TestRecordFloatReturn; on some machines mixed()'s too):
			// compare the lines it shows so by their arguments, and check
			// rtrace's values.
			fix := regexp.MustCompile(`(?m)^(  (?:floats|mixed)\(.*\)) = .*;$`)
			for _, line := range []string{
				"  floats(1.500000, -2.250000, 7, 10000000000.000000) = 10000000003.625000;",
				"  mixed(1, 2.500000, 3, 4.500000, 5, 6, 7, 8, 9.500000) = 46.500000;",
			} {
				if !strings.Contains(got, line) {
					t.Errorf("no %q in:\n%s", line, got)
				}
			}
			if fix.ReplaceAllString(got, "$1") != fix.ReplaceAllString(want, "$1") || !strings.Contains(got, `name(1) = "odd"`) {
				t.Errorf("replay differs\nuftrace -pg -a:\n%s\nrtrace -a:\n%s", want, got)
			}
		})
	}
}

// -t keeps the calls that last at least the threshold, as uftrace -t does:
// slow() sleeps 20 ms, everything else returns at once (even under rtrace).
func TestRecordTimeFilter(t *testing.T) {
	plain := build(t, "slow.c", variants[0], false, nil)
	pg := build(t, "slow.c", variants[0], true, nil)
	tmp := t.TempDir()
	r, want, got := sideBySide(t, tmp, pg, plain, "-t", "5ms")
	if r.code != 0 || r.stdout != "slow 12\n" {
		t.Fatalf("rtrace: %+v", r)
	}
	if got != want || got != "main() {\n  slow();\n  slow();\n} /* main */\n" {
		t.Errorf("-t 5ms:\nuftrace:\n%s\nrtrace:\n%s", want, got)
	}
	// As in uftrace, a bare number is nanoseconds; an unknown unit is refused.
	r = runCmd(t, tmp, rtraceBin, "record", "-q", "-t", "5", "-d", "R5", "--", plain)
	if r.code != 0 || r.stdout != "slow 12\n" {
		t.Errorf("-t 5 (ns): %+v", r)
	}
	r = runCmd(t, tmp, rtraceBin, "record", "-t", "5h", "--", plain)
	if r.code != 2 || !strings.Contains(r.stderr, `-t: time "5h": unknown unit`) || r.stdout != "" {
		t.Errorf("-t with an unknown unit: %+v", r)
	}
}

// C++: -F and -A patterns match the short demangled names uftrace shows
// (geo::Shape::area, count), and /S reads a std::string's characters.
func TestRecordCxxNames(t *testing.T) {
	for _, c := range []struct {
		src  string
		opts []string
	}{
		{"cxx.cc", []string{"-F", "geo::Shape::area"}},
		{"cxx.cc", []string{"-N", "^geo::twice$"}},
		{"strarg.cc", []string{"-A", "count@arg1/S", "-R", "count@retval/i32"}},
	} {
		t.Run(c.src+" "+strings.Join(c.opts, " "), func(t *testing.T) {
			plain := build(t, c.src, variants[0], false, nil)
			pg := build(t, c.src, variants[0], true, nil)
			tmp := t.TempDir()
			_, want, got := sideBySide(t, tmp, pg, plain, c.opts...)
			if got != want || len(got) < 10 {
				t.Errorf("uftrace:\n%s\nrtrace:\n%s", want, got)
			}
		})
	}
}

// A static executable without DWARF: every function is traced, libc's
// included, and glibc's jumps from one function into the first bytes of
// another (__mempcpy_* into __memcpy_*+3) keep working.
//
// Its C library runs traced functions before it sets up TLS: the fast
// engine's stubs then find key 0 whether they read the %fs base with
// rdfsbase or read the word at %fs:0 (as on a CPU without FSGSBASE, where
// this crashed; RTRACE_NO_RDFSBASE=1 takes that path here).
func TestRecordStaticNoDWARF(t *testing.T) {
	prog := testutil.BuildC(t, "chain.c", "-O2", "-static")
	for _, noRdfsbase := range []string{"", "1"} {
		t.Run("RTRACE_NO_RDFSBASE="+noRdfsbase, func(t *testing.T) {
			t.Setenv("RTRACE_NO_RDFSBASE", noRdfsbase)
			tmp := t.TempDir()
			got := runCmd(t, tmp, rtraceBin, "record", "-q", "-d", "R", "--", prog)
			bare := runCmd(t, tmp, prog)
			if got != bare {
				t.Fatalf("under rtrace the program printed/exited differently:\nwithout: %+v\nwith:    %+v", bare, got)
			}
			// A return value recorded at a stop, of a function called
			// before TLS exists: rtrace's key for the thread is the stubs'.
			if got := runCmd(t, tmp, rtraceBin, "record", "-q", "-d", "RV", "-R", "_dl_early_allocate@retval/x", "--", prog); got != bare {
				t.Fatalf("with -R on a function called before TLS, the program printed/exited differently:\nwithout: %+v\nwith:    %+v", bare, got)
			}
			out := testutil.Run(t, tmp, testutil.RequireTool(t, "uftrace"), "replay", "--no-pager", "-f", "none", "-d", "R")
			if !strings.Contains(out, "  main() {\n") || !strings.Contains(out, "printf() {") {
				t.Errorf("replay does not show main and libc's printf:\n%.2000s", out)
			}
		})
	}
}

// -t in a forked child: entries still held when the child was forked are
// the parent's to write; the child writes neither them nor their exits.
func TestRecordTimeFilterFork(t *testing.T) {
	prog := build(t, "fork.c", variants[0], false, nil)
	tmp := t.TempDir()
	r := runCmd(t, tmp, rtraceBin, "record", "-q", "-t", "1s", "-d", "R", "--", prog)
	if r.code != 0 {
		t.Fatalf("rtrace: %+v", r)
	}
	entries, exits := testutil.CountRecords(t, filepath.Join(tmp, "R"))
	if entries != 0 || exits != 0 {
		t.Errorf("-t 1s on calls of microseconds: %d entries, %d exits, want none", entries, exits)
	}
}

// A plugin loaded with dlopen: -P FUNC@LIB traces its functions once the
// loader's rendezvous reports it, with a DLOP line and its .sym, as uftrace
// -P does (uftrace's own dynamic patching is the oracle; it misses small
// functions at -O2, so it records the -O0 build). Loaded, closed and
// loaded again, the plugin is traced each time: uftrace 0.13 is not, so
// that tree is written out.
func TestRecordDlopen(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	plugin := testutil.BuildC(t, "plugin.c", "-g", "-O0", "-shared", "-fPIC")
	pat := ".@" + filepath.Base(plugin)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			tmp := t.TempDir()
			o0 := build(t, "dlopen.c", variant{"O0", append([]string{"-O0"}, v.flags[len(v.flags)-2:]...)}, false, []string{"-ldl"})
			runCmd(t, tmp, uft, "record", "--no-event", "-d", "U", "-P", ".", "-P", pat, o0, plugin)
			want := tree(replay(t, filepath.Join(tmp, "U")))
			prog := build(t, "dlopen.c", v, false, []string{"-ldl"})
			r := runCmd(t, tmp, rtraceBin, "record", "-q", "-d", "R", "-P", ".", "-P", pat, "--", prog, plugin)
			if bare := runCmd(t, tmp, prog, plugin); r != bare {
				t.Errorf("under rtrace the program printed/exited differently:\nwithout: %+v\nwith:    %+v", bare, r)
			}
			if got := tree(replay(t, filepath.Join(tmp, "R"))); strings.Join(got, "") != strings.Join(want, "") {
				t.Errorf("call trees differ\nuftrace -P:\n%s\nrtrace:\n%s", strings.Join(want, ""), strings.Join(got, ""))
			}
			runCmd(t, tmp, rtraceBin, "record", "-q", "-d", "R2", "-P", ".", "-P", pat, "-E", "plugin:*", "--", prog, plugin, "3")
			got := strings.Join(tree(replay(t, filepath.Join(tmp, "R2"))), "")
			// The plugin's USDT probe fires inside plug_run in each load.
			ev := testutil.Run(t, tmp, uft, "replay", "--no-pager", "-f", "none", "-d", "R2")
			if n := strings.Count(ev, "plug_run() {\n      /* plugin:run */\n"); n != 3 {
				t.Errorf("want plugin:run inside plug_run 3 times:\n%s", ev)
			}
			usdt, _ := os.ReadFile(filepath.Join(tmp, "R2", "usdt.txt"))
			if n := strings.Count(string(usdt), " plugin:run "); n != 3 {
				t.Errorf("usdt.txt: want 3 plugin:run hits:\n%s", usdt)
			}
			block := "  use()\n    dlopen()\n    dlsym()\n    plug_run()\n      plug_leaf()\n    dlclose()\n"
			if n := strings.Count(got, block); n != 3 {
				t.Errorf("want the plugin traced in each of 3 loads (%q), got:\n%s", block, got)
			}
			task, err := os.ReadFile(filepath.Join(tmp, "R2", "task.txt"))
			if err != nil || strings.Count(string(task), "DLOP ") != 3 || !strings.Contains(string(task), filepath.Base(plugin)) {
				t.Errorf("task.txt: want 3 DLOP lines naming the plugin (%v):\n%s", err, task)
			}
		})
	}
}

// A plugin loaded with dlopen is traced like the executable: without -P,
// all its functions, as uftrace traces a -pg plugin of a -pg program; with
// -U, not those it names. (A library of the system's loaded with dlopen is
// not: libargs.c's libm, TestRecordLibcArgs.)
func TestRecordDlopenPlugin(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	plugin := testutil.BuildC(t, "plugin.c", "-g", "-O0", "-shared", "-fPIC")
	pgPlugin := testutil.BuildC(t, "plugin.c", "-g", "-O0", "-shared", "-fPIC", "-pg")
	prog := build(t, "dlopen.c", variants[0], false, []string{"-ldl"})
	pg := build(t, "dlopen.c", variants[0], true, []string{"-ldl"})
	tmp := t.TempDir()
	runCmd(t, tmp, uft, "record", "--no-event", "-d", "U", pg, pgPlugin, "2")
	want := uftrace.WithoutPgStartup(tree(replay(t, filepath.Join(tmp, "U"))))
	r := runCmd(t, tmp, rtraceBin, "record", "-q", "-d", "R", "--", prog, plugin, "2")
	got := tree(replay(t, filepath.Join(tmp, "R")))
	if r.code != 0 || strings.Join(got, "") != strings.Join(want, "") || !strings.Contains(strings.Join(got, ""), "plug_leaf()") {
		t.Errorf("exit %d; call trees differ\nuftrace (-pg plugin):\n%s\nrtrace:\n%s", r.code, strings.Join(want, ""), strings.Join(got, ""))
	}
	runCmd(t, tmp, rtraceBin, "record", "-q", "-d", "R2", "-U", "plug_leaf", "--", prog, plugin)
	if got := strings.Join(tree(replay(t, filepath.Join(tmp, "R2"))), ""); !strings.Contains(got, "plug_run()") || strings.Contains(got, "plug_leaf") {
		t.Errorf("-U plug_leaf: want plug_run without plug_leaf:\n%s", got)
	}
}

// --nest-libcall: the calls a library makes through its own PLT show under
// the library function, as uftrace --nest-libcall shows them, those of a
// function the library exports itself too; without it
// only the executable's calls show.
func TestRecordNestLibcall(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	lib := testutil.BuildC(t, "nestlib.c", "-g", "-O0", "-shared", "-fPIC")
	link := []string{"-L" + filepath.Dir(lib), "-l:" + filepath.Base(lib), "-Wl,-rpath," + filepath.Dir(lib)}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			tmp := t.TempDir()
			plain, pg := build(t, "nest.c", v, false, link), build(t, "nest.c", v, true, link)
			for _, nest := range []bool{true, false} {
				opt := fmt.Sprintf("--nest-libcall=%v", nest)
				uopts := []string{"record", "--no-event", "-d", "U", pg}
				rec := []string{"record", "-q", "-d", "R", "--", plain}
				if nest {
					uopts = append([]string{"record", "--nest-libcall"}, uopts[1:]...)
					rec = append([]string{"record", "--nest-libcall"}, rec[1:]...)
				}
				runCmd(t, tmp, uft, uopts...)
				r := runCmd(t, tmp, rtraceBin, rec...)
				if r.code != 0 || r.stdout != "nest 7\n" {
					t.Errorf("%s: %+v", opt, r)
				}
				want, got := uftrace.WithoutPgStartup(tree(replay(t, filepath.Join(tmp, "U")))), tree(replay(t, filepath.Join(tmp, "R")))
				if strings.Join(got, "") != strings.Join(want, "") {
					t.Errorf("%s: call trees differ\nuftrace:\n%s\nrtrace:\n%s", opt, strings.Join(want, ""), strings.Join(got, ""))
				}
				if nest && (!strings.Contains(strings.Join(got, ""), "    getpid()\n") || !strings.Contains(strings.Join(got, ""), "    nest_helper()\n")) {
					t.Errorf("--nest-libcall: the library's getpid() or nest_helper() call is missing:\n%s", strings.Join(got, ""))
				}
			}
		})
	}
}

// USDT probes (-E): the function tree is uftrace's (uftrace 0.13 records
// none of these probes itself, so the events are written out), each hit is
// an EVENT inside the function that fired it, app:guarded fires only
// because rtrace bumped its semaphore, and usdt.txt has the decoded
// arguments: stack slots at -O0, registers at -O2, immediates, a char. A
// symbol operand (sink(%rip) at -O2) is shown as ? with one warning.
func TestRecordUSDT(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			tmp := t.TempDir()
			plain, pg := build(t, "usdt.c", v, false, nil), build(t, "usdt.c", v, true, nil)
			list := runCmd(t, tmp, rtraceBin, "record", "--list-events", plain)
			for _, want := range []string{"app:guarded\t", "(semaphore)\n", "app:step\t", "app:start\t\n", "app:done\t-4@$-5\n"} {
				if !strings.Contains(list.stdout, want) {
					t.Errorf("--list-events: no %q in\n%s", want, list.stdout)
				}
			}
			if c := strings.Count(list.stdout, "(semaphore)"); c != 1 || list.code != 0 {
				t.Errorf("--list-events: exit %d, %d semaphores:\n%s", list.code, c, list.stdout)
			}
			want, err := uftraceTree(t, tmp, uft, pg, nil)
			if err != nil {
				t.Fatal(err)
			}
			r := runCmd(t, tmp, rtraceBin, "record", "-d", "R", "-E", "app:*", "--", plain)
			if r.code != 0 || r.stdout != "usdt 6\n" {
				t.Fatalf("rtrace: %+v", r)
			}
			if got := tree(replay(t, filepath.Join(tmp, "R"))); strings.Join(got, "") != strings.Join(want, "") {
				t.Errorf("call trees differ\nuftrace -pg:\n%s\nrtrace:\n%s", strings.Join(want, ""), strings.Join(got, ""))
			}
			out := testutil.Run(t, tmp, uft, "replay", "--no-pager", "-f", "none", "-d", "R")
			var events []string
			for _, line := range strings.Split(out, "\n") {
				if strings.Contains(line, "/* app:") {
					events = append(events, line)
				}
			}
			hit := []string{"    /* app:step */", "    /* app:guarded */"}
			wantEv := append(append(append(append([]string{"  /* app:start */"}, hit...), hit...), hit...), "  /* app:done */", "  /* app:global */")
			if strings.Join(events, "\n") != strings.Join(wantEv, "\n") {
				t.Errorf("events in replay:\n%s\nwant\n%s\n(replay:\n%s)", strings.Join(events, "\n"), strings.Join(wantEv, "\n"), out)
			}
			b, err := os.ReadFile(filepath.Join(tmp, "R", "usdt.txt"))
			if err != nil {
				t.Fatal(err)
			}
			var hits []string
			var tag string
			for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n")[1:] {
				f := strings.Fields(line) // time tid name args...
				if len(f) < 3 {
					t.Fatalf("usdt.txt line %q", line)
				}
				if f[2] == "app:step" && len(f) == 6 {
					if tag == "" {
						tag = f[5]
					}
					if f[5] != tag || tag == "0x0" {
						t.Errorf("step's string pointer %s, earlier %s", f[5], tag)
					}
					f = f[:5]
				}
				hits = append(hits, strings.Join(f[2:], " "))
			}
			wantHits := []string{"app:start", "app:step 0 0", "app:guarded 0 97", "app:step 1 0", "app:guarded 1 98",
				"app:step 2 2", "app:guarded 2 99", "app:done -5"}
			if strings.Join(hits[:len(hits)-1], "|") != strings.Join(wantHits, "|") {
				t.Errorf("usdt.txt hits:\n%s\nwant\n%s", strings.Join(hits, "\n"), strings.Join(wantHits, "\n"))
			}
			last := hits[len(hits)-1]
			sym := strings.Contains(r.stderr, "probe app:global: argument 1: symbol operand sink(%rip)")
			if !(last == "app:global 0 7" && !sym || last == "app:global ? 7" && sym && strings.Count(r.stderr, "warning") == 1) {
				t.Errorf("app:global hit %q, stderr %q", last, r.stderr)
			}
		})
	}
}

// A clone(CLONE_VM) child shares its parent's memory and TLS: the fast
// engine cannot tell their calls apart, so it stops recording in that
// memory and says so; the program computes as without rtrace.
func TestRecordCloneVM(t *testing.T) {
	prog := testutil.BuildC(t, "clonevm.c", "-O2")
	tmp := t.TempDir()
	bare := runCmd(t, tmp, prog)
	r := runCmd(t, tmp, rtraceBin, "record", "-q", "--engine", "fast", "-d", "R", "--", prog)
	if r.code != 0 || r.stdout != bare.stdout || bare.code != 0 {
		t.Errorf("under rtrace: %+v, without: %+v", r, bare)
	}
	if !strings.Contains(r.stderr, "shares its memory with a child (clone CLONE_VM without CLONE_THREAD)") {
		t.Errorf("no word of the shared memory:\n%s", r.stderr)
	}
}

// Only the innermost call's return address is rtrace's while it runs, as
// uftrace's auto-recover leaves it: testdata/recover.c reads its callers'
// return addresses through the frame pointers and prints where they point,
// as it does without rtrace, with or without -T FUNC@recover (nothing more
// to do), and the calls are recorded as uftrace records the -pg build.
func TestRecordRecover(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	plain := testutil.BuildC(t, "recover.c", "-O0", "-fno-omit-frame-pointer")
	pg := testutil.BuildC(t, "recover.c", "-O0", "-fno-omit-frame-pointer", "-pg")
	tmp := t.TempDir()
	want, err := uftraceTree(t, tmp, uft, pg, nil)
	if err != nil {
		t.Fatal(err)
	}
	bare := runCmd(t, tmp, plain)
	if bare.stdout != "caller's return in main, grandcaller's in main\n" {
		t.Fatalf("without rtrace: %+v", bare)
	}
	for _, engine := range engines {
		for _, opts := range [][]string{nil, {"-T", "callers_return@recover"}} {
			dir := "R-" + engine
			os.RemoveAll(filepath.Join(tmp, dir))
			got := runCmd(t, tmp, rtraceBin, append(append([]string{"record", "-q", "--engine", engine, "-d", dir}, opts...), "--", plain)...)
			if got != bare {
				t.Errorf("%s %v: under rtrace the program printed/exited differently:\nwithout: %+v\nwith:    %+v", engine, opts, bare, got)
			}
			if tr := tree(replay(t, filepath.Join(tmp, dir))); strings.Join(tr, "") != strings.Join(want, "") {
				t.Errorf("%s %v: trees\n%s\nwant\n%s", engine, opts, strings.Join(tr, ""), strings.Join(want, ""))
			}
		}
	}
}

// Jumps rtrace cannot follow (testdata/jumps.c) leave frames on its shadow
// stack whose slots are dead: nothing is written there (auto-recover and
// re-hooking only touch slots above the live one), and the program runs
// on as without rtrace. (uftrace -pg loses the calls after the second jump:
// no oracle here.)
func TestRecordDeadFrames(t *testing.T) {
	for _, v := range variants {
		prog := build(t, "jumps.c", v, false, nil)
		tmp := t.TempDir()
		bare := runCmd(t, tmp, prog)
		if bare.stdout != "jumps 7 7\n" {
			t.Fatalf("%s: without rtrace: %+v", v.name, bare)
		}
		for _, engine := range engines {
			for _, opts := range [][]string{nil, {"--no-libcall"}} {
				dir := "R-" + engine + strings.Join(opts, "")
				got := runCmd(t, tmp, rtraceBin, append(append([]string{"record", "-q", "--engine", engine, "-d", dir}, opts...), "--", prog)...)
				if got != bare {
					t.Errorf("%s %s %v: under rtrace the program printed/exited differently:\nwithout: %+v\nwith:    %+v", v.name, engine, opts, bare, got)
				}
				if out := replay(t, filepath.Join(tmp, dir)); strings.Count(out, "third(") != 2 {
					t.Errorf("%s %s %v: want two calls of third():\n%s", v.name, engine, opts, out)
				}
			}
		}
	}
}

// A destructor run from a landing pad (testdata/dtorcalls.cc): its callee
// e() returns, and its EXIT is recorded then, before f() is called; were
// e's caller's slot left with its real return address while the exception
// unwinds, e's return would go unseen until f's entry closed it, at f's
// time.
func TestRecordDestructorReturns(t *testing.T) {
	prog := testutil.BuildC(t, "dtorcalls.cc", "-O0", "-g")
	for _, engine := range engines {
		tmp := t.TempDir()
		if r := runCmd(t, tmp, rtraceBin, "record", "-q", "--engine", engine, "-d", "R", "--", prog); r.stdout != "dtorcalls 44 10\n" {
			t.Fatalf("%s: %+v", engine, r)
		}
		dump := testutil.Run(t, tmp, testutil.RequireTool(t, "uftrace"), "dump", "--no-pager", "-d", "R")
		m := regexp.MustCompile(`(?m)^(\d+\.\d+) +\d+: \[exit \] e\(.*\n(?:.*\n)*?(\d+\.\d+) +\d+: \[entry\] f\(`).FindStringSubmatch(dump)
		if m == nil {
			t.Fatalf("%s: no exit of e() then entry of f():\n%s", engine, dump)
		}
		ns := func(s string) int64 { // seconds.nanoseconds
			n, _ := strconv.ParseInt(strings.Replace(s, ".", "", 1), 10, 64)
			return n
		}
		if ns(m[1]) >= ns(m[2]) {
			t.Errorf("%s: e() exits at %s, f() enters at %s: e's return was not seen", engine, m[1], m[2])
		}
	}
}
