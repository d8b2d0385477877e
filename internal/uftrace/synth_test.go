package uftrace_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rtrace/internal/testutil"
	"rtrace/internal/uftrace"
)

// Module-relative addresses of the synthetic programs' functions.
var synthSyms = []uftrace.Symbol{
	{Addr: 0x1000, Type: 'T', Name: "main"},
	{Addr: 0x1100, Type: 'T', Name: "parent"},
	{Addr: 0x1200, Type: 'T', Name: "child"},
	{Addr: 0x1300, Type: 't', Name: "leaf"},
	{Addr: 0x1400, Type: 'T', Name: "rec"},
	{Addr: 0x1500, Type: 'T', Name: "args_int"},
	{Addr: 0x1600, Type: 'T', Name: "args_misc"},
	{Addr: 0x1700, Type: 'T', Name: "ret_str"},
	{Addr: 0x1800, Type: 'T', Name: "worker"},
	{Addr: 0x1900, Type: 'T', Name: "do_fork"},
	{Addr: 0x1a00, Type: 'T', Name: "exec_prog"},
}

const (
	exeBase  = 0x555555554000
	plugBase = 0x7ffff7a00000
	exe2Base = 0x565555554000
)

// synth writes records for one task, keeping its depth and the clock.
type synth struct {
	t     testing.TB
	w     *uftrace.Writer
	tid   int
	depth int
	now   *uint64
	base  uint64
}

func (s *synth) tick() uint64 { *s.now += 1000; return *s.now }

func (s *synth) addr(name string) uint64 {
	for _, sym := range synthSyms {
		if sym.Name == name {
			return s.base + sym.Addr
		}
	}
	if name == "plug_fn" {
		return plugBase + 0x500
	}
	s.t.Fatalf("no symbol %s", name)
	return 0
}

func (s *synth) entry(name string, payload []byte) {
	s.t.Helper()
	r := uftrace.Record{Time: s.tick(), Type: uftrace.Entry, Depth: s.depth, Addr: s.addr(name), More: payload != nil}
	if err := s.w.Append(s.tid, r, payload); err != nil {
		s.t.Fatal(err)
	}
	s.depth++
}

func (s *synth) exit(name string, payload []byte) {
	s.t.Helper()
	s.depth--
	r := uftrace.Record{Time: s.tick(), Type: uftrace.Exit, Depth: s.depth, Addr: s.addr(name), More: payload != nil}
	if err := s.w.Append(s.tid, r, payload); err != nil {
		s.t.Fatal(err)
	}
}

func (s *synth) call(name string) { s.entry(name, nil); s.exit(name, nil) }

func (s *synth) raw(typ uftrace.RecordType, addr uint64) {
	s.t.Helper()
	if err := s.w.Append(s.tid, uftrace.Record{Time: s.tick(), Type: typ, Depth: s.depth, Addr: addr}, nil); err != nil {
		s.t.Fatal(err)
	}
}

