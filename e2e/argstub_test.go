package e2e_test

import (
	"strings"
	"testing"

	"rtrace/internal/testutil"
)

// The fast engine records integer arguments and return values in the
// process (-A/-R through the stubs, docs/FAST-PATH.md "Arguments and
// return values"): those functions keep a detour and cost no stop, the
// others (strings, floats, stack arguments) keep theirs, and replay shows
// the same values as with every function on stops (RTRACE_ARGS=stops).
func TestRecordArgumentsInProcess(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			prog := build(t, "args.c", v, false, nil)
			tmp := t.TempDir()
			rec := func(dir string, env []string, specs ...string) (stderr, replay string) {
				args := append([]string{"record", "-v", "--engine", "fast", "--no-libcall", "-d", dir}, specs...)
				r := runCmdEnv(t, tmp, env, rtraceBin, append(args, "--", prog)...)
				if r.code != 0 || !strings.HasPrefix(r.stdout, "args odd even -5") {
					t.Fatalf("record %v: %+v", specs, r)
				}
				return r.stderr, testutil.Run(t, tmp, uft, "replay", "--no-pager", "-f", "none", "-d", dir)
			}
			stderr, got := rec("S", nil, argSpecs...)
			_, want := rec("T", []string{"RTRACE_ARGS=stops"}, argSpecs...)
			if got != want {
				t.Errorf("replay differs from the values read at stops\nstubs:\n%s\nstops:\n%s", got, want)
			}
			for _, s := range []string{`ints(-3, -300, -70000, 0xfffffffed5fa0e00, 0xee6b2800) = -1000070303;`, `chars('x', 'y') = 'y';`, `ptr(0x1234) = 0x1234;`, `ptr(0x5678) = 0x5678;`, `neg() = -5;`} {
				if !strings.Contains(got, s) {
					t.Errorf("replay lacks %s:\n%s", s, got)
				}
			}
			// Integer registers only: a detour (or an int3 entry for a
			// function too short for one: ptr at -O2, which sends the
			// thread to its stub, as its call through a pointer shows). A string, a float, a stack argument:
			// an int3 entry and stops.
			for _, f := range []string{"ints", "chars", "ptr", "neg"} {
				if strings.Contains(stderr, "  "+f+": its arguments or return value are recorded at a stop") {
					t.Errorf("%s stops for its values:\n%s", f, stderr)
				}
			}
			for _, f := range []string{"strs", "floats", "half", "many", "name"} {
				if !strings.Contains(stderr, "  "+f+": its arguments or return value are recorded at a stop") {
					t.Errorf("%s does not stop for its values:\n%s", f, stderr)
				}
			}
			if !strings.Contains(stderr, "stops at entries and returns for what the stubs do not record") {
				t.Errorf("no count of the stops:\n%s", stderr)
			}
			// With only those, no stop at all.
			stderr, got = rec("I", nil, "-A", "ints@arg1/i8,arg2/i16,arg3/i32,arg4,arg5/u32", "-R", "ints@retval/i32", "-A", "ptr@arg1/x", "-R", "ptr@retval/p", "-R", "^n.g$@retval/i32")
			if strings.Contains(stderr, "stops at entries") || strings.Contains(stderr, "recorded at a stop") {
				t.Errorf("integer registers' values stopped:\n%s", stderr)
			}
			if !strings.Contains(got, `ints(-3, -300, -70000, 0xfffffffed5fa0e00, 0xee6b2800) = -1000070303;`) || !strings.Contains(got, `ptr(0x5678) = 0x5678;`) || !strings.Contains(got, `neg() = -5;`) {
				t.Errorf("replay:\n%s", got)
			}
		})
	}
}

// A call through the GOT (-fno-plt) records the values in integer
// registers the same way (the trampoline's stub); others are named in a
// warning, never dropped silently.
func TestRecordArgumentsNoPLT(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	prog := testutil.BuildC(t, "libcalls.c", "-O0", "-fno-plt")
	tmp := t.TempDir()
	r := runCmd(t, tmp, rtraceBin, "record", "--engine", "fast", "-d", "R", "-A", "malloc@arg1", "-R", "malloc@retval/x", "-A", "qsort@arg2,arg3", "-A", "puts@arg1/s", "--", prog)
	if r.code != 0 {
		t.Fatalf("record: %+v", r)
	}
	if !strings.Contains(r.stderr, "the -A/-R values of puts are not recorded at its calls through the GOT") {
		t.Errorf("no warning for puts's string argument:\n%s", r.stderr)
	}
	got := testutil.Run(t, tmp, uft, "replay", "--no-pager", "-f", "none", "-d", "R")
	for _, s := range []string{"malloc(9) = 0x", "qsort(3, 4) {"} {
		if !strings.Contains(got, s) {
			t.Errorf("replay lacks %s:\n%s", s, got)
		}
	}
}
