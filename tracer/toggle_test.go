package tracer

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"rtrace/tracer/bp"
)

func TestDisarmable(t *testing.T) {
	cases := []struct {
		name string
		kind bp.Kind
		fn   int
		want bool
	}{
		{"function entry", bp.FuncEntry, 3, true},
		{"first of the range", bp.FuncEntry, 2, true},
		{"past the range", bp.FuncEntry, 5, false},
		{"before the range", bp.FuncEntry, 1, false},
		{"no function", bp.Internal, -1, false},
		{"entry point in a function", bp.FuncEntry | bp.Internal, 3, false},
		{"hooked function", bp.FuncEntry | bp.Hook, 3, false},
		{"probe at an entry", bp.FuncEntry | bp.Probe, 3, false},
		{"hook alone", bp.Hook, 3, false},
		{"module function", bp.FuncEntry | bp.Module, 4, true},
	}
	for _, c := range cases {
		if got := disarmable(&bp.Breakpoint{Kind: c.kind, Func: c.fn}, 2, 5); got != c.want {
			t.Errorf("%s: disarmable = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestEntryPatch(t *testing.T) {
	det := &bp.Breakpoint{Addr: 0x2009, Orig: 0x55, Plan: bp.Plan{Action: bp.Detoured, Patch: 0x1004,
		Jmp: []byte{0xe9, 1, 2, 3, 4}, Orig: []byte{0x55, 0x48, 0x89, 0xe5, 0x90}, Trap: 0x2009}}
	int3 := &bp.Breakpoint{Addr: 0x1000, Orig: 0x55, Plan: bp.Plan{Action: bp.OutOfLine, Resume: 0x2000}}
	cases := []struct {
		b     *bp.Breakpoint
		armed bool
		addr  uint64
		code  []byte
	}{
		// A detour's breakpoint is its trampoline's int3; what changes is
		// the jmp at the entry.
		{det, true, 0x1004, []byte{0xe9, 1, 2, 3, 4}},
		{det, false, 0x1004, []byte{0x55, 0x48, 0x89, 0xe5, 0x90}},
		{int3, true, 0x1000, []byte{bp.Int3}},
		{int3, false, 0x1000, []byte{0x55}},
	}
	for _, c := range cases {
		addr, code := entryPatch(c.b, c.armed)
		if addr != c.addr || !bytes.Equal(code, c.code) {
			t.Errorf("action %d armed %v: % x at %#x, want % x at %#x", c.b.Plan.Action, c.armed, code, addr, c.code, c.addr)
		}
	}
}

func TestArm(t *testing.T) {
	im := &image{bps: bp.NewTable(), funcs: []fn{{name: "a"}, {name: "b"}, {name: "c"}, {name: "lib"}}}
	im.bps.Add(&bp.Breakpoint{Addr: 0x1000, Orig: 0x55, Kind: bp.FuncEntry, Func: 0})
	im.bps.Add(&bp.Breakpoint{Addr: 0x2009, Kind: bp.FuncEntry, Func: 1, Plan: bp.Plan{Action: bp.Detoured,
		Patch: 0x1010, Jmp: []byte{0xe9, 0xf3, 0x0f, 0, 0}, Orig: []byte{0x55, 0x48, 0x89, 0xe5, 0x53}, Trap: 0x2009}})
	im.bps.Add(&bp.Breakpoint{Addr: 0x1020, Orig: 0x41, Kind: bp.FuncEntry | bp.Internal, Func: 2}) // the entry point
	im.bps.Add(&bp.Breakpoint{Addr: 0x1030, Orig: 0xf3, Kind: bp.Hook, Func: -1})
	im.bps.Add(&bp.Breakpoint{Addr: 0x5000, Orig: 0x55, Kind: bp.FuncEntry, Func: 3}) // a library's
	armed := map[uint64]byte{0x1000: bp.Int3, 0x1010: 0xe9, 0x1020: bp.Int3, 0x1030: bp.Int3, 0x5000: bp.Int3}
	var warn bytes.Buffer
	tr := &Tracer{cfg: Config{Warn: &warn}}
	m := &fakeMem{b: map[uint64]byte{}, failAt: 1}
	for a, c := range armed {
		m.b[a] = c
	}

	// Off for the executable's functions: a and b lose their
	// instrumentation, the entry point and the hook keep theirs, the
	// library's is outside the range.
	tr.arm(m, im, 0, 3, false)
	want := map[uint64]byte{0x1000: 0x55, 0x1010: 0x55, 0x1011: 0x48, 0x1014: 0x53, 0x1020: bp.Int3, 0x1030: bp.Int3, 0x5000: bp.Int3}
	for a, c := range want {
		if m.b[a] != c {
			t.Errorf("off: %#x holds %#x, want %#x", a, m.b[a], c)
		}
	}
	if im.bps.Len() != 5 {
		t.Errorf("off: %d breakpoints left, want all 5", im.bps.Len())
	}
	tr.arm(m, im, 0, 4, true)
	if got := m.read(0x1010, 5); !bytes.Equal(got, []byte{0xe9, 0xf3, 0x0f, 0, 0}) || m.b[0x1000] != bp.Int3 || m.b[0x5000] != bp.Int3 {
		t.Errorf("on: detour % x, int3s %#x %#x", got, m.b[0x1000], m.b[0x5000])
	}
	if warn.Len() != 0 {
		t.Errorf("warnings: %s", warn.String())
	}

	// A write that fails is named in a warning; the others still happen.
	m.failAt = 0x1000
	tr.arm(m, im, 0, 4, false)
	if !strings.Contains(warn.String(), "cannot patch a:") || m.b[0x5000] != 0x55 {
		t.Errorf("failed write: warning %q, lib %#x", warn.String(), m.b[0x5000])
	}
}

// toggleSink records the toggles it is asked for and fails those of
// failOn.
type toggleSink struct {
	name   string
	failOn map[bool]bool
	log    *[]string
}

func (s *toggleSink) toggle(on bool, pid int) error {
	*s.log = append(*s.log, fmt.Sprintf("%s %v %d", s.name, on, pid))
	if s.failOn[on] {
		return errors.New(s.name + " failed")
	}
	return nil
}

type funcToggleSink struct {
	FuncSink
	toggleSink
}

func (s *funcToggleSink) Toggle(on bool, pid int) error { return s.toggle(on, pid) }

type resToggleSink struct {
	ResSink
	toggleSink
}

func (s *resToggleSink) Toggle(on bool, pid int) error { return s.toggle(on, pid) }

func TestToggle(t *testing.T) {
	cases := []struct {
		name              string
		start             bool
		funcFail, resFail map[bool]bool
		on                bool
		log               string
		warn, err         bool
	}{
		{name: "on", on: true, log: "funcs true 42; res true 42"},
		{name: "off", start: true, on: false, log: "funcs false 42; res false 42"},
		// A sink that cannot open its window: the ones opened are closed,
		// tracing stays off.
		{name: "second sink refuses", resFail: map[bool]bool{true: true}, on: false,
			log: "funcs true 42; res true 42; funcs false 42", warn: true},
		{name: "first sink refuses", funcFail: map[bool]bool{true: true}, on: false,
			log: "funcs true 42", warn: true},
		// Closing goes on past an error, which is the trace's error.
		{name: "close fails", start: true, funcFail: map[bool]bool{false: true}, on: false,
			log: "funcs false 42; res false 42", err: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var log []string
			var warn bytes.Buffer
			fs := &funcToggleSink{toggleSink: toggleSink{"funcs", c.funcFail, &log}}
			rs := &resToggleSink{toggleSink: toggleSink{"res", c.resFail, &log}}
			tr := New(Config{Warn: &warn, Start: c.start}, fs, rs)
			tr.toggle(&thread{tid: 42, proc: &process{pid: 42}})
			if tr.on != c.on || strings.Join(log, "; ") != c.log {
				t.Errorf("on %v, toggles %q; want %v, %q", tr.on, strings.Join(log, "; "), c.on, c.log)
			}
			if got := strings.Contains(warn.String(), "cannot turn tracing on"); got != c.warn {
				t.Errorf("warning %q", warn.String())
			}
			if (tr.err != nil) != c.err {
				t.Errorf("trace error %v", tr.err)
			}
		})
	}
}