func payload(t testing.TB, spec string, vals ...uftrace.Value) []byte {
	t.Helper()
	fs, err := uftrace.ParseFuncSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	b, err := uftrace.AppendPayload(nil, fs.Args, vals)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mapsText(lines ...string) []byte {
	return []byte(strings.Join(lines, "\n") + "\n")
}

var longString = strings.Repeat("0123456789", 12)

const (
	argsIntSpec  = "args_int@arg1/i8,arg2/i16,arg3/i32,arg4/i64,arg5/u32,arg6/x64"
	argsMiscSpec = "args_misc@arg1/c,arg2/s,arg3/s,arg4/s,fparg1/32,fparg2/64,arg5/p"
)

// writeSynthetic writes a trace with a call tree, three threads, a fork, an
// exec in the child, a dlopen, arguments and return values of every kind, a
// user event, a LOST record and recursion 1500 deep.
func writeSynthetic(t testing.TB, dir string) { writeSyntheticSkip(t, dir, "") }

func writeSyntheticSkip(t testing.TB, dir string, skip string) {
	on := func(part string) bool { return !strings.Contains(skip, part) }
	exe := "/opt/synth/bin/synth"
	exe2 := "/opt/synth/bin/synth2"
	plug := "/opt/synth/lib/libplug.so"
	info := uftrace.Info{
		ExeName: exe,
		BuildID: strings.Repeat("ab", 20),
		Cmdline: exe + " --flag",
		ArgSpecs: []uftrace.ArgSpecLine{
			{Key: "argspec", Value: argsIntSpec + ";" + argsMiscSpec},
			{Key: "retspec", Value: "args_int@retval/i32;args_misc@retval/f64;ret_str@retval/s"},
		},
		Version: "rtrace test",
	}
	uftrace.FillSystemInfo(&info)
	w, err := uftrace.Create(dir, info)
	if err != nil {
		t.Fatal(err)
	}
	now := uint64(5_000_000_000)
	sid1, sid2 := "0123456789abcdef", "fedcba9876543210"
	maps1 := mapsText(
		fmt.Sprintf("%x-%x r-xp 00000000 08:01 1234 %s", uint64(exeBase), uint64(exeBase+0x3000), exe),
		fmt.Sprintf("%x-%x rw-p 00003000 08:01 1234 %s", uint64(exeBase+0x3000), uint64(exeBase+0x4000), exe),
		"7ffff7800000-7ffff7900000 rw-p 00000000 00:00 0",
		"7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0                          [stack]",
	)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.Session(uftrace.TaskEvent{Time: now, Pid: 100, SID: sid1, Exename: exe}, maps1))
	now += 10
	must(w.Task(now, 100, 100))
	must(w.Symbols(w.SymName(exe, ""), exe, "", synthSyms, 0x2000))
	must(w.Symbols(w.SymName(plug, ""), plug, "", []uftrace.Symbol{{Addr: 0x500, Type: 'T', Name: "plug_fn"}}, 0x600))
	must(w.Symbols(w.SymName(exe2, ""), exe2, "", synthSyms, 0x2000))
	must(w.AddEvent(uftrace.EventIDBase, "sdt:probe"))

	m := &synth{t: t, w: w, tid: 100, now: &now, base: exeBase}
	m.entry("main", nil)
	m.entry("parent", nil)
	m.entry("child", nil)
	m.call("leaf")
	m.exit("child", nil)
	m.call("leaf")
	m.exit("parent", nil)

	if on("args") {
		m.entry("args_int", payload(t, argsIntSpec,
			uftrace.Value{Int: 0xff}, uftrace.Value{Int: 0xfffe}, uftrace.Value{Int: 0xfffffffd},
			uftrace.Value{Int: 1 << 40}, uftrace.Value{Int: 5}, uftrace.Value{Int: 0xff}))
		m.exit("args_int", payload(t, "args_int@retval/i32", uftrace.Value{Int: 7}))
		m.entry("args_misc", payload(t, argsMiscSpec,
			uftrace.Value{Int: 'z'}, uftrace.Value{Str: "hello"}, uftrace.Value{Str: uftrace.NullString},
			uftrace.Value{Str: longString}, uftrace.Value{Float: 1.5}, uftrace.Value{Float: 2.25},
			uftrace.Value{Int: 0x1234}))
		m.exit("args_misc", payload(t, "args_misc@retval/f64", uftrace.Value{Float: -0.5}))
		m.entry("ret_str", nil)
		m.exit("ret_str", payload(t, "ret_str@retval/s", uftrace.Value{Str: "done"}))
	}
	if on("event") {

		m.raw(uftrace.Event, uftrace.EventIDBase)
		m.raw(uftrace.Lost, 5)
	}

	// dlopen of a plugin, then a call into it.
	must(w.Dlopen(m.tick(), 100, sid1, plugBase, plug))
	m.call("plug_fn")
	must(w.Extern(m.tick(), "checkpoint reached"))

	// Two more threads.
	for _, tid := range []int{101, 102} {
		must(w.Task(m.tick(), tid, 100))
		th := &synth{t: t, w: w, tid: tid, now: &now, base: exeBase}
		th.entry("worker", nil)
		if tid == 102 && on("rec") {
			for i := 0; i < 1500; i++ {
				th.entry("rec", nil)
			}
			for i := 0; i < 1500; i++ {
				th.exit("rec", nil)
			}
		} else {
			th.call("leaf")
		}
		th.exit("worker", nil)
	}

	// fork: the child starts with an EXIT at the inherited depth, then execs.
	m.entry("do_fork", nil)
	must(w.Fork(m.tick(), 103, 100))
	c := &synth{t: t, w: w, tid: 103, now: &now, base: exeBase, depth: m.depth}
	c.exit("do_fork", nil)
	c.entry("exec_prog", nil)
	c.exit("exec_prog", nil) // frames are closed before the exec
	c.exit("main", nil)
	maps2 := mapsText(
		fmt.Sprintf("%x-%x r-xp 00000000 08:01 1299 %s", uint64(exe2Base), uint64(exe2Base+0x3000), exe2),
		"7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0                          [stack]",
	)
	must(w.Session(uftrace.TaskEvent{Time: c.tick(), Pid: 103, SID: sid2, Exename: exe2}, maps2))
	must(w.Task(c.tick(), 103, 103))
	c2 := &synth{t: t, w: w, tid: 103, now: &now, base: exe2Base}
	c2.entry("main", nil)
	c2.call("leaf")
	c2.exit("main", nil)

	m.exit("do_fork", nil)
	m.exit("main", nil)

	st := 0
	must(w.UpdateInfo(func(in *uftrace.Info) {
		in.ExitStatus = &st
		in.RecordDate = "Sat Nov 21 10:00:00 2026"
		in.Elapsed = "0.001000000 sec"
		in.Usage = &uftrace.Usage{SysTime: 0.01, UsrTime: 0.02, MaxRSS: 1000}
	}))
	must(w.Close())
}

