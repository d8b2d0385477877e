package tracer

import (
	"testing"

	"golang.org/x/sys/unix"

	"rtrace/internal/uftrace"
	"rtrace/tracer/fast"
)

// A forked child (clone) starts with none of its parent's fast engine
// state but the resource call being made and the read= counters of the
// frames they share (a copy); the shadow stack is a copy too, and it is
// no vfork child.
func TestCloneFastThread(t *testing.T) {
	st := fast.NewState(make([]byte, fast.StateSize), 0)
	parent := &thread{tid: 10, stack: []frame{{}}, vforked: true}
	res := &pendingRes{key: frameKey{slot: 0x7ff0, depth: 1}}
	parent.fast = fastThread{
		started: true, fs: st, fsKey: 1, fsKeys: []uint64{2}, vfork: st, vforkParent: parent,
		vforkFrames: []fast.Frame{{Depth: 1}}, vforkShared: 1, forkFrames: []fast.Frame{{Depth: 2}},
		forkRes: fast.PendingRes{Slot: 3}, forkNeeded: true, res: res,
		reads: map[frameKey][]uftrace.ReadEvent{{slot: 0x7ff0, depth: 1}: nil},
		held:  []heldSignal{{sig: unix.SIGUSR1}},
	}
	c := parent.clone(11, nil)
	if c.tid != 11 || c.vforked || len(c.stack) != 1 || &c.stack[0] == &parent.stack[0] {
		t.Errorf("child: tid %d vforked %v, stack %v shared %v", c.tid, c.vforked, c.stack, &c.stack[0] == &parent.stack[0])
	}
	got := c.fast
	if got.res != res || len(got.reads) != 1 {
		t.Errorf("the child lost the resource call being made (%v) or the read= counters (%v)", got.res, got.reads)
	}
	got.reads[frameKey{slot: 1}] = nil
	if len(parent.fast.reads) != 1 {
		t.Errorf("the child's read= counters are the parent's map")
	}
	got.res, got.reads = nil, nil
	if got.started || got.fs != nil || got.fsKey != 0 || got.fsKeys != nil || got.vfork != nil || got.vforkParent != nil ||
		got.vforkFrames != nil || got.vforkShared != 0 || got.forkFrames != nil || got.forkRes != (fast.PendingRes{}) ||
		got.forkNeeded || got.held != nil {
		t.Errorf("the child kept its parent's fast engine state: %+v", got)
	}
	if parent.fast.fs != st || len(parent.fast.held) != 1 || !parent.fast.started {
		t.Errorf("clone changed the parent: %+v", parent.fast)
	}
}
