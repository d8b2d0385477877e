package suite

import (
	"path/filepath"
	"testing"

	"rtrace/internal/testutil"
)

// The facts of uftrace's own trace of fib(10) (a -pg build): every call
// of fib counted, main() enclosing them, each event a record.
func TestTraceFacts(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	fib := testutil.BuildC(t, "fib.c", "-O0", "-pg")
	dir := filepath.Join(t.TempDir(), "data")
	testutil.Run(t, "", uft, "record", "-d", dir, fib, "10")
	f, err := traceFacts(dir, "fib")
	if err != nil {
		t.Fatal(err)
	}
	// fib's 177 calls and main's, atoi's, printf's: an entry and an exit
	// each; -pg adds __monstartup and __cxa_atexit.
	if f.hotCalls != fibCalls(10) || f.events != 2*(fibCalls(10)+5) {
		t.Errorf("facts %+v: want %d fib calls, %d events", f, fibCalls(10), 2*(fibCalls(10)+5))
	}
	if f.hotAvg <= 0 || f.main < f.hotAvg {
		t.Errorf("facts %+v: main() must enclose an average fib() call", f)
	}
}
