package uftrace

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseTrigger(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Trigger // Func left out
		err  string
	}{
		{in: "b@depth=2", want: Trigger{Depth: 2, HasDepth: true}},
		{in: "b@trace_off", want: Trigger{TraceOff: true}},
		{in: "b@TRACE-ON,filter", want: Trigger{TraceOn: true, Filter: true}},
		{in: "b@traceon", want: Trigger{TraceOn: true}},
		{in: "b@trace", want: Trigger{Trace: true}},
		{in: "b@time=1.5us,notrace,hide,caller", want: Trigger{Time: 1500, HasTime: true, NoTrace: true, Hide: true, Caller: true}},
		{in: "b@arg1/s,fparg2,retval/i32", want: Trigger{Args: []string{"arg1/s", "fparg2"}, Rets: []string{"retval/i32"}}},
		{in: "b@libfoo.so,backtrace,color=red,read=proc/statm,recover,finish,size=10",
			want: Trigger{Module: "libfoo.so", Backtrace: true, Color: "red", Read: "proc/statm", Recover: true, Finish: true, Size: 10, HasSize: true}},
		{in: "b", err: "want FUNC@ACTION"},
		{in: "@depth=1", err: "want FUNC@ACTION"},
		{in: "b@", err: "want FUNC@ACTION"},
		{in: "b@depth=x", err: "want a depth"},
		{in: "b@depth=-1", err: "want a depth"},
		{in: "b@time=5x", err: "time=5x"},
		{in: "b@trace_of", err: "want trace, trace_on or trace_off"},
		{in: "b@liba,libb", err: "names a module already"},
		{in: "b@depth=1,", err: "empty action"},
		{in: "(@depth=1", err: "function pattern"},
	} {
		got, err := ParseTrigger(c.in, "")
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, want an error with %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if !got.Func.Match("b") || got.Func.Match("bb") {
			t.Errorf("%q: the pattern %v does not match b alone", c.in, got.Func)
		}
		if got.Text != c.in {
			t.Errorf("%q: Text %q", c.in, got.Text)
		}
		got.Func, got.Text = Pattern{}, ""
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q:\n got %+v\nwant %+v", c.in, got, c.want)
		}
	}
}

func FuzzParseTrigger(f *testing.F) {
	f.Add("b@depth=2,trace_on")
	f.Add("a.*@time=1us,libc.so.6")
	f.Fuzz(func(t *testing.T, s string) {
		tr, err := ParseTrigger(s, "")
		if err == nil && tr.Func.String() == "" {
			t.Errorf("%q: no pattern", s)
		}
	})
}
