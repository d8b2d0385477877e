package tracer

import (
	"slices"
	"testing"

	"rtrace/internal/elfx"
	"rtrace/internal/uftrace"
)

// testExe is an executable with code at [0x1000, 0x2000) and data at
// [0x3000, 0x4000).
func testExe() *elfx.File {
	return &elfx.File{
		Path:  "/bin/prog",
		Loads: []elfx.Load{{Vaddr: 0x1000, Memsz: 0x1000, Exec: true}, {Vaddr: 0x3000, Memsz: 0x1000}},
		Funcs: []elfx.Func{
			{Name: "_start", Value: 0x1000, Size: 0x20},
			{Name: "main", Value: 0x1100, Size: 0x40},
			{Name: "foo", Value: 0x1200, Size: 0x30},
			{Name: "foo.cold", Value: 0x1280, Size: 0x10},
			{Name: "foo.cold.2", Value: 0x1290, Size: 0x10},
			{Name: "bar.colder", Value: 0x12a0, Size: 0x10}, // not a fragment
			{Name: "_setjmp", Value: 0x1300, Size: 0x10},
			{Name: "__x86.get_pc_thunk.bx", Value: 0x1310, Size: 4},
			{Name: "frame_dummy", Value: 0x1320, Size: 0x10},
			{Name: "in_data", Value: 0x3010, Size: 0x10},
			{Name: "past_text", Value: 0x2000, Size: 0x10},
		},
		Imports: []elfx.Import{
			{Name: "puts", GOT: 0x3800, Stub: 0x1030, StubSize: 16},
			{Name: "malloc", GOT: 0x3808, Stub: 0x1040, StubSize: 16},
			{Name: "__libc_start_main", GOT: 0x3810, Stub: 0x1050, StubSize: 16},
			{Name: "longjmp", GOT: 0x3818, Stub: 0x1060, StubSize: 16},
			{Name: "printf", GOT: 0x3820},
		},
	}
}

func TestUntraceable(t *testing.T) {
	f := testExe()
	want := map[string]string{
		"_start":                "C runtime code",
		"main":                  "",
		"foo":                   "",
		"foo.cold":              "part split off a function",
		"foo.cold.2":            "part split off a function",
		"bar.colder":            "",
		"_setjmp":               "hooked runtime function",
		"__x86.get_pc_thunk.bx": "PC thunk",
		"frame_dummy":           "C runtime code",
		"in_data":               "not in an executable segment",
		"past_text":             "not in an executable segment",
	}
	for _, fn := range f.Funcs {
		w, ok := want[fn.Name]
		if !ok {
			t.Fatalf("no expectation for %s", fn.Name)
		}
		if got := untraceable(f, fn); got != w {
			t.Errorf("untraceable(%s) = %q, want %q", fn.Name, got, w)
		}
		if traceable(f, fn) != (w == "") {
			t.Errorf("traceable(%s) = %v, want %v", fn.Name, !(w == ""), w == "")
		}
	}
}

// names lists the candidates as name, with a "()" suffix for PLT stubs.
func names(cands []cand) []string {
	var out []string
	for _, c := range cands {
		n := c.name
		if c.libcall {
			n += "()"
		}
		out = append(out, n)
	}
	return out
}

