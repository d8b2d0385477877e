package e2e_test

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"rtrace/internal/testutil"
)

// byValueSpecs spell out, for uftrace -pg, where the long doubles and
// structs of byvalue.c are: on the stack, in registers, the arguments after
// them named, a struct returned through rdi, an empty struct, and an
// argument number past anything uftrace reads (recorded as 0).
var byValueSpecs = []string{
	"-A", "ld_div@arg1/i64,fparg1/80%stack+1,arg2", "-R", "ld_div@retval/f80",
	"-A", "seventh@arg7%stack+1,fparg1/80%stack3,arg9999999", // %stackN: as %stack+N (uftrace's strtol)
	"-A", "pt_sum@arg1/t8:pt%RDI,arg2%RSI",
	"-A", "big_use@arg1/t24:big%stack+1,arg2%RDI",
	"-A", "big_make@arg1%RSI,arg2%RDX", "-R", "big_make@retval/t24:big",
	"-A", "empty_use@arg1/t0:empty%stack+1,arg2%RDI", "-R", "empty_use@retval",
}

// Long doubles and structs by value: with explicit specs, rtrace shows
// what uftrace shows of the -pg build; with -a, every value is the one the
// program printed for that call. (uftrace 0.13 -pg -a gets several of them
// wrong: the double after two long doubles, doubles after a struct, a
// float return; see resolver.TestAutoSpecsMatchUftrace.)
func TestRecordByValue(t *testing.T) {
	for _, v := range []variant{variants[0], variants[3]} {
		t.Run(v.name, func(t *testing.T) {
			plain := build(t, "byvalue.c", v, false, nil)
			tmp := t.TempDir()
			if v.name == variants[0].name {
				pg := build(t, "byvalue.c", v, true, nil)
				r, want, got := sideBySide(t, tmp, pg, plain, byValueSpecs...)
				if r.code != 0 || got != want || !strings.Contains(got, "seventh(7, 8.500000, 0);") {
					t.Errorf("explicit specs (exit %d):\nuftrace:\n%s\nrtrace:\n%s", r.code, want, got)
				}
			}
			r := runCmd(t, tmp, rtraceBin, "record", "-q", "-a", "--no-libcall", "-d", "A", "--", plain)
			if r.code != 0 {
				t.Fatalf("rtrace -a: %+v", r)
			}
			out := testutil.Run(t, tmp, testutil.RequireTool(t, "uftrace"), "replay", "--no-pager", "-f", "none", "-d", "A")
			var calls []string
			for _, l := range strings.Split(out, "\n") {
				l = strings.TrimSpace(l)
				if strings.Contains(l, "(") && strings.HasSuffix(l, ";") {
					calls = append(calls, strings.TrimSuffix(l, ";"))
				}
			}
			printed := strings.Split(strings.TrimSpace(r.stdout), "\n")
			if len(printed) != 11 || len(calls) != len(printed) {
				t.Fatalf("-a: %d calls for %d printed lines:\n%s\nprinted:\n%s", len(calls), len(printed), out, r.stdout)
			}
			for i, p := range printed {
				if !strings.HasPrefix(p, calls[i]) {
					t.Errorf("-a: replay shows\n\t%s\nthe program printed\n\t%s", calls[i], p)
				}
			}
		})
	}
}

// C++ under -a: std::string by value and returned (/S, the hidden pointer
// of the return moving the arguments), member functions whose types are
// on their declaration, the methods of a struct local to a function, and
// empty structs returned by value: rtrace shows what uftrace shows of the
// -pg build, pointer values aside (stack addresses differ from run to run).
func TestRecordCxxAutoArgs(t *testing.T) {
	plain := build(t, "strarg.cc", variants[0], false, nil)
	pg := build(t, "strarg.cc", variants[0], true, nil)
	tmp := t.TempDir()
	r, want, got := sideBySide(t, tmp, pg, plain, "-a")
	addr := regexp.MustCompile(`0x[0-9a-f]+`)
	want, got = addr.ReplaceAllString(want, "ADDR"), addr.ReplaceAllString(got, "ADDR")
	if r.code != 0 || got != want || !strings.Contains(got, `greet("you"s, 2) {`) ||
		!strings.Contains(got, `} = "Hello you!!"s; /* greet */`) || !strings.Contains(got, "= random_access_iterator_tag{};") {
		t.Errorf("-a (exit %d):\nuftrace:\n%s\nrtrace:\n%s", r.code, want, got)
	}
}

