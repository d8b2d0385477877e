package uftrace

import (
	"strings"
	"testing"
)

const replayA = `# DURATION     TID     FUNCTION
            [  100] | main() {
   1.000 us [  100] |   fib();
            [  101] | worker() {
   2.000 us [  101] |   leaf();
   3.000 us [  101] | } /* worker */
   4.000 us [  100] | } /* main */
`

// The same calls with other thread ids, times and interleaving.
const replayB = `# DURATION     TID     FUNCTION
            [  7] | worker() {
            [  6] | main() {
   9.000 us [  7] |   leaf();
   9.000 us [  6] |   fib();
   9.000 us [  6] | } /* main */
   9.000 us [  7] | } /* worker */
`

func TestReplayTrees(t *testing.T) {
	a, b := ReplayTrees(replayA, nil), ReplayTrees(replayB, nil)
	if strings.Join(a, "|") != strings.Join(b, "|") {
		t.Errorf("same calls differ:\n%q\n%q", a, b)
	}
	if len(a) != 2 || a[0] != "main()\n  fib()\n" || a[1] != "worker()\n  leaf()\n" {
		t.Errorf("trees %q", a)
	}
	// A library call one tracer records and the other does not leaves the
	// program's calls under it at the same depth once it is dropped.
	withLib := "[ 1] | main() {\n[ 1] |   qsort() {\n[ 1] |     cmp();\n[ 1] |   } /* qsort */\n[ 1] | } /* main */\n"
	without := "[ 1] | main() {\n[ 1] |   cmp();\n[ 1] | } /* main */\n"
	own := func(name string) bool { return name != "qsort" }
	if g, w := ReplayTrees(withLib, own), ReplayTrees(without, own); strings.Join(g, "|") != strings.Join(w, "|") || w[0] != "main()\n  cmp()\n" {
		t.Errorf("a dropped library call changes the depth: %q, want %q", g, w)
	}
	// Without keep, a call keeps its replay indentation.
	deep := "[ 1] |     leaf();\n"
	if g := ReplayTrees(deep, nil); len(g) != 1 || g[0] != "    leaf()\n" {
		t.Errorf("indentation: %q", g)
	}
}

func TestWithoutPgStartup(t *testing.T) {
	got := WithoutPgStartup([]string{"__monstartup()\n__cxa_atexit()\nmain()\n", "a()\n"})
	if strings.Join(got, "|") != "a()\n|main()\n" {
		t.Errorf("got %q", got)
	}
}

func FuzzReplayTrees(f *testing.F) {
	f.Add(replayA)
	f.Add(replayB)
	f.Fuzz(func(t *testing.T, s string) {
		all := ReplayTrees(s, nil)
		some := ReplayTrees(s, func(name string) bool { return len(name)%2 == 0 })
		if len(some) > len(all) {
			t.Fatalf("keeping fewer calls gave more tasks: %d > %d", len(some), len(all))
		}
	})
}
