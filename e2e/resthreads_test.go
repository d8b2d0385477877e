package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"rtrace/internal/testutil"
)

// resModes are the ways rtrace records resource calls: the int3 engine at
// stops, the fast engine in the process, and the fast engine at stops
// with rtrace's walker (RTRACE_RES_UNWIND=remote).
var resModes = []struct{ name, engine, unwind string }{
	{"int3", "int3", ""}, {"fast", "fast", ""}, {"fast-remote", "fast", "remote"},
}

// recordRes records prog's resource calls of mods in mode m, in a new
// directory; it fails the test unless rtrace and the program exit 0.
func recordRes(t *testing.T, m struct{ name, engine, unwind string }, opts []string, prog string, args ...string) (tmp string, r run) {
	t.Helper()
	tmp = t.TempDir()
	testutil.KeepOnFailure(t, tmp)
	cmdArgs := append([]string{"record", "-q", "--engine=" + m.engine, "--start", "-o", "D"}, opts...)
	r = runCmdEnv(t, tmp, []string{"RTRACE_RES_UNWIND=" + m.unwind}, rtraceBin, append(append(cmdArgs, prog), args...)...)
	if r.code != 0 {
		t.Fatalf("record: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	noResWarnings(t, r.stderr)
	return tmp, r
}

// recordOneRaw is recordRes of a program that writes one raw trace: its
// directory and that file.
func recordOneRaw(t *testing.T, m struct{ name, engine, unwind string }, opts []string, prog string, args ...string) (tmp, raw string) {
	t.Helper()
	tmp, _ = recordRes(t, m, opts, prog, args...)
	files := rawFiles(t, filepath.Join(tmp, "D"), ".rtrace")
	if len(files) != 1 {
		t.Fatalf("raw files %v", files)
	}
	return tmp, files[0]
}

// TestResourceThreadsOrder: a block allocated by one thread and released
// by another, and handed back to the first by the allocator, is reported in
// the order it happened: the calls of every thread reach the report in time
// order (the fast engine's rings are merged by their TSC readings), so no
// block is reported leaked. memcheck's view: "All heap blocks were freed"
// but for pthread_create's own (272 bytes, its DTV, "possibly lost").
// Released by free, by operator delete (recorded at its entry, its frame
// kept for its free), by free with --backtrace-all (recorded at its
// return, at its entry's time) and by realloc(p, 0) (a call that releases
// and allocates: its release at its entry's time). At stops (the int3
// engine, RTRACE_RES_UNWIND=remote) realloc is reported at its return:
// another thread's call may come first (docs/FAST-PATH.md).
func TestResourceThreadsOrder(t *testing.T) {
	prog := testutil.BuildC(t, "prodcons.cc", "-O2", "-g", "-pthread")
	for _, c := range []struct {
		how   string
		opts  []string
		stops bool // also at stops
	}{
		{"free", nil, true},
		{"delete", nil, true},
		{"free", []string{"--backtrace-all"}, true},
		{"realloc0", nil, false},
	} {
		for _, m := range resModes {
			if !c.stops && m.name != "fast" {
				continue
			}
			t.Run(strings.Join(append([]string{c.how, m.name}, c.opts...), " "), func(t *testing.T) {
				blocks := 20000
				if m.name != "fast" {
					blocks = 5000 // a stop each call
				}
				tmp, raw := recordOneRaw(t, m, append([]string{"--module", "memory"}, c.opts...), prog, strconv.Itoa(blocks), c.how)
				all := runCmd(t, tmp, rtraceBin, "postproc", "-i", raw).stdout
				if n := countCalls(all, `(malloc|operator new)(<memory>)?\(64\)`); n != blocks {
					t.Fatalf("%d allocations of 64 bytes recorded, want %d", n, blocks)
				}
				rep := runCmd(t, tmp, rtraceBin, "postproc", "-l", "-c", "-i", raw).stdout
				if n := countCalls(rep, `(malloc|operator new)(<memory>)?\(64\)`); n > 0 {
					t.Errorf("%d blocks released by the other thread reported leaked (calls out of order):\n%s", n, clipLines(rep, 30))
				}
			})
		}
	}
}

// TestResourceForkInCall: a process forking inside a resource call (spawn,
// traced with --audit) has a child that returns from the call through
// rtrace's code: the child runs on and exits 0, and each process's trace
// holds the call and its own allocation, with every engine.
func TestResourceForkInCall(t *testing.T) {
	prog := testutil.BuildC(t, "forkres.c", "-O2", "-g")
	for _, m := range resModes {
		t.Run(m.name, func(t *testing.T) {
			tmp, r := recordRes(t, m, []string{"--audit", "spawn", "--module", "memory"}, prog)
			var pid int
			var how string
			var code int
			if _, err := fmt.Sscanf(r.stdout, "child %d %s %d", &pid, &how, &code); err != nil || how != "exited" || code != 0 {
				t.Fatalf("the child did not exit 0: %q", r.stdout)
			}
			for _, f := range rawFiles(t, filepath.Join(tmp, "D"), ".rtrace") {
				size := "111"
				if strings.HasPrefix(filepath.Base(f), strconv.Itoa(pid)+"-") {
					size = "222"
				}
				out := runCmd(t, tmp, rtraceBin, "postproc", "-i", f).stdout
				for _, w := range []string{`spawn(<\w+>)?\(`, `malloc(<memory>)?\(` + size + `\)`} {
					if countCalls(out, w) == 0 {
						t.Errorf("%s lacks %s:\n%s", filepath.Base(f), w, clipLines(out, 20))
					}
				}
			}
		})
	}
}

// TestResourceForkThreads: a forked child exits while a thread of its own
// is allocating: every call of the child, the thread's last ones
// included, is in the child's trace, none in its parent's.
func TestResourceForkThreads(t *testing.T) {
	prog := testutil.BuildC(t, "forkthreads.c", "-O2", "-g", "-pthread")
	for _, m := range resModes {
		t.Run(m.name, func(t *testing.T) {
			tmp, r := recordRes(t, m, []string{"--module", "memory"}, prog)
			var child int
			fmt.Sscanf(r.stdout, "child %d", &child)
			var inChild int
			for _, f := range rawFiles(t, filepath.Join(tmp, "D"), ".rtrace") {
				n := countCalls(runCmd(t, tmp, rtraceBin, "postproc", "-i", f).stdout, `malloc(<memory>)?\(12345\)`)
				if strings.HasPrefix(filepath.Base(f), strconv.Itoa(child)+"-") {
					inChild += n
				} else if n > 0 {
					t.Errorf("%d of the child's calls in %s, another process's trace", n, filepath.Base(f))
				}
			}
			if inChild < 1000 {
				t.Errorf("%d of the child thread's calls in its trace, want 1000 or more", inChild)
			}
		})
	}
}

// TestResourceRebuilt: a program rebuilt at the same path between two runs
// in one traced tree gets the backtraces of its new code (the in-process
// walker's unwind tables are cached by file identity, not path): equal to
// rtrace's walker's.
func TestResourceRebuilt(t *testing.T) {
	v1 := testutil.BuildC(t, "leaky.c", "-O0", "-g")
	v2 := testutil.BuildC(t, "leaky.c", "-O2", "-g", "-fomit-frame-pointer")
	dir := t.TempDir()
	script := filepath.Join(dir, "run.sh")
	prog := filepath.Join(dir, "prog")
	body := fmt.Sprintf("#!/bin/sh\ncp %s %s && %s\nrm -f %s && cp %s %s && %s\n", v1, prog, prog, prog, v2, prog, prog)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	var sets [2]string
	for i, m := range resModes[1:] {
		tmp, _ := recordRes(t, m, []string{"--module", "memory", "--no-randomize-addr"}, "/bin/sh", script)
		// One block per process, in an order that does not depend on
		// the pids (files are named by pid, and pids wrap: pid_max is
		// 32768 on some machines).
		var blocks []string
		for _, f := range rawFiles(t, filepath.Join(tmp, "D"), ".rtrace") {
			var calls []string
			for _, c := range readCalls(t, f) {
				var frames []string
				for _, fr := range c.Frames {
					frames = append(frames, fmt.Sprintf("%#x", fr.Addr))
				}
				calls = append(calls, fmt.Sprintf("%s(%d) %s", c.Name, c.Size, strings.Join(frames, " ")))
			}
			blocks = append(blocks, strings.Join(calls, "\n"))
		}
		slices.Sort(blocks)
		sets[i] = strings.Join(blocks, "\n")
	}
	if !regexp.MustCompile(`malloc\(\d+\) 0x`).MatchString(sets[0]) {
		t.Fatalf("no backtraces recorded:\n%s", clipLines(sets[0], 20))
	}
	if sets[0] != sets[1] {
		t.Errorf("backtraces in the process differ from rtrace's walker's:\n in the process:\n%s\n rtrace's:\n%s", clipLines(sets[0], 40), clipLines(sets[1], 40))
	}
}

// countCalls counts the matches of the regular expression re in a report.
func countCalls(report, re string) int {
	return len(regexp.MustCompile(re).FindAllStringIndex(report, -1))
}

// TestResourceAltStackInFrame: a handler on an alternate stack that lies
// on the thread's own stack, above the frames of the call it interrupted
// (a buffer in main's frame), allocates: those frames are live, not left
// by a jump, and the program runs to its end with every engine.
func TestResourceAltStackInFrame(t *testing.T) {
	prog := testutil.BuildC(t, "altframe.c", "-O2", "-g")
	for _, m := range resModes {
		t.Run(m.name, func(t *testing.T) {
			tmp, r := recordRes(t, m, []string{"--audit", "slow", "--module", "memory"}, prog)
			if strings.TrimSpace(r.stdout) != "hits 100" {
				t.Fatalf("the program printed %q, want hits 100", r.stdout)
			}
			raw := rawFiles(t, filepath.Join(tmp, "D"), ".rtrace")
			out := runCmd(t, tmp, rtraceBin, "postproc", "-i", raw[0]).stdout
			if n := countCalls(out, `slow(<\w+>)?\(`); n != 100 {
				t.Errorf("%d calls of slow recorded, want 100", n)
			}
		})
	}
}

// TestResourceSameSlot: with a function trace (-d), resource calls are
// made at stops; a call at the same place on the stack and depth as one
// that returned is not nested in it: g's malloc(77) is recorded.
func TestResourceSameSlot(t *testing.T) {
	prog := testutil.BuildC(t, "sameslot.c", "-O2", "-g")
	for _, m := range resModes {
		t.Run(m.name, func(t *testing.T) {
			tmp, _ := recordRes(t, m, []string{"--module", "memory", "-d", "U"}, prog)
			raw := rawFiles(t, filepath.Join(tmp, "D"), ".rtrace")
			out := runCmd(t, tmp, rtraceBin, "postproc", "-i", raw[0]).stdout
			for _, size := range []string{"11", "5", "77"} {
				if countCalls(out, `malloc(<memory>)?\(`+size+`\)`) != 1 {
					t.Errorf("malloc(%s) not recorded once:\n%s", size, clipLines(out, 30))
				}
			}
		})
	}
}
