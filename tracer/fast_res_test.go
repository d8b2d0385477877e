package tracer

import (
	"fmt"
	"slices"
	"testing"

	"rtrace/internal/trace"
	"rtrace/tracer/fast"
	"rtrace/tracer/fast/drain"
)

// logResSink notes the resource sink's calls; a call named closeAt finds
// its stream closed.
type logResSink struct {
	discardSink
	log     []string
	closeAt string
}

func (s *logResSink) Call(c *trace.Call) error {
	s.log = append(s.log, "call "+c.Name)
	if c.Name == s.closeAt {
		return ErrStreamClosed
	}
	return nil
}
func (s *logResSink) Lost(tid int, n uint64) error {
	s.log = append(s.log, fmt.Sprintf("lost %d %d", tid, n))
	return nil
}
func (s *logResSink) Task(time uint64, tid, pid int) error {
	s.log = append(s.log, fmt.Sprintf("task %d", tid))
	return nil
}
func (s *logResSink) Session(ss Session) error {
	s.log = append(s.log, "session "+ss.SID)
	return nil
}

// lockedResSink hands what the tracer says to the resource sink through
// the drain's queue: events wait for their turn, a session hands on
// everything queued and then itself at once, and a call that found the
// stream closed makes the tracer's next call say ErrStreamClosed, once.
func TestLockedResSink(t *testing.T) {
	inner := &logResSink{closeAt: "second"}
	d := drain.New(discardSink{}, fast.FixedClock(1), func(uint64) {})
	d.SetRes(inner, false, nil)
	l := &lockedResSink{d, inner}
	if err := l.Lost(3, 5); err != nil {
		t.Fatal(err)
	}
	if err := l.Task(10, 4, 4); err != nil {
		t.Fatal(err)
	}
	if len(inner.log) != 0 {
		t.Fatalf("events reached the sink before their turn: %q", inner.log)
	}
	if err := l.Session(Session{SID: "s1"}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"lost 3 5", "task 4", "session s1"}; !slices.Equal(inner.log, want) {
		t.Fatalf("the sink got %q, want %q", inner.log, want)
	}
	for _, name := range []string{"first", "second"} {
		if err := l.Call(&trace.Call{Name: name}); err != nil {
			t.Fatalf("queueing %s: %v", name, err)
		}
	}
	d.Sync()
	if err := l.Call(&trace.Call{Name: "third"}); err != ErrStreamClosed {
		t.Fatalf("the call after one that found the stream closed: %v, want ErrStreamClosed", err)
	}
	if err := l.Call(&trace.Call{Name: "fourth"}); err != nil {
		t.Fatalf("ErrStreamClosed said twice: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"lost 3 5", "task 4", "session s1", "call first", "call second", "call third", "call fourth"}; !slices.Equal(inner.log, want) {
		t.Fatalf("the sink got %q, want %q", inner.log, want)
	}
}

// The drain's rule of which calls carry their backtraces (a stub's
// WantBacktrace) is the one a stop applies (wantBacktrace), for every
// resource function, with and without --backtrace-all and --monitor.
func TestStubWantBacktrace(t *testing.T) {
	argSets := [][6]uint64{{16, 2, 8}, {32, 1, 100}, {100, 3, 4}, {0, 0, 0}}
	n := 0
	for mi := range resModules {
		for i := range resModules[mi].Funcs {
			rf := &resModules[mi].Funcs[i]
			s := newStub(&resFn{rf: rf, res: 1})
			for _, all := range []bool{false, true} {
				for _, monitor := range [][]uint64{nil, {32}, {16, 100, 400}} {
					for _, args := range argSets {
						want := wantBacktrace(rf, &args, all, monitor)
						if got := s.WantBacktrace(&args, all, monitor); got != want {
							t.Errorf("%s(%v) all=%v monitor=%v: the drain says %v, a stop %v", rf.Sym, args, all, monitor, got, want)
						}
						n++
					}
				}
			}
		}
	}
	if n < 100 {
		t.Fatalf("only %d cases", n)
	}
}
