package postproc

import (
	"fmt"
	"strings"
	"testing"

	"rtrace/internal/uftrace"
)

// callTree builds the records of one task from a compact script: "+f" enters
// f, "-" leaves the innermost call; each step takes 10 ns, and "~N" lets N
// ns pass.
func callTree(tid int, script string) []*uftrace.Item {
	var out []*uftrace.Item
	var stack []string
	now := uint64(100)
	for _, tok := range strings.Fields(script) {
		switch {
		case strings.HasPrefix(tok, "~"):
			var n uint64
			fmt.Sscan(tok[1:], &n)
			now += n
			continue
		case strings.HasPrefix(tok, "+"):
			name := tok[1:]
			out = append(out, &uftrace.Item{Tid: tid, Func: name, Record: uftrace.Record{
				Time: now, Type: uftrace.Entry, Depth: len(stack), Addr: addrOf(name)}})
			stack = append(stack, name)
		case tok == "-":
			name := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			out = append(out, &uftrace.Item{Tid: tid, Func: name, Record: uftrace.Record{
				Time: now, Type: uftrace.Exit, Depth: len(stack), Addr: addrOf(name)}})
		}
		now += 10
	}
	return out
}

func addrOf(name string) uint64 {
	var h uint64 = 0x1000
	for _, c := range name {
		h = h*31 + uint64(c)
	}
	return h & 0xffffff
}