func TestExeCands(t *testing.T) {
	memory := &resModules[0]
	cases := []struct {
		name            string
		own             map[uint64]bool
		funcs, libcalls bool
		mods            []*ResModule
		want            []string
		wantFuncs       int
	}{
		{name: "no function trace", funcs: false, libcalls: true},
		{name: "functions", funcs: true, want: []string{"main", "foo", "bar.colder"}, wantFuncs: 3},
		// __libc_start_main is in libcallSkip; longjmp is recorded as
		// uftrace records it (hookLongjmp).
		{name: "libcalls", funcs: true, libcalls: true,
			want: []string{"main", "foo", "bar.colder", "puts()", "malloc()", "longjmp()"}, wantFuncs: 3},
		{name: "malloc left to the memory module", funcs: true, libcalls: true, mods: []*ResModule{memory},
			want: []string{"main", "foo", "bar.colder", "puts()", "longjmp()"}, wantFuncs: 3},
		// A static executable with DWARF: only its subprograms, and only
		// the traceable ones (frame_dummy is not).
		{name: "static with DWARF", own: map[uint64]bool{0x1200: true, 0x1320: true}, funcs: true,
			want: []string{"foo"}, wantFuncs: 1},
		{name: "stripped", own: map[uint64]bool{}, funcs: true, libcalls: true,
			want: []string{"puts()", "malloc()", "longjmp()"}, wantFuncs: 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, n := exeCands(testExe(), c.own, c.funcs, c.libcalls, c.mods, nil, nil)
			if !slices.Equal(names(got), c.want) || n != c.wantFuncs {
				t.Errorf("got %q (%d functions), want %q (%d)", names(got), n, c.want, c.wantFuncs)
			}
			for _, g := range got {
				if g.res != nil {
					t.Errorf("%s: executable candidate with a resource", g.name)
				}
			}
		})
	}
	// Addresses and sizes come from the symbol, or the stub.
	got, _ := exeCands(testExe(), nil, true, true, nil, nil, nil)
	if c := got[1]; c.value != 0x1200 || c.size != 0x30 {
		t.Errorf("foo: %#x+%#x, want 0x1200+0x30", c.value, c.size)
	}
	if c := got[3]; c.value != 0x1030 || c.size != 16 || !c.libcall {
		t.Errorf("puts stub: %+v", c)
	}
}

// -P FUNC, -U and -Z narrow the executable's functions as uftrace's
// patching does (the last matching pattern decides); the PLT stubs
// (library calls) stay.
func TestSelection(t *testing.T) {
	in := func(p string) Rule { return Rule{Func: mustPattern(t, p)} }
	out := func(p string) Rule { return Rule{Func: mustPattern(t, p), Out: true} }
	libIn := func(p, lib string) Rule { return Rule{Func: mustPattern(t, p), Lib: lib} }
	for _, c := range []struct {
		name  string
		rules []Rule
		min   uint64
		want  []string
	}{
		{"none", nil, 0, []string{"main", "foo", "bar.colder", "puts()", "malloc()", "longjmp()"}},
		{"-P main", []Rule{in("main")}, 0, []string{"main", "puts()", "malloc()", "longjmp()"}},
		{"-P ^.a", []Rule{in("^.a")}, 0, []string{"main", "bar.colder", "puts()", "malloc()", "longjmp()"}},
		{"only library patterns", []Rule{libIn(".", "libc.so.6")}, 0, []string{"puts()", "malloc()", "longjmp()"}},
		{"-U foo", []Rule{out("foo")}, 0, []string{"main", "bar.colder", "puts()", "malloc()", "longjmp()"}},
		{"-U foo@libc.so.6 leaves the executable's", []Rule{{Func: mustPattern(t, "foo"), Lib: "libc.so.6", Out: true}}, 0, []string{"main", "foo", "bar.colder", "puts()", "malloc()", "longjmp()"}},
		{"-P . -U foo -P fo.", []Rule{in("."), out("foo"), in("fo.")}, 0, []string{"main", "foo", "bar.colder", "puts()", "malloc()", "longjmp()"}},
		{"-P fo. -U foo", []Rule{in("fo."), out("foo")}, 0, []string{"puts()", "malloc()", "longjmp()"}},
		{"-Z 0x30", nil, 0x30, []string{"main", "foo"}}, // and no stub: 16 bytes, as uftrace's PLT symbols
		{"-Z 0x10", nil, 0x10, []string{"main", "foo", "bar.colder", "puts()", "malloc()", "longjmp()"}},
	} {
		sel := Selection{Rules: c.rules, MinSize: c.min}
		got, _ := exeCands(testExe(), nil, true, true, nil, &sel, nil)
		if !slices.Equal(names(got), c.want) {
			t.Errorf("%s: got %q, want %q", c.name, names(got), c.want)
		}
	}
	// In a library: -U and -Z apply to what a -P pattern picked.
	lib := &elfx.File{Path: "/usr/lib/libfoo.so.1", Loads: []elfx.Load{{Vaddr: 0, Memsz: 0x1000, Exec: true}},
		Funcs: []elfx.Func{{Name: "foo_a", Value: 0x100, Size: 0x40}, {Name: "foo_b", Value: 0x200, Size: 0x8}}}
	sel := Selection{Rules: []Rule{libIn("foo_.*", "libfoo.so"), {Func: mustPattern(t, "foo_a"), Lib: "libfoo.so", Out: true}, out("foo_b")}}
	if got := names(libCands(lib, &sel, false, false, nil, nil)); !slices.Equal(got, []string{"foo_b"}) {
		t.Errorf("-U foo_a@libfoo.so (and -U foo_b, the executable's): got %q", got)
	}
	if got := names(libCands(lib, &Selection{Rules: []Rule{libIn("foo_.*", "libfoo.so")}, MinSize: 0x10}, false, false, nil, nil)); !slices.Equal(got, []string{"foo_a"}) {
		t.Errorf("-Z 16: got %q", got)
	}
	// A plugin loaded with dlopen, outside the system's directories: the
	// executable's rules pick its functions; a system library's are not.
	plug := *lib
	plug.Path = "/home/u/build/libfoo.so.1"
	for _, c := range []struct {
		name  string
		path  string
		rules []Rule
		want  []string
	}{
		{"no -P", plug.Path, nil, []string{"foo_a", "foo_b"}},
		{"-P foo_a", plug.Path, []Rule{in("foo_a")}, []string{"foo_a"}},
		{"-U foo_a", plug.Path, []Rule{out("foo_a")}, []string{"foo_b"}},
		{"-P main (the executable's only)", plug.Path, []Rule{in("main")}, nil},
		{"-P foo_b@libfoo.so", plug.Path, []Rule{libIn("foo_b", "libfoo.so")}, []string{"foo_b"}},
		{"a system library", lib.Path, nil, nil},
	} {
		f := plug
		f.Path = c.path
		if got := names(libCands(&f, &Selection{Rules: c.rules}, true, false, nil, nil)); !slices.Equal(got, c.want) {
			t.Errorf("dlopened, %s: got %q, want %q", c.name, got, c.want)
		}
	}
}

