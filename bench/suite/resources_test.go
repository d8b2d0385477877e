package suite

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"rtrace/internal/trace"
)

func TestWalkLine(t *testing.T) {
	stderr := "rtrace: tracing pid 19106 (on)\n" +
		"rtrace: fast engine: 9 of 9 instrumented functions recorded without a stop\n" +
		"rtrace: fast engine: 173545 of 173546 backtraces found in the process without a stop\n"
	if f, a, ok := walkLine(stderr); f != 173545 || a != 173546 || !ok {
		t.Errorf("got %d of %d (%v), want 173545 of 173546", f, a, ok)
	}
	// One line per session (g++'s processes): the sums.
	two := stderr + "rtrace: fast engine: 10 of 20 backtraces found in the process without a stop\n"
	if f, a, ok := walkLine(two); f != 173555 || a != 173566 || !ok {
		t.Errorf("two lines: got %d of %d (%v)", f, a, ok)
	}
	if _, _, ok := walkLine("rtrace: 12 resource calls\n"); ok {
		t.Error("no walk line read as one")
	}
}

func TestCallKey(t *testing.T) {
	frames := []trace.Frame{{Addr: 0x401000}, {Addr: 0x7f0012}}
	stacks := map[*trace.Frame]string{}
	a := callKey(&trace.Call{Name: "malloc", Size: 24, Frames: frames}, stacks)
	if a != "malloc(24) 0x401000 0x7f0012" {
		t.Errorf("key %q", a)
	}
	// A call sharing the backtrace: the same frames, formatted once.
	if b := callKey(&trace.Call{Name: "malloc", Size: 8, Frames: frames}, stacks); b != "malloc(8) 0x401000 0x7f0012" || len(stacks) != 1 {
		t.Errorf("key %q, %d backtraces formatted", b, len(stacks))
	}
	if f := callKey(&trace.Call{Name: "free"}, stacks); f != "free(0)" {
		t.Errorf("a free's key %q", f)
	}
}

func TestCompareCalls(t *testing.T) {
	ref := map[string]int{"malloc(24) 0x1 0x2": 3, "free(0)": 3}
	if d := compareCalls(map[string]int{"free(0)": 3, "malloc(24) 0x1 0x2": 3}, ref); d != "" {
		t.Errorf("equal multisets differ: %s", d)
	}
	// One backtrace one frame short: the first key that differs, in order.
	got := map[string]int{"malloc(24) 0x1 0x2": 2, "malloc(24) 0x1": 1, "free(0)": 3}
	d := compareCalls(got, ref)
	if !strings.Contains(d, "malloc(24) 0x1, 1 times, want 0") || !strings.Contains(d, "6 calls, want 6") {
		t.Errorf("got %q", d)
	}
	// A count that differs.
	if d := compareCalls(map[string]int{"malloc(24) 0x1 0x2": 3, "free(0)": 2}, ref); !strings.Contains(d, "free(0), 2 times, want 3") {
		t.Errorf("got %q", d)
	}
	if d := compareCalls(nil, nil); d == "" {
		t.Error("two empty multisets compare equal: a check that checks nothing")
	}
}

const bpftraceOut = `Attaching 3 probes...


@frees: 19800

@mallocs: 20000

@stacks[
    0x7f80d5d26930
    0x4154454e4f4d5f43
]: 1
@stacks[
    churn_alloc+20
    main+50
]: 19999
`

func TestBpftraceCounts(t *testing.T) {
	if m, f, ok := bpftraceCounts(strings.NewReader(bpftraceOut)); m != 20000 || f != 19800 || !ok {
		t.Errorf("got %d mallocs, %d frees (%v)", m, f, ok)
	}
	if _, _, ok := bpftraceCounts(strings.NewReader("Attaching 3 probes...\n")); ok {
		t.Error("no counts read as some")
	}
}

func TestFuncList(t *testing.T) {
	for in, want := range map[string]string{"": "", "f": "f()", "f g": "f() or g()", "f g h": "f(), g() or h()"} {
		if got := funcList(strings.Fields(in)); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

func TestStopShare(t *testing.T) {
	for _, c := range []struct {
		stops, all int64
		want       string
	}{{0, 400, "0.00% (0 of 400)"}, {1, 173546, "<0.01% (1 of 173546)"}, {400, 400, "100.00% (400 of 400)"}, {1, 8, "12.50% (1 of 8)"}} {
		if got := stopShare(c.stops, c.all); got != c.want {
			t.Errorf("%d of %d: %q, want %q", c.stops, c.all, got, c.want)
		}
	}
}

// A memory workload's table: calls, bytes per call and rtrace's stops, no
// main() column; a skipped row keeps the columns.
func TestPrintMemory(t *testing.T) {
	rep := &Report{W: &Workload{Name: "churn", What: "churn", Kind: Memory}, Rows: []Row{
		row("untraced", 10*time.Millisecond, 0),
		{Tool: "rtrace", Stats: Stats{Runs: 1, Wall: 50 * time.Millisecond, Bytes: 4000, Events: 400, Check: "4 leaks = memcheck's lost; backtraces = remote"},
			PerEvent: 100000, counted: 400, Walks: 200, WalkStops: 1},
		{Tool: "ltrace -e", Stats: Stats{Skipped: "too slow"}},
	}}
	var out bytes.Buffer
	Print(&out, rep)
	lines := strings.Split(out.String(), "\n")
	if len(lines) < 5 {
		t.Fatalf("table:\n%s", out.String())
	}
	for _, h := range []string{"calls", "ns/call", "B/call", "stops", "check"} {
		if !strings.Contains(lines[2], h) {
			t.Errorf("header lacks %q: %s", h, lines[2])
		}
	}
	if strings.Contains(lines[2], "main()") {
		t.Errorf("a memory table with a main() column: %s", lines[2])
	}
	for _, cell := range []string{"10.0", "0.50% (1 of 200)", "backtraces = remote"} {
		if !strings.Contains(lines[4], cell) {
			t.Errorf("rtrace's row lacks %q: %s", cell, lines[4])
		}
	}
	if !strings.Contains(out.String(), "ltrace -e skipped: too slow") {
		t.Errorf("no reason for the skipped row:\n%s", out.String())
	}
}

// rtrace remote has no walk line: every function has an int3 entry.
func TestEveryStop(t *testing.T) {
	remote := "rtrace: fast engine: 0 of 9 instrumented functions recorded without a stop\nrtrace: 9 function(s) traced with a slower int3 entry instead of a detour jump:\n"
	if !noFastFunc.MatchString(remote) {
		t.Error("rtrace remote's -v output not read as every call at a stop")
	}
	if noFastFunc.MatchString("rtrace: fast engine: 10 of 9 instrumented functions recorded without a stop\n") {
		t.Error("10 of 9 read as 0 of 9")
	}
}

func TestProcesses(t *testing.T) {
	files := []string{"M/4891-0.rtrace", "M/4896-0.rtrace", "M/4896-1.rtrace", "M/4947-0.rtrace", "M/4947-1.rtrace"}
	if n := processes(files); n != 3 {
		t.Errorf("%d processes, want 3", n)
	}
}