// libcTree is uftrace replay's tree of dir from main on, with what differs
// from run to run masked: addresses, the process id, and the file
// descriptors open returns (uftrace's child holds one more, its pipe).
func libcTree(t *testing.T, dir string) string {
	t.Helper()
	out := testutil.Run(t, "", testutil.RequireTool(t, "uftrace"), "replay", "--no-pager", "-f", "none", "-d", dir)
	if i := strings.Index(out, "main("); i >= 0 {
		out = out[i:] // uftrace -pg's __monstartup and __cxa_atexit come first
	}
	for _, m := range []struct{ re, to string }{
		{`0x[0-9a-f]+`, "ADDR"},
		{`(getpid\(\)) = \d+`, "$1 = PID"},
		{`(kill)\(\d+`, "$1(PID"},
		{`((?:open|socket)\(.*\)) = \d+;`, "$1 = FD;"},
		{`((?:write|lseek|close))\(\d+`, "$1(FD"},
	} {
		out = regexp.MustCompile(m.re).ReplaceAllString(out, m.to)
	}
	return out
}

// -a, and -A/-R naming a library function, record the C library calls
// uftrace's built-in table describes, flags shown by name: rtrace's trace
// shows what uftrace's of the -pg build does. uftrace 0.13 -a shows a
// float returned as 0.000000 (strtof, as its -R strtof does not): that
// line is the one rtrace gets right.
func TestRecordLibcArgs(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	for _, c := range []struct {
		src  string
		opts []string
	}{
		{"libargs.c", []string{"-a"}},
		{"libargs.c", []string{"-A", "open", "-R", "open", "-A", "^mmap$", "-R", "strtof", "-A", "access@arg2/x"}},
		{"libcalls.c", []string{"-a"}},
		{"strarg.cc", []string{"-a", "-F", "main"}},
	} {
		t.Run(c.src+" "+strings.Join(c.opts, " "), func(t *testing.T) {
			plain := build(t, c.src, variants[0], false, nil)
			pg := build(t, c.src, variants[0], true, nil)
			tmp := t.TempDir()
			runCmd(t, tmp, uft, append(append([]string{"record", "--no-event", "-d", "U"}, c.opts...), pg)...)
			r := runCmd(t, tmp, rtraceBin, append(append([]string{"record", "-q", "-d", "R"}, c.opts...), "--", plain)...)
			if r.code != 0 {
				t.Fatalf("rtrace: %+v", r)
			}
			want, got := libcTree(t, filepath.Join(tmp, "U")), libcTree(t, filepath.Join(tmp, "R"))
			if slices.Contains(c.opts, "-a") {
				want = strings.Replace(want, `strtof("0.25", 0) = 0.000000;`, `strtof("0.25", 0) = 0.250000;`, 1)
			}
			if got != want || !strings.Contains(got, "(") {
				t.Errorf("uftrace:\n%s\nrtrace:\n%s", want, got)
			}
		})
	}
}

