package uftrace_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"rtrace/internal/testutil"
	"rtrace/internal/uftrace"
)

// TestRoundTripRealUftrace reads a directory written by the real
// `uftrace record -a`, copies it through Reader and Writer, and compares
// what uftrace replay shows of both.
func TestRoundTripRealUftrace(t *testing.T) {
	bin := testutil.RequireTool(t, "uftrace")
	prog := testutil.BuildC(t, "roundtrip.c", "-pg", "-g", "-O0", "-pthread")
	tmp, orig, cp := recordAndCopy(t, bin, prog, "-a", "--no-libcall")
	for _, args := range [][]string{
		{"replay", "-f", "none"},
		{"report", "-f", "call"},
		{"graph"},
		{"dump", "--chrome"},
	} {
		// dump --chrome names the time the directory was written
		// (recorded_time): the copy's can be a second later.
		stamp := regexp.MustCompile(`"recorded_time":"[^"]*"`)
		want := stamp.ReplaceAllString(testutil.Run(t, tmp, bin, append(args, "--no-pager", "-d", orig)...), "")
		got := stamp.ReplaceAllString(testutil.Run(t, tmp, bin, append(args, "--no-pager", "-d", cp)...), "")
		if got != want {
			t.Errorf("uftrace %s differs:\noriginal:\n%s\ncopy:\n%s", strings.Join(args, " "), want, got)
		}
	}
	replay := testutil.Run(t, tmp, bin, "replay", "-f", "none", "--no-pager", "-d", cp)
	for _, want := range []string{`greet("world") = "world";`, "add(2, 3) = 5;", "upper('q') = 'Q';", "worker(", "fib("} {
		if !strings.Contains(replay, want) {
			t.Errorf("copy's replay lacks %q:\n%s", want, replay)
		}
	}
}

// TestRoundTripReadEvents: the builtin events of uftrace's read= trigger
// carry data; a copy through Reader and Writer replays the same.
func TestRoundTripReadEvents(t *testing.T) {
	bin := testutil.RequireTool(t, "uftrace")
	prog := testutil.BuildC(t, "roundtrip.c", "-pg", "-g", "-O0", "-pthread")
	tmp, orig, cp := recordAndCopy(t, bin, prog, "--no-libcall", "-T", "^add$@read=proc/statm,read=page-fault")
	want := testutil.Run(t, tmp, bin, "replay", "-f", "none", "--no-pager", "-d", orig)
	got := testutil.Run(t, tmp, bin, "replay", "-f", "none", "--no-pager", "-d", cp)
	if got != want || !strings.Contains(want, "/* diff:page-fault (major=+0") || !strings.Contains(want, "/* read:proc/statm (vmsize=") {
		t.Errorf("replay of the copy:\n%s\noriginal:\n%s", got, want)
	}
}

// recordAndCopy records prog with the real uftrace and opts into orig, and
// copies that through Reader and Writer into cp, both in tmp.
func recordAndCopy(t *testing.T, bin, prog string, opts ...string) (tmp, orig, cp string) {
	t.Helper()
	tmp = t.TempDir()
	orig, cp = filepath.Join(tmp, "orig"), filepath.Join(tmp, "copy")
	testutil.Run(t, tmp, bin, append(append([]string{"record"}, opts...), "-d", orig, prog)...)
	r, err := uftrace.Open(orig)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := uftrace.Copy(r, cp, nil); err != nil {
		t.Fatal(err)
	}
	return tmp, orig, cp
}
