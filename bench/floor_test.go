package bench

import (
	"testing"

	"rtrace/internal/testutil"
)

// The floor loop counts every stop: a benchmark built on a broken loop
// would report a meaningless number.
func TestFloor(t *testing.T) {
	loop := testutil.BuildC(t, "int3loop.c", "-O2")
	d, err := Floor(loop, 500, true)
	if err != nil {
		t.Fatal(err)
	}
	if d <= 0 {
		t.Fatalf("%v per stop", d)
	}
	if _, err := Floor(loop, 0, false); err == nil {
		t.Fatal("no stops: want an error, not a time")
	}
}

func TestFibCalls(t *testing.T) {
	// fib(25) makes 242,785 calls: 485,570 events, plus main's two.
	if got := fibCalls(25); got != 242785 {
		t.Fatalf("fibCalls(25) = %d", got)
	}
}
