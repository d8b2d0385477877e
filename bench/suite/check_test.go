package suite

import (
	"strings"
	"testing"
)

// The trees of two runs, as uftrace.ReplayTrees gives them.
var treesA = []string{"main()\n  fib()\n", "worker()\n  leaf()\n"}

func TestCompareTrees(t *testing.T) {
	if d := CompareTrees(treesA, []string{"main()\n  fib()\n", "worker()\n  leaf()\n"}); d != "" {
		t.Errorf("same trees differ: %s", d)
	}
	if d := CompareTrees([]string{"main()\n  fib()\n", "worker()\n  leaves()\n"}, treesA); !strings.Contains(d, `"leaves()", want "leaf()"`) {
		t.Errorf("a different call: %q", d)
	}
	if d := CompareTrees(treesA[:1], treesA); d == "" {
		t.Error("a missing thread compares equal")
	}
	if d := CompareTrees(nil, nil); d == "" {
		t.Error("two empty trees compare equal: a check that checks nothing")
	}
}

func FuzzCompareTrees(f *testing.F) {
	f.Add("main()\n  fib()\n", "worker()\n")
	f.Fuzz(func(t *testing.T, a, b string) {
		tr := []string{a, b}
		if d := CompareTrees(tr, tr); d != "" {
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