// Module qualifiers, as uftrace's filters take them: FUNC@PLT names the
// executable's calls into libraries, FUNC@NAME the functions of the module
// NAME (the executable by its name); a -F that matches nothing is ignored
// (uftrace's filter mode is set only by a pattern that matched); a filter
// flag takes trigger actions after '@' too (-F copy@depth=1), argument
// actions ignored.
func TestUftraceModules(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	plain := build(t, "libcalls.c", variants[0], false, nil)
	pg := build(t, "libcalls.c", variants[0], true, nil)
	self, selfPg := filepath.Base(plain), filepath.Base(pg)
	for _, c := range [][2][]string{
		{{"-N", ".@PLT"}},
		{{"-F", "strlen@PLT", "-F", "sorted"}},
		{{"-F", "^c$@PLT"}},
		{{"-F", "nosuch"}},
		{{"-F", "copy@depth=1", "-N", "sorted@" + selfPg + ",depth=1"}, {"-F", "copy@depth=1", "-N", "sorted@" + self + ",depth=1"}},
		{{"-F", "report@arg1"}},
		{{"-N", ".@libc.so.6"}},
		{{"-F", "copy@" + selfPg}, {"-F", "copy@" + self}},
		{{"-T", "copy@" + selfPg + ",depth=1", "-T", "sorted@PLT,notrace"}, {"-T", "copy@" + self + ",depth=1", "-T", "sorted@PLT,notrace"}},
		{{"-H", "cmp@" + selfPg, "-C", "malloc@plt"}, {"-H", "cmp@" + self, "-C", "malloc@plt"}},
	} {
		uopts, opts := c[0], c[1]
		if opts == nil {
			opts = uopts
		}
		t.Run(strings.Join(opts, " "), func(t *testing.T) {
			tmp := t.TempDir()
			runCmd(t, tmp, uft, append(append([]string{"record", "--no-event", "-d", "U"}, uopts...), pg)...)
			r := runCmd(t, tmp, rtraceBin, append(append([]string{"record", "-q", "-d", "R"}, opts...), "--", plain)...)
			if r.code != 0 {
				t.Fatalf("rtrace: %+v", r)
			}
			want, got := libcTree(t, filepath.Join(tmp, "U")), libcTree(t, filepath.Join(tmp, "R"))
			sameViews(t, filepath.Join(tmp, "U"), filepath.Join(tmp, "R"))
			if got != want || !strings.Contains(got, "(") {
				t.Errorf("uftrace %v:\n%s\nrtrace %v:\n%s", uopts, want, opts, got)
			}
		})
	}
}

// Two static functions of one name, in two files: -a gives each the
// arguments DWARF gives it at its address, as uftrace does.
func TestRecordStaticsAutoArgs(t *testing.T) {
	second := filepath.Join(testutil.Root(), "testdata", "statics2.c")
	plain := testutil.BuildC(t, "statics.c", "-g", "-O0", second)
	pg := testutil.BuildC(t, "statics.c", "-g", "-O0", "-pg", second)
	tmp := t.TempDir()
	r, want, got := sideBySide(t, tmp, pg, plain, "-a")
	if r.code != 0 || got != want || !strings.Contains(got, `helper("x", 0.500000) = 121`) || !strings.Contains(got, "helper(6, 7) = 42") {
		t.Errorf("-a (exit %d):\nuftrace:\n%s\nrtrace:\n%s", r.code, want, got)
	}
}

// A class with member functions and no data (std::less<int>) is a
// one-byte struct to uftrace -a, less{...}, and the arguments after it are
// where they are; a plain empty struct is empty{} (and so is an iterator
// tag, whose base has no member functions: TestRecordCxxAutoArgs).
func TestRecordEmptyBase(t *testing.T) {
	plain := build(t, "emptybase.cc", variants[0], false, nil)
	pg := build(t, "emptybase.cc", variants[0], true, nil)
	tmp := t.TempDir()
	r, want, got := sideBySide(t, tmp, pg, plain, "-a", "-F", "pick")
	addr := regexp.MustCompile(`0x[0-9a-f]+`) // std::less's operator() takes pointers
	want, got = addr.ReplaceAllString(want, "0xADDR"), addr.ReplaceAllString(got, "0xADDR")
	if r.code != 0 || got != want || !strings.Contains(got, "pick(less{...}, empty{}, 3, 4) {") {
		t.Errorf("replay (exit %d):\nuftrace -pg:\n%s\nrtrace:\n%s", r.code, want, got)
	}
}