// render prints emitted records as "+name@depth" / "-name@depth".
func runFilter(t *testing.T, o FuncOptions, items []*uftrace.Item) string {
	t.Helper()
	f := NewFuncFilter(o, nil, nil, nil)
	var b strings.Builder
	last := map[int]uint64{}
	emit := func(it *uftrace.Item) error {
		if it.Time < last[it.Tid] {
			t.Fatalf("task %d: record at %d after %d", it.Tid, it.Time, last[it.Tid])
		}
		last[it.Tid] = it.Time
		sign := "+"
		if it.Type == uftrace.Exit {
			sign = "-"
		}
		fmt.Fprintf(&b, "%s%s@%d ", sign, it.Func, it.Depth)
		return nil
	}
	for _, it := range items {
		if err := f.Record(it, emit); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.End(emit); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(b.String())
}

func mustPatterns(t *testing.T, ss ...string) []uftrace.Pattern {
	ps, err := uftrace.ParsePatterns("-F", "", ss)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestFuncFilter(t *testing.T) {
	const tree = "+main +a +b - - +c ~500 +a - - - "
	for _, tc := range []struct {
		name string
		opts FuncOptions
		want string
	}{
		{"none", FuncOptions{}, "+main@0 +a@1 +b@2 -b@2 -a@1 +c@1 +a@2 -a@2 -c@1 -main@0"},
		{"-F a", FuncOptions{Filters: mustPatterns(t, "a")}, "+a@0 +b@1 -b@1 -a@0 +a@0 -a@0"},
		{"-F regex", FuncOptions{Filters: mustPatterns(t, "^[bc]$")}, "+b@0 -b@0 +c@0 +a@1 -a@1 -c@0"},
		{"-N a", FuncOptions{NoTrace: mustPatterns(t, "a")}, "+main@0 +c@1 -c@1 -main@0"},
		{"-F c -N a", FuncOptions{Filters: mustPatterns(t, "c"), NoTrace: mustPatterns(t, "a")}, "+c@0 -c@0"},
		{"-D 2", FuncOptions{Depth: 2}, "+main@0 +a@1 -a@1 +c@1 -c@1 -main@0"},
		{"-F c -D 1", FuncOptions{Filters: mustPatterns(t, "c"), Depth: 1}, "+c@0 -c@0"},
		// --max-stack counts every recorded level, filtered or not.
		{"--max-stack 2", FuncOptions{MaxStack: 2}, "+main@0 +a@1 -a@1 +c@1 -c@1 -main@0"},
		{"-F a --max-stack 2", FuncOptions{Filters: mustPatterns(t, "a"), MaxStack: 2}, "+a@0 -a@0"},
		// c lasts 520 ns, main 590; a, b 10 or 30.
		{"-t 100", FuncOptions{Threshold: 100}, "+main@0 +c@1 -c@1 -main@0"},
		{"-t 550", FuncOptions{Threshold: 550}, "+main@0 -main@0"},
		{"-t 1s", FuncOptions{Threshold: 1e9}, ""},
		{"exact name, not substring", FuncOptions{Filters: mustPatterns(t, "mai")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := runFilter(t, tc.opts, callTree(1, tree)); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestFuncFilterOpenCalls: calls without exit (the trace was cut) wait with
// -t until the end, then pass if they had run long enough by then.
func TestFuncFilterOpenCalls(t *testing.T) {
	items := callTree(1, "+main +a - +b ~1000 +c")
	if got, want := runFilter(t, FuncOptions{Threshold: 500}, items), "+main@0 +b@1"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// TestFuncFilterTids keeps only the tasks asked for, and tracks each task's
// stack on its own.
func TestFuncFilterTids(t *testing.T) {
	items := func() []*uftrace.Item { // the filter changes depths: new ones each run
		a, b := callTree(1, "+main +a - -"), callTree(2, "+worker +a - -")
		return []*uftrace.Item{a[0], b[0], a[1], b[1], a[2], b[2], a[3], b[3]}
	}
	got := runFilter(t, FuncOptions{Tids: map[int]bool{2: true}, Filters: mustPatterns(t, "a")}, items())
	if want := "+a@0 -a@0"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	got = runFilter(t, FuncOptions{Depth: 1}, items())
	if want := "+main@0 +worker@0 -main@0 -worker@0"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// FuzzFuncFilter drives the filter with arbitrary record sequences, as a
// damaged or foreign uftrace.data directory gives them (exits without
// entries, depth jumps, events anywhere): it must not panic, must keep each
// task's records in time order and never write a negative depth.
func FuzzFuncFilter(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 1, 1, 1, 1, 0, 0}, uint8(3))
	f.Add([]byte{1, 5, 0, 0, 3, 2, 0, 9, 1, 9}, uint8(255))
	f.Fuzz(func(t *testing.T, script []byte, sel uint8) {
		names := []string{"main", "a", "b", "c"}
		o := FuncOptions{}
		if sel&1 != 0 {
			o.Filters = mustPatterns(t, "a")
		}
		if sel&2 != 0 {
			o.NoTrace = mustPatterns(t, "^b$")
		}
		if sel&4 != 0 {
			o.Depth = 2
		}
		if sel&8 != 0 {
			o.Threshold = 25
		}
		if sel&16 != 0 {
			o.Tids = map[int]bool{1: true}
		}
		var items []*uftrace.Item
		for i := 0; i+1 < len(script); i += 2 {
			op, arg := script[i], script[i+1]
			name := names[int(arg)%len(names)]
			it := &uftrace.Item{Tid: 1 + int(op>>7), Func: name, Record: uftrace.Record{
				Time: uint64(100 + 10*i), Type: uftrace.RecordType(op % 4), Depth: int(arg>>2) % 8, Addr: addrOf(name)}}
			items = append(items, it)
		}
		ff := NewFuncFilter(o, func(tid int) int { return tid - 1 }, nil, nil)
		last := map[int]uint64{}
		emit := func(it *uftrace.Item) error {
			if it.Time < last[it.Tid] || it.Depth < 0 {
				t.Fatalf("task %d: record at %d (depth %d) after %d", it.Tid, it.Time, it.Depth, last[it.Tid])
			}
			last[it.Tid] = it.Time
			return nil
		}
		for _, it := range items {
			if err := ff.Record(it, emit); err != nil {
				t.Fatal(err)
			}
		}
		if err := ff.End(emit); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFuncFilterNestedF: each call matching -F starts the -D count again,
// as in uftrace: a recursion under -F fib -D 2 is kept whole.
func TestFuncFilterNestedF(t *testing.T) {
	items := callTree(1, "+main +fib +fib +fib +x - - - - -")
	got := runFilter(t, FuncOptions{Filters: mustPatterns(t, "fib"), Depth: 1}, items)
	if want := "+fib@0 +fib@1 +fib@2 -fib@2 -fib@1 -fib@0"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// item is one record for the mid-stack tests.
func item(tid int, typ uftrace.RecordType, depth int, name string, at uint64) *uftrace.Item {
	return &uftrace.Item{Tid: tid, Func: name, Record: uftrace.Record{Time: at, Type: typ, Depth: depth, Addr: addrOf(name)}}
}

// TestFuncFilterMidStack: a task whose data starts inside calls (a forked
// child returning from fork, an attach) gets stand-ins for the missing
// levels, so -D counts them and -N still drops an exit it names.
func TestFuncFilterMidStack(t *testing.T) {
	records := func() []*uftrace.Item {
		return []*uftrace.Item{
			item(7, uftrace.Exit, 1, "fork", 10),
			item(7, uftrace.Entry, 1, "leaf", 20),
			item(7, uftrace.Exit, 1, "leaf", 30),
			item(7, uftrace.Exit, 0, "main", 40),
		}
	}
	for _, tc := range []struct {
		opts FuncOptions
		want string
	}{
		{FuncOptions{}, "-fork@1 +leaf@1 -leaf@1 -main@0"},
		{FuncOptions{Depth: 1}, "-main@0"},
		{FuncOptions{NoTrace: mustPatterns(t, "fork")}, "+leaf@1 -leaf@1 -main@0"},
		{FuncOptions{Filters: mustPatterns(t, "leaf")}, "+leaf@0 -leaf@0"},
	} {
		if got := runFilter(t, tc.opts, records()); got != tc.want {
			t.Errorf("%+v: got %s, want %s", tc.opts, got, tc.want)
		}
	}
}

// TestFuncFilterForkedChild: a forked child's stack starts as its
// parent's, so a -F function the parent is in keeps the child's calls.
func TestFuncFilterForkedChild(t *testing.T) {
	items := []*uftrace.Item{
		item(1, uftrace.Entry, 0, "main", 10),
		item(1, uftrace.Entry, 1, "spawn", 20),
		item(1, uftrace.Entry, 2, "fork", 30),
		item(2, uftrace.Exit, 2, "fork", 40),
		item(2, uftrace.Entry, 2, "child_work", 50),
		item(2, uftrace.Exit, 2, "child_work", 60),
		item(1, uftrace.Exit, 2, "fork", 70),
		item(1, uftrace.Exit, 1, "spawn", 80),
		item(1, uftrace.Exit, 0, "main", 90),
	}
	f := NewFuncFilter(FuncOptions{Filters: mustPatterns(t, "spawn")}, func(tid int) int {
		if tid == 2 {
			return 1
		}
		return 0
	}, nil, nil)
	var got []string
	emit := func(it *uftrace.Item) error {
		got = append(got, fmt.Sprintf("%d:%v:%s@%d", it.Tid, it.Type, it.Func, it.Depth))
		return nil
	}
	for _, it := range items {
		if err := f.Record(it, emit); err != nil {
			t.Fatal(err)
		}
	}
	want := "1:entry:spawn@0 1:entry:fork@1 2:exit:fork@1 2:entry:child_work@1 2:exit:child_work@1 1:exit:fork@1 1:exit:spawn@0"
	if s := strings.Join(got, " "); s != want {
		t.Errorf("got  %s\nwant %s", s, want)
	}
}

// trace_off and trace_on keep the recorded depth, and the exit of a call
// entered while tracing was off is written once it is on again, judged by
// -t as uftrace judges it at the exit (mcount_exit_filter_record).
func TestFuncFilterTraceOnOff(t *testing.T) {
	trig := func(s string) uftrace.Trigger {
		tr, err := uftrace.ParseTrigger(s, "")
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	onoff := []uftrace.Trigger{trig("off@trace_off"), trig("on@trace_on")}
	for _, tc := range []struct {
		script string
		t      uint64
		want   string
	}{
		// a, entered while off, is at depth 1 and its exit shows.
		{"+main +off - +a +on - ~1000 - -", 0, "+main@0 +on@2 -on@2 -a@1 -main@0"},
		// With -t 500: on (10 ns) is dropped, a (1030 ns) and main shown.
		{"+main +off - +a +on - ~1000 - -", 500, "+main@0 -a@1 -main@0"},
		// a lasts 30 ns: under -t 500 its exit is dropped too.
		{"+main +off - +a +on - - ~1000 -", 500, "+main@0 -main@0"},
	} {
		got := runFilter(t, FuncOptions{Triggers: onoff, Threshold: tc.t}, callTree(1, tc.script))
		if got != tc.want {
			t.Errorf("%q -t %d:\ngot  %s\nwant %s", tc.script, tc.t, got, tc.want)
		}
	}
}