func uftraceCmd(t testing.TB, dir string, args ...string) string {
	t.Helper()
	bin := testutil.RequireTool(t, "uftrace")
	return testutil.Run(t, "", bin, append(args, "-d", dir)...)
}

func TestSyntheticTraceWithRealUftrace(t *testing.T) {
	testutil.RequireTool(t, "uftrace")
	dir := filepath.Join(t.TempDir(), "uftrace.data")
	writeSynthetic(t, dir)

	for _, args := range [][]string{
		{"dump"}, {"report"}, {"graph"}, {"info"}, {"dump", "--chrome"}, {"dump", "--flame-graph"},
		{"replay"}, {"report", "--tid", "102"},
	} {
		out := uftraceCmd(t, dir, args...)
		if len(out) == 0 {
			t.Errorf("uftrace %s printed nothing", strings.Join(args, " "))
		}
	}

	replay := uftraceCmd(t, dir, "replay", "-f", "none", "--no-pager")
	for _, want := range []string{
		"main() {\n  parent() {\n    child() {\n      leaf();\n    } /* child */\n    leaf();\n  } /* parent */\n",
		"  args_int(-1, -2, -3, 1099511627776, 5, 0xff) = 7;\n",
		`  args_misc('z', "hello", "NULL", "` + longString[:95] + `...", 1.500000, 2.250000, 0x1234) = -0.500000;` + "\n",
		"  ret_str() = \"done\";\n",
		"  /* sdt:probe */\n",
		"/* LOST 5 records!! */\n",
		"  plug_fn();\n/* external-data: checkpoint reached */\n",
		"worker() {\n  leaf();\n} /* worker */\n",
		"worker() {\n  rec() {\n    rec() {\n",
		"} /* do_fork */\n",
		"main() {\n  leaf();\n} /* main */\n",
	} {
		if !strings.Contains(replay, want) {
			t.Errorf("replay lacks %q", want)
		}
	}
	// default.opts limits analysis to depth 1024 (worker + 1023 levels of rec),
	// the most uftrace 0.13's graph can draw.
	if n := strings.Count(replay, "rec() {"); n != 1023 {
		t.Errorf("replay shows %d rec() entries, want 1023", n)
	}
	if !strings.Contains(replay, "  } /* rec */\n} /* worker */\n") {
		t.Error("replay does not close the recursion back to worker")
	}
	if t.Failed() {
		t.Logf("replay:\n%s", head(replay, 80))
	}

	info := uftraceCmd(t, dir, "info")
	for _, want := range []string{"/opt/synth/bin/synth --flag", "100(synth), 101(synth), 102(synth), 103(synth2)", "exited with code: 0", "args_int@arg1/i8"} {
		if !strings.Contains(info, want) {
			t.Errorf("info lacks %q:\n%s", want, info)
		}
	}
}

func head(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

func TestSyntheticRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a")
	writeSynthetic(t, dir)
	r, err := uftrace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	count := map[uftrace.RecordType]int{}
	var last uint64
	var sawArgs bool
	for {
		it, err := r.Next()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatal(err)
			}
			break
		}
		if it.Time < last {
			t.Fatalf("record at %d after %d: not merged by time", it.Time, last)
		}
		last = it.Time
		count[it.Type]++
		if it.Func == "args_misc" && it.Type == uftrace.Entry {
			sawArgs = true
			if it.Args[1].Str != "hello" || it.Args[4].Float != 1.5 || it.Args[0].Int != 'z' {
				t.Errorf("args_misc decoded as %+v", it.Args)
			}
		}
	}
	if !sawArgs {
		t.Error("no args_misc entry with arguments read back")
	}
	if count[uftrace.Entry] < 1500 || count[uftrace.Event] != 1 || count[uftrace.Lost] != 1 {
		t.Errorf("record counts %v", count)
	}
	if _, err := os.Stat(filepath.Join(dir, "default.opts")); err != nil {
		t.Errorf("depth 1500 should produce default.opts: %v", err)
	}
}
