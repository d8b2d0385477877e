package postproc

import (
	"reflect"
	"testing"

	"rtrace/internal/uftrace"
)

func TestFuncOptionsString(t *testing.T) {
	f, _ := uftrace.ParsePatterns("-F", "", []string{"^parse", "a b", "it's"})
	n, _ := uftrace.ParsePatterns("-N", "", []string{"debug_"})
	for _, o := range []FuncOptions{
		{},
		{Filters: f, NoTrace: n, Depth: 3, Threshold: 1500, MaxStack: 40, Tids: map[int]bool{42: true, 7: true}},
		{Threshold: 1},
		{Depth: 2, Srcline: true},
		{WithSyms: "/tmp/syms dir"},
		{Hide: n, Callers: f, Triggers: []uftrace.Trigger{trig("b@depth=1,trace_off"), trig("it's@time=2us")}},
	} {
		s := o.String()
		got, err := ParseFuncOptionString(s)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if got.String() != s || got.Depth != o.Depth || got.Threshold != o.Threshold || got.MaxStack != o.MaxStack ||
			!reflect.DeepEqual(got.Tids, o.Tids) || got.Srcline != o.Srcline || got.WithSyms != o.WithSyms || len(got.Filters) != len(o.Filters) || len(got.NoTrace) != len(o.NoTrace) ||
			len(got.Hide) != len(o.Hide) || len(got.Callers) != len(o.Callers) || len(got.Triggers) != len(o.Triggers) {
			t.Errorf("%q read back as %+v", s, got)
		}
	}
	for _, bad := range []string{"-F", "-D x", "-t 5h", "--what 1", "-F '(", "-F '('", "--tid 0", "-T b", "-T b@read=pmu-cycle", "-T b@arg1", "-H '('"} {
		if _, err := ParseFuncOptionString(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// trig is the trigger s, which must parse.
func trig(s string) uftrace.Trigger {
	tr, err := uftrace.ParseTrigger(s, "")
	if err != nil {
		panic(err)
	}
	return tr
}

func FuzzParseFuncOptionString(f *testing.F) {
	for _, s := range []string{"-F '^parse' -N debug_ -D 3 -t 1500 --max-stack 40 --tid 7,42", "-F 'a b'", "-t", "'", "-T 'b@depth=2,trace_on' -H c --caller-filter d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := ParseFuncOptionString(s)
		if err != nil {
			return
		}
		// What parses writes back to the same options.
		again, err := ParseFuncOptionString(o.String())
		if err != nil || again.String() != o.String() {
			t.Fatalf("%q: %q read back as %q (%v)", s, o.String(), again.String(), err)
		}
	})
}
