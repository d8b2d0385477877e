package ucli

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"rtrace/launcher"
)

func TestGetoptSpellings(t *testing.T) {
	for _, c := range []struct {
		args       []string
		depth      int
		filter     []string
		auto, nest bool
		prog       []string
	}{
		{args: []string{"-D3", "./a.out"}, depth: 3, prog: []string{"./a.out"}},
		{args: []string{"-D", "3", "./a.out", "-D4"}, depth: 3, prog: []string{"./a.out", "-D4"}},
		{args: []string{"--depth=3", "a.out"}, depth: 3, prog: []string{"a.out"}},
		{args: []string{"--depth", "3", "--", "-weird"}, depth: 3, prog: []string{"-weird"}},
		{args: []string{"--dep=2", "x"}, depth: 2, prog: []string{"x"}},                       // a prefix
		{args: []string{"-la", "x"}, auto: true, nest: true, prog: []string{"x"}},             // clustered switches
		{args: []string{"-laD5", "x"}, auto: true, nest: true, depth: 5, prog: []string{"x"}}, // a value ends a cluster
		{args: []string{"-Fmain", "-F", "a.*", "--filter=b", "x"}, filter: []string{"main", "a.*", "b"}, prog: []string{"x"}},
	} {
		cmd, err := Parse(c.args)
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		o := cmd.Options
		if o.Depth != c.depth || !slices.Equal(o.Filter, c.filter) || o.AutoArgs != c.auto || o.NestLibcall != c.nest || !reflect.DeepEqual(o.Args, c.prog) {
			t.Errorf("%q: depth %d filter %q auto %v nest %v args %q", c.args, o.Depth, o.Filter, o.AutoArgs, o.NestLibcall, o.Args)
		}
	}
}

func TestPatchValueDot(t *testing.T) {
	cmd, err := Parse([]string{"-P.", "-P", "f@libx.so", "-U", "g", "./p"})
	if err != nil {
		t.Fatal(err)
	}
	want := []launcher.PatchRule{{Pattern: "."}, {Pattern: "f@libx.so"}, {Pattern: "g", Out: true}}
	if !slices.Equal(cmd.Options.Patch, want) {
		t.Errorf("patch rules %+v, want %+v", cmd.Options.Patch, want)
	}
}

// Every mistake is one line that names the option as typed.
func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--depht=3", "x"}, "unknown option --depht (did you mean --depth?)"},
		{[]string{"--frobnicate", "x"}, "unknown option --frobnicate"},
		{[]string{"-j", "x"}, "unknown option -j"},
		{[]string{"-lj", "x"}, "unknown option -j (in -lj"},
		{[]string{"--no", "x"}, "option --no is ambiguous"},
		{[]string{"-D"}, "option -D needs a value"},
		{[]string{"--depth"}, "option --depth needs a value"},
		{[]string{"--force=yes", "x"}, "option --force takes no value"},
		{[]string{"-D", "deep", "x"}, "-D deep: want a number"},
		{[]string{"-k", "x"}, "-k (--kernel): kernel tracing needs uftrace's ftrace recorder"},
		{[]string{"--with-syms"}, "option --with-syms needs a value"},
		{[]string{"--clock=boot", "x"}, "CLOCK_MONOTONIC"},
		{[]string{"--match=perl", "x"}, "want regex or glob"},
		{[]string{"-b", "12Q", "x"}, "want a size"},
		{[]string{"--toggle-signal=SIGUSR2", "x"}, "toggling needs --disable"},
	} {
		_, err := Parse(c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %v, want one line with %q", c.args, err, c.want)
		}
		if err != nil && !errors.Is(err, ErrUsage) {
			t.Errorf("%q: %v is no usage error", c.args, err)
		}
	}
}

