package calltree

import (
	"bytes"
	"strings"
	"testing"

	"rtrace/internal/rtext"
)

// report is a resolved, compressed leak report: 3 blocks of 100 bytes
// from parse() under load(), 1 of 1000 from init() under main(), which
// load() also is under; one frame unresolved.
const report = `version=1.1, arch=x86_64, timestamp=2024.3.5 07:08:09, process=./app, pid=42, filter=leaks|compress|resolve, backtrace depth=10, 
<1> : memory (memory allocation in bytes)
1. [00:00:00.001] malloc(100) = 0x1000
2. [00:00:00.002] malloc(100) = 0x2000
3. [00:00:00.003] malloc(100) = 0x3000
# allocation summary: 3 block(s) with total size 300
	0x400100 parse(char const*, int) at /src/app/parse.c:10
	0x400200 load() at /src/app/load.c:20
	0x400300 main() at /src/app/main.c:30
	0x7f0000001000 from /usr/lib/libc.so.6

4. [00:00:00.004] malloc(1000) = 0x9000
# allocation summary: 1 block(s) with total size 1000
	0x400400 init() at /src/app/init.c:5
	0x7f0000002000
	0x400300 main() at /src/app/main.c:30
	0x7f0000001000 from /usr/lib/libc.so.6

`

func draw(t *testing.T, in string, o Options) string {
	t.Helper()
	var b bytes.Buffer
	if err := Write(rtext.NewReader(strings.NewReader(in)), &b, o); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestGraph(t *testing.T) {
	got := draw(t, report, Options{Limit: 20})
	for _, want := range []string{
		`label="Allocation size totals callgraph\nFunctions through which >=20.0% amount of the allocations total were done\n\n(arch=x86_64, filter=leaks|compress|resolve, pid=42, process=./app, timestamp=2024.3.5 07:08:09)";`,
		`N0 [label="parse()\nat parse.c:10\n23% (0KB / 3)" style="filled" shape=diamond fillcolor=lightgray];`,
		`N1 [label="load()\nat load.c:20\n23% (0KB / 3)"];`,
		`N2 [label="main()\nat main.c:30\n100% (1KB / 4)" style="bold" color=red];`,
		`N3 [label="libc\n100% (1KB / 4)" style="bold,filled" color=red shape=diamond fillcolor=lightgray];`,
		// init allocates all its share itself but has no callee: bold
		// (own allocations against no callee's), filled as a diamond
		`N4 [label="init()\nat init.c:5\n76% (1KB / 1)" style="bold,filled" color=red shape=diamond fillcolor=lightgray];`,
		"N1 -> N0;\nN2 -> N1;\nN2 -> N4;\nN3 -> N2;\n}\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	// Above load's share: load and parse summed up under main; bt: edges
	// towards main; count: by allocations.
	got = draw(t, report, Options{Limit: 50})
	if !strings.Contains(got, `U0 [label="a function\n23% (0KB / 3)"];`) || !strings.Contains(got, "N2 -> U0;") || strings.Contains(got, "N1 [") {
		t.Errorf("limit 50:\n%s", got)
	}
	if got = draw(t, report, Options{Limit: 50, HideBelow: true}); strings.Contains(got, "U0") {
		t.Errorf("limit 50, below hidden:\n%s", got)
	}
	if got = draw(t, report, Options{Limit: 20, Direction: "bt"}); !strings.Contains(got, "N0 -> N1;\nN1 -> N2;\nN2 -> N3;\nN4 -> N2;\n}") {
		t.Errorf("bt:\n%s", got)
	}
	if got = draw(t, report, Options{Type: TypeCount, Limit: 50}); !strings.Contains(got, `N0 [label="parse()\nat parse.c:10\n75% (3)"`) || strings.Contains(got, "N4 [") {
		t.Errorf("count:\n%s", got)
	}
	if got = draw(t, report, Options{Type: TypeTopmost, Depth: 1}); !strings.HasPrefix(got, "# 0x9000: 4\n") || !strings.Contains(got, "N4 [") || strings.Contains(got, "N0 [") {
		t.Errorf("topmost 1:\n%s", got)
	}
	got = draw(t, report, Options{Limit: 1, IncludeOnly: []string{"pars"}, Stop: []string{"main"}, KeepPaths: true, KeepTypes: true})
	if !strings.Contains(got, `parse(char const*, int)\nat /src/app/parse.c:10\n100% (0KB / 3)`) || strings.Contains(got, "init") || strings.Contains(got, "libc") {
		t.Errorf("include-only, stop, keep:\n%s", got)
	}
	if got = draw(t, report, Options{Limit: 1, Ignore: []string{"load"}}); strings.Contains(got, "load") || !strings.Contains(got, "N1 -> N0;") {
		t.Errorf("ignore:\n%s", got)
	}
}

func TestStripArgs(t *testing.T) {
	for in, want := range map[string]string{
		"parse(char const*, int)":                           "parse()",
		"(anonymous namespace)::Parser::parse(char const*)": "(anonymous namespace)::Parser::parse()",
		"foo()::{lambda(int)#1}::operator()(int) const":     "foo()::{lambda(int)#1}::operator()() const",
		"main": "main",
	} {
		if got := stripArgs(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

func TestOptionsAndInput(t *testing.T) {
	for _, o := range []Options{{Type: "tree"}, {Limit: 101}, {Depth: 100}, {Direction: "lr"}} {
		if err := o.Check(); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	unresolved := strings.NewReplacer(" parse(char const*, int) at /src/app/parse.c:10", "", " load() at /src/app/load.c:20", "", " main() at /src/app/main.c:30", "",
		" init() at /src/app/init.c:5", "", " from /usr/lib/libc.so.6", "").Replace(report)
	err := Write(rtext.NewReader(strings.NewReader(unresolved)), &bytes.Buffer{}, Options{})
	if err == nil || !strings.Contains(err.Error(), "resolve the report first") {
		t.Errorf("unresolved report: %v", err)
	}
}

// FuzzWrite: any text draws without a panic.
func FuzzWrite(f *testing.F) {
	f.Add([]byte(report), uint8(0))
	f.Add([]byte(report), uint8(7))
	f.Fuzz(func(t *testing.T, data []byte, bits uint8) {
		o := Options{Type: []string{TypeGraph, TypeCount, TypeTopmost}[bits%3], Limit: float64(bits%50) + 0.5, Direction: []string{"tb", "bt"}[bits>>7],
			HideBelow: bits&8 != 0}
		Write(rtext.NewReader(bytes.NewReader(data)), &bytes.Buffer{}, o)
	})
}
