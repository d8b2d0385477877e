package suite

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

func TestTree(t *testing.T) {
	a, b := Tree(replayA), Tree(replayB)
	if d := CompareTrees(a, b); d != "" {
		t.Errorf("same calls differ: %s\n%q\n%q", d, a, b)
	}
	if len(a) != 2 || a[0] != "main()\n  fib()\n" {
		t.Errorf("trees %q", a)
	}
	c := Tree(strings.Replace(replayB, "leaf", "leaves", 1))
	if d := CompareTrees(c, a); !strings.Contains(d, `"leaves()", want "leaf()"`) {
		t.Errorf("a different call: %q", d)
	}
	if d := CompareTrees(a[:1], a); d == "" {
		t.Error("a missing thread compares equal")
	}
	if d := CompareTrees(nil, nil); d == "" {
		t.Error("two empty trees compare equal: a check that checks nothing")
	}
	// A library call one tracer records and the other does not leaves the
	// program's calls under it at the same depth.
	withLib := "[ 1] | main() {\n[ 1] |   qsort() {\n[ 1] |     cmp();\n[ 1] |   } /* qsort */\n[ 1] | } /* main */\n"
	without := "[ 1] | main() {\n[ 1] |   cmp();\n[ 1] | } /* main */\n"
	own := func(name string) bool { return name != "qsort" }
	if d := CompareTrees(OwnTree(withLib, own), OwnTree(without, own)); d != "" {
		t.Errorf("a dropped library call changes the depth: %s", d)
	}
}

func FuzzTree(f *testing.F) {
	f.Add(replayA)
	f.Add(replayB)
	f.Fuzz(func(t *testing.T, s string) {
		tr := Tree(s)
		if d := CompareTrees(tr, tr); len(tr) > 0 && d != "" {
			t.Fatalf("a tree differs from itself: %s", d)
		}
	})
}

const memcheckOut = `==4242== HEAP SUMMARY:
==4242==     in use at exit: 1,600 bytes in 20 blocks
==4242==   total heap usage: 2,020 allocs, 2,000 frees, 10,000 bytes allocated
==4242==
==4242== LEAK SUMMARY:
==4242==    definitely lost: 1,200 bytes in 1,012 blocks
==4242==    indirectly lost: 400 bytes in 8 blocks
==4242==      possibly lost: 0 bytes in 0 blocks
`

func TestMemcheckLeaks(t *testing.T) {
	if m, ok := MemcheckLeaks(strings.NewReader(memcheckOut)); m.Lost != 1020 || m.InUse != 20 || !ok {
		t.Errorf("got %+v %v, want 1020 lost, 20 in use", m, ok)
	}
	if m, ok := MemcheckLeaks(strings.NewReader("==1==     in use at exit: 0 bytes in 0 blocks\n==1== All heap blocks were freed -- no leaks are possible\n")); m != (Memcheck{}) || !ok {
		t.Errorf("no leaks: %+v %v", m, ok)
	}
	if _, ok := MemcheckLeaks(strings.NewReader("hello\n")); ok {
		t.Error("no summary read as one")
	}
}

func FuzzMemcheckLeaks(f *testing.F) {
	f.Add(memcheckOut)
	f.Fuzz(func(t *testing.T, s string) {
		if m, _ := MemcheckLeaks(strings.NewReader(s)); m.Lost < 0 || m.InUse < 0 {
			t.Fatalf("negative count %+v", m)
		}
	})
}