func TestInertAndDisplay(t *testing.T) {
	// uftrace live passes none of the record-time filters on to replay.
	cmd, err := Parse([]string{"--force", "--no-event", "-s", "call", "-f", "+tid", "--tid=1,2", "-t", "1us", "--no-pager", "-b", "1M",
		"-F", "a", "-N", "b", "-D", "2", "-Z", "8", "--disable", "--no-sched", "-T", "a@depth=1", "-T", "b@depth=2,backtrace;c@trace_on,color=red", "--no-merge", "x", "y"})
	if err != nil {
		t.Fatal(err)
	}
	// Of -T, those actions uftrace live keeps (cmds/live.c, reset_live_opts).
	// With --disable and a trace_on among them, replay starts disabled too.
	want := []string{"--output-fields=+tid", "--tid=1,2", "--time-filter=1us", "--no-pager", "-T", "b@backtrace;c@trace_on,color=red", "--no-merge", "--disable"}
	if !slices.Equal(cmd.Replay, want) {
		t.Errorf("replay options %q, want %q", cmd.Replay, want)
	}
	if len(cmd.Ignored) != 5 || !strings.HasPrefix(cmd.Ignored[0], "--force: ignored: ") {
		t.Errorf("ignored: %q", cmd.Ignored)
	}
	if cmd.Options.Time != "1us" || !slices.Equal(cmd.Options.Args, []string{"x", "y"}) {
		t.Errorf("time %q args %q", cmd.Options.Time, cmd.Options.Args)
	}
}

func TestOptFile(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "opts")
	os.WriteFile(f, []byte("# a comment\n-D 2 --filter 'main' # trailing\n-a\n./prog \"an arg\"\n"), 0o644)
	cmd, err := Parse([]string{"--opt-file", f})
	if err != nil {
		t.Fatal(err)
	}
	o := cmd.Options
	if o.Depth != 2 || !slices.Equal(o.Filter, []string{"main"}) || !o.AutoArgs || !slices.Equal(o.Args, []string{"./prog", "an arg"}) {
		t.Errorf("depth %d filter %q auto %v args %q", o.Depth, o.Filter, o.AutoArgs, o.Args)
	}
	// The command line's program wins.
	if cmd, err = Parse([]string{"--opt-file=" + f, "./other"}); err != nil || !slices.Equal(cmd.Options.Args, []string{"./other"}) {
		t.Errorf("args %q, err %v", cmd.Options.Args, err)
	}
	if _, err := Parse([]string{"--opt-file", filepath.Join(dir, "none"), "x"}); err == nil {
		t.Error("a missing opt-file is accepted")
	}
	os.WriteFile(f, []byte("--opt-file "+f+"\n"), 0o644)
	if _, err := Parse([]string{"--opt-file", f, "x"}); err == nil || !strings.Contains(err.Error(), "nested") {
		t.Errorf("a file naming itself: %v", err)
	}
}

func TestFirstWord(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"record", "x"}, 0},
		{[]string{"-v", "record", "x"}, 1},
		{[]string{"-D", "3", "./prog"}, 2},
		{[]string{"-D3", "./prog"}, 1},
		{[]string{"--depth", "3", "./prog"}, 2},
		{[]string{"--unknown", "./prog"}, 1},
		{[]string{"--help"}, -1},
		{[]string{"--", "-prog"}, 1},
		{[]string{"-V"}, -1},
	} {
		if got := FirstWord(c.args); got != c.want {
			t.Errorf("FirstWord(%q) = %d, want %d", c.args, got, c.want)
		}
	}
}

func TestSplitWords(t *testing.T) {
	got, err := splitWords(`a 'b c' "d e"f g\ h #x y` + "\nz")
	if want := []string{"a", "b c", "d ef", "g h", "z"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("splitWords = %q, %v; want %q", got, err, want)
	}
	if _, err := splitWords("'open"); err == nil {
		t.Error("an unclosed quote is accepted")
	}
}

// The table: each long name once, each letter once, every option of
// uftrace record's --help (v0.13) present, every listed one with help.
func TestTable(t *testing.T) {
	longs, shorts := map[string]bool{}, map[byte]string{}
	for _, o := range table {
		if longs[o.long] {
			t.Errorf("--%s twice", o.long)
		}
		longs[o.long] = true
		if o.short != 0 {
			if other, ok := shorts[o.short]; ok {
				t.Errorf("-%c is --%s and --%s", o.short, other, o.long)
			}
			shorts[o.short] = o.long
		}
		if o.group < otherGroup && o.help == "" {
			t.Errorf("--%s has no help", o.long)
		}
		if (o.kind == inert || o.kind == notYet || o.kind == refused) && o.why == "" {
			t.Errorf("--%s: no reason", o.long)
		}
	}
	for _, l := range uftraceLongs {
		if !longs[l] {
			t.Errorf("uftrace's --%s is missing", l)
		}
	}
}