func mustPattern(t *testing.T, s string) uftrace.Pattern {
	t.Helper()
	p, err := uftrace.ParsePattern(s, "")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLibCands(t *testing.T) {
	lib := func(path string) *elfx.File {
		return &elfx.File{
			Path:  path,
			Loads: []elfx.Load{{Vaddr: 0x10000, Memsz: 0x10000, Exec: true}},
			Funcs: []elfx.Func{
				{Name: "foo_a", Value: 0x10100, Size: 0x20},
				{Name: "foo_b", Value: 0x10200, Size: 0x20},
				{Name: "foo_b.cold", Value: 0x10280, Size: 0x20},
				{Name: "__libc_free", Value: 0x10300, Size: 0x20, Aliases: []string{"free", "cfree"}},
				{Name: "malloc", Value: 0x10400, Size: 0x20, Aliases: []string{"__libc_malloc"}},
				{Name: "fclose", Value: 0x10500, Size: 0x20},
				{Name: "_Znwm", Value: 0x10600, Size: 0x20},
				{Name: "_Znam", Value: 0x10700, Size: 0x20},
			},
			Imports: []elfx.Import{{Name: "strlen", GOT: 0x30000, Stub: 0x10010, StubSize: 16}},
		}
	}
	mods := []*ResModule{&resModules[0], &resModules[1]} // memory, file
	ids := resIDs(mods)
	fooP := Rule{Func: mustPattern(t, "foo_.*"), Lib: "libfoo.so"}
	freeP := Rule{Func: mustPattern(t, "__libc_free"), Lib: "libfoo.so"}
	otherP := Rule{Func: mustPattern(t, "foo_a"), Lib: "libbar.so"}
	exeP := Rule{Func: mustPattern(t, "foo_.*")} // the executable's: not the library's
	cases := []struct {
		name string
		path string
		lps  []Rule
		nest bool
		mods []*ResModule
		want []string
	}{
		{name: "nothing selected", path: "/usr/lib/libfoo.so.1"},
		{name: "pattern of another library", path: "/usr/lib/libfoo.so.1", lps: []Rule{otherP}},
		{name: "pattern of the executable", path: "/usr/lib/libfoo.so.1", lps: []Rule{exeP}},
		{name: "-P", path: "/usr/lib/libfoo.so.1", lps: []Rule{fooP, otherP}, want: []string{"foo_a", "foo_b"}},
		{name: "nest", path: "/usr/lib/libfoo.so.1", nest: true, want: []string{"strlen()"}},
		{name: "nest skips the C library", path: "/lib/libc.so.6", nest: true},
		// Resource functions follow, module by module in catalog order;
		// free is found by its alias.
		{name: "modules", path: "/lib/libc.so.6", mods: mods,
			want: []string{"malloc", "__libc_free", "_Znwm", "_Znam", "fclose"}},
		// A function -P picked is not picked again as a resource one.
		{name: "-P then modules", path: "/usr/lib/libfoo.so.1", lps: []Rule{freeP}, nest: true, mods: mods,
			want: []string{"__libc_free", "strlen()", "malloc", "_Znwm", "_Znam", "fclose"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := libCands(lib(c.path), &Selection{Rules: c.lps}, false, c.nest, c.mods, ids)
			if !slices.Equal(names(got), c.want) {
				t.Fatalf("got %q, want %q", names(got), c.want)
			}
			for _, g := range got {
				if g.res == nil {
					continue
				}
				// fclose's resource is a file pointer: the file module's
				// second type, the third after memory's one and fd.
				wantSym, wantID := map[string]string{"malloc": "malloc", "__libc_free": "free", "_Znwm": "_Znw*", "_Znam": "_Zna*", "fclose": "fclose"}[g.name], 1
				if g.name == "fclose" {
					wantID = 3
				}
				if g.res.rf.Sym != wantSym {
					t.Errorf("%s reported as %s, want %s", g.name, g.res.rf.Sym, wantSym)
				}
				if g.res.res != wantID {
					t.Errorf("%s: resource id %d, want %d", g.name, g.res.res, wantID)
				}
			}
		})
	}
}

func TestGotCalls(t *testing.T) {
	const bias = 0x7f0000000000
	f := &elfx.File{Imports: []elfx.Import{
		{Name: "printf", GOT: 0x3800},                           // called through its slot
		{Name: "puts", GOT: 0x3808, Stub: 0x1030, StubSize: 16}, // has a stub
		{Name: "strlen", GOT: 0x3810},                           // slot also read as data
		{Name: "_setjmp", GOT: 0x3818},                          // recorded at the call
		{Name: "__cxa_throw", GOT: 0x3820},                      // libcallSkip
		{Name: "getenv", GOT: 0x3828},                           // slot never read
		{Name: "exit", GOT: 0x3830},
	}}
	cm := &codeMap{bias: bias,
		slots: map[uint64]bool{bias + 0x3800: true, bias + 0x3808: true, bias + 0x3810: true, bias + 0x3818: true, bias + 0x3820: true, bias + 0x3830: true, 0x3828: true},
		loads: map[uint64]bool{bias + 0x3810: true},
	}
	var got []string
	for _, imp := range gotCalls(f, cm) {
		got = append(got, imp.Name)
	}
	if want := []string{"printf", "exit"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestSymbolWithin(t *testing.T) {
	starts := []uint64{0x10, 0x20}
	cases := []struct {
		lo, hi uint64
		want   bool
	}{
		{0x10, 0x15, false}, // lo itself is the function's own start
		{0x0f, 0x15, true},
		{0x15, 0x20, false}, // hi is past the range
		{0x15, 0x21, true},
		{0x21, 0x30, false},
		{0x00, 0x10, false},
	}
	for _, c := range cases {
		if got := symbolWithin(starts, c.lo, c.hi); got != c.want {
			t.Errorf("symbolWithin(%#x, %#x) = %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
}
