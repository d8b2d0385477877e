package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rtrace/internal/testutil"
)

// TestCalltree: rtrace calltree draws heapsum's leak report, through the
// README's chain (postproc -l -c -r | resolve | calltree), as
// rtrace-calltree's graph: peak() at its allocating line made all 50
// leaked blocks (100KB), called from main(), both drawn red; as SVG with
// Graphviz, the same labels in the picture; --type=count of the whole
// trace puts temporaries() first; an unresolved report is refused.
func TestCalltree(t *testing.T) {
	prog := testutil.BuildC(t, "heapsum.c", "-O2", "-g")
	testutil.RequireTool(t, "dot") // Graphviz, for --svg
	lines := markerLines(t, "heapsum.c")
	dir, raw := recordOneRaw(t, resModes[1], []string{"--module", "memory"}, prog)
	r := runCmd(t, dir, "sh", "-c", fmt.Sprintf("%s postproc -l -c -r -i %s | %s resolve | %s calltree --limit 1", rtraceBin, raw, rtraceBin, rtraceBin))
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	peak := fmt.Sprintf(`peak()\nat heapsum.c:%d\n100%% (100KB / 50)" style="bold,filled" color=red`, lines["peak"])
	if !strings.Contains(r.stdout, peak) || !strings.Contains(r.stdout, `label="main()\nat heapsum.c:`) ||
		!strings.Contains(r.stdout, "digraph alloc_graph {") || strings.Count(r.stdout, " -> ") < 4 {
		t.Errorf("want %q, main() and its edges:\n%s", peak, r.stdout)
	}
	// The SVG of it: the labels are the picture's text.
	rep := runCmd(t, dir, rtraceBin, "postproc", "-l", "-c", "-r", "-i", raw, "-o", "leaks.txt")
	if rep.code != 0 {
		t.Fatalf("postproc: exit %d\n%s", rep.code, rep.stderr)
	}
	s := runCmd(t, dir, rtraceBin, "calltree", "--svg", "leaks.svg", "leaks.txt")
	svg, _ := os.ReadFile(filepath.Join(dir, "leaks.svg"))
	for _, want := range []string{">peak()</text>", fmt.Sprintf(">at heapsum.c:%d</text>", lines["peak"]), ">100% (100KB / 50)</text>", ">main()</text>", "<title>N1&#45;&gt;N0</title>"} {
		if s.code != 0 || !strings.Contains(string(svg), want) {
			t.Errorf("SVG (exit %d, %s): no %q", s.code, s.stderr, want)
		}
	}
	// Every allocation by count: temporaries() made 20,100 of 25,151.
	all := runCmd(t, dir, "sh", "-c", fmt.Sprintf("%s postproc -c -r -i %s | %s calltree --type=count --limit 50", rtraceBin, raw, rtraceBin))
	if !strings.Contains(all.stdout, fmt.Sprintf(`temporaries()\nat heapsum.c:%d\n`, lines["temporary"])) || strings.Contains(all.stdout, "peak()") {
		t.Errorf("--type=count --limit 50: want temporaries() and not peak():\n%s", all.stdout)
	}
	bad := runCmd(t, dir, "sh", "-c", fmt.Sprintf("%s postproc -l -c -i %s | %s calltree", rtraceBin, raw, rtraceBin))
	if bad.code != 1 || !strings.Contains(bad.stderr, "resolve the report first") {
		t.Errorf("unresolved: exit %d, %q", bad.code, bad.stderr)
	}
}