// uftraceLongs are the long options `uftrace --help` lists (v0.13).
var uftraceLongs = strings.Fields(`avg-self avg-total auto-args argument buffer chrome clock color column-offset
column-view caller-filter data debug-domain demangle diff diff-policy disable depth estimate-return
event-full Event flame-graph flat force format output-fields filter agent graphviz hide host kernel
keep-pid kernel-buffer kernel-full kernel-only kernel-skip-out kernel-depth libmcount-single list-event
logfile nest-libcall libname libmcount-path match max-stack no-args no-comment no-event no-sched
no-sched-preempt no-libcall no-merge no-pager no-pltbind no-randomize-addr nop num-thread notrace opt-file
pid port patch record report rt-prio time-range run-cmd retval sample-time signal sort-column srcline
symbols sort script time-filter task task-newline tid time trigger unpatch debug verbose with-syms watch
size-filter help usage version`)

func TestHelp(t *testing.T) {
	var b strings.Builder
	Help(&b, "record")
	out := b.String()
	for _, want := range []string{"RECORD OPTIONS", "COMMON OPTIONS", "RECORD CONFIG OPTIONS", "GLOBAL OPTIONS", "  -D, --depth=DEPTH", "--kernel", "[refused: ", "[not yet: ", "rtrace sp-rtrace"} {
		if !strings.Contains(out, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if len(l) > 100 {
			t.Errorf("a line of %d columns: %q", len(l), l)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"-D3 ./a.out", "--dep=2 -la x", "-P. -- -x", "--opt-file", "-Fmain --filter=b x y", "-", "--=x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Fields(line)
		for _, a := range args {
			if strings.HasPrefix(a, "--opt") {
				return // reads files
			}
		}
		cmd, err := Parse(args)
		if err != nil {
			if !errors.Is(err, ErrUsage) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("%q: %v", args, err)
			}
			return
		}
		if k := FirstWord(args); cmd.Program && k < 0 {
			t.Fatalf("%q: a program, but FirstWord finds none", args)
		}
	})
}

// README.md's table of uftrace's options is Markdown's (UPDATE_README=1
// rewrites it).
func TestReadmeTable(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- uftrace options: begin (launcher/ucli TestReadmeTable) -->\n", "<!-- uftrace options: end -->\n"
	readme := string(b)
	i, j := strings.Index(readme, begin), strings.Index(readme, end)
	var want strings.Builder
	Markdown(&want)
	if i < 0 || j < i {
		t.Fatalf("README.md has no table between %q and %q; it should be:\n%s", begin, end, want.String())
	}
	if got := readme[i+len(begin) : j]; got != want.String() && os.Getenv("UPDATE_README") != "" {
		if err := os.WriteFile("../../README.md", []byte(readme[:i+len(begin)]+want.String()+readme[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
	} else if got != want.String() {
		t.Errorf("README.md's table of uftrace's options is not the table's; it should be:\n%s", want.String())
	}
}

// Prefixes resolve as in uftrace, whose names these are: rtrace's
// aliases (--event, --list-events) take only their whole name.
func TestPrefixesAsUftrace(t *testing.T) {
	cmd, err := Parse([]string{"--ev", "--list-e", "--event=app:*", "--Ev", "b:c", "x"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cmd.Replay, []string{"--event-full"}) || !cmd.ListEvents || !slices.Equal(cmd.Options.Events, []string{"app:*", "b:c"}) {
		t.Errorf("replay %q list %v events %q", cmd.Replay, cmd.ListEvents, cmd.Options.Events)
	}
}

func TestLongName(t *testing.T) {
	for word, want := range map[string]string{"--opt": "opt-file", "--opt-file=F": "opt-file", "--usa": "usage", "--no": "", "-D": "", "--": "", "--nosuch": ""} {
		if got := LongName(word); got != want {
			t.Errorf("LongName(%q) = %q, want %q", word, got, want)
		}
	}
}
