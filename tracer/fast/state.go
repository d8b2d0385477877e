package fast

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// State is rtrace's view of one thread's state: the StateSize bytes of the
// memfd mapping the thread's stubs write, mapped in rtrace too. The ring
// is single-producer (the thread's stubs, or rtrace while the thread is
// stopped), single-consumer (rtrace's drain); the rest is written only
// while the thread is stopped or by the thread itself.
type State struct {
	mem  []byte
	ring []Rec  // the ring part of mem
	Addr uint64 // where the process maps it
	// seenLost is how many lost records Drain reported: the counter is the
	// thread's alone (a plain increment), rtrace only reads it.
	seenLost uint64
	losses   []loss // reported by the counter, not by Drain yet
	// seenResLost is how many dropped resource calls TakeResLost reported.
	seenResLost uint64
}

// loss is a number of records lost after the ring position at.
type loss struct{ at, n uint64 }

// NewState views mem, mapped at addr in the process.
func NewState(mem []byte, addr uint64) *State {
	if len(mem) < StateSize {
		panic("fast: state mapping too small")
	}
	ring := unsafe.Slice((*Rec)(unsafe.Pointer(&mem[offRing])), RingCap)
	return &State{mem: mem, ring: ring, Addr: addr}
}

// Mem is the mapping (for munmap).
func (s *State) Mem() []byte { return s.mem }

func (s *State) word(off int) *uint64 { return (*uint64)(unsafe.Pointer(&s.mem[off])) }

func (s *State) load(off int) uint64     { return atomic.LoadUint64(s.word(off)) }
func (s *State) store(off int, v uint64) { atomic.StoreUint64(s.word(off), v) }

// Depth is the number of frames on the shadow stack (at most MaxStack,
// whatever the process wrote there).
func (s *State) Depth() int { return int(min(s.load(offDepth), MaxStack)) }

// Guarded: the thread is inside a stub's critical section (or left one by
// a siglongjmp out of a signal handler): its state must not be changed.
func (s *State) Guarded() bool { return s.load(offGuard) != 0 }

// Frame is one shadow stack entry.
type Frame struct {
	Ret, Slot uint64 // the real return address, and where it lives
	Depth     int
	Addr      uint64 // the function
	Flags     uint64
}

// Frame flags: FlagStop, the frame's return stops at the exit stub's
// ExitStop, for rtrace to record its return value; FlagRes, a resource
// call's frame (res.S), whose return writes the call's record; FlagRet, a
// frame whose return writes its return value (args.S's RET group).
const (
	FlagStop = 1
	FlagRes  = 2
	FlagRet  = 4
)

// Frame returns the frame at depth i.
func (s *State) Frame(i int) Frame {
	off := offFrames + i*frameSize
	_, depth, addr := Unword(s.load(off + 16))
	return Frame{Ret: s.load(off), Slot: s.load(off + 8), Depth: depth, Addr: addr, Flags: s.load(off + 24)}
}

// Pop removes the top frame and returns it. The thread must be stopped.
func (s *State) Pop() Frame {
	d := s.Depth() - 1
	f := s.Frame(d)
	s.store(offDepth, uint64(d))
	return f
}

// Push adds a frame (the copy of a forked parent's). The thread must be
// stopped.
func (s *State) Push(f Frame) bool {
	d := s.Depth()
	if d >= MaxStack {
		return false
	}
	off := offFrames + d*frameSize
	s.store(off, f.Ret)
	s.store(off+8, f.Slot)
	s.store(off+16, Word(TypeEntry, d, f.Addr))
	s.store(off+24, f.Flags)
	s.store(offDepth, uint64(d+1))
	return true
}

// Truncate drops the frames above depth d (a vfork child's, from its
// parent's state). The threads writing the state must be stopped.
func (s *State) Truncate(d int) {
	if d < s.Depth() {
		s.store(offDepth, uint64(max(d, 0)))
	}
}

// Stall makes a thread waiting for room in its ring give up (the record is
// counted lost) and lose the next records of a full ring at once.
func (s *State) Stall() {
	s.store(offStall, 1)
	s.store(offWaiting, 0)
	futexWake(s.word(offTail)) // a thread asleep in room sees it now, not at its timeout
}

// Hold marks that rtrace holds a signal for the thread: it stops at the
// end of its critical section (Sites.Held) for the delivery.
func (s *State) Hold() { s.store(offHeld, 1) }

// Release clears the mark of Hold: no signal is held any more.
func (s *State) Release() { s.store(offHeld, 0) }

// SetUnhooked sets or clears the flag that sends the thread's calls to the
// tracer while an exception unwinds its stack.
func (s *State) SetUnhooked(on bool) {
	v := uint64(0)
	if on {
		v = 1
	}
	s.store(offUnhook, v)
}

// SetShared marks the state as written by a vfork child too, whose calls
// leave the return addresses of the frames below them hijacked: its
// parent, stopped meanwhile, returns through them later.
func (s *State) SetShared(on bool) {
	v := uint64(0)
	if on {
		v = 1
	}
	s.store(offShared, v)
}

// SetWatch turns the recording of the thread's CPU (-W cpu) on or off.
func (s *State) SetWatch(on bool) {
	v := uint64(0)
	if on {
		v = 1
	}
	s.store(offWatch, v)
}

// LastCPU is the CPU the thread's last call or return saw, plus 1 (0:
// none yet); SetLastCPU sets it (the tracer's own records).
func (s *State) LastCPU() uint64     { return s.load(offLastCPU) }
func (s *State) SetLastCPU(v uint64) { s.store(offLastCPU, v) }

// SetReal marks the thread's real return addresses as the ones to stay on
// its stack (a backtrace walks it): its calls and returns neither put
// them back nor hijack them.
func (s *State) SetReal(on bool) {
	v := uint64(0)
	if on {
		v = 1
	}
	s.store(offReal, v)
}

// Shared reports SetShared.
func (s *State) Shared() bool { return s.load(offShared) != 0 }

// Reset empties the state for a new thread: no frames, an empty ring, no
// resource call, empty caches.
func (s *State) Reset() {
	for _, off := range []int{offGuard, offDepth, offUnhook, offShared, offWatch, offLastCPU, offReal, offCTail, offHead, offTail, offLost, offStall, offHeld, offWaiting,
		offInRes, offInResD, offStackLo, offStackHi, offUnwind, offBTDepth, offResDesc, offResLost, offWalkN, offInResW, offRelSince, offSigRes, offCoarse, offMemoCur} {
		s.store(off, 0)
	}
	for i := range memoEntries {
		s.store(offMemo+i*memoEnt, 0) // the walk memo's key: no entry
	}
	// No module index matches: the first walk empties the row caches
	// (walk_flush), whatever index the thread gets.
	s.store(offPCGen, ^uint64(0))
	for i := range 256 {
		s.store(offSCache+i*scEntry, 0)   // the hash
		s.store(offSCache+i*scEntry+8, 0) // the frames
	}
	s.seenLost = 0
	s.seenResLost = 0
	s.losses = nil
}

// SetStack sets the range of the thread's stack: the in-process walker
// starts a walk only from a stack pointer in [lo, hi] and loads below hi
// only; on another stack (a signal's alternate one) rtrace walks.
func (s *State) SetStack(lo, hi uint64) {
	s.store(offStackLo, lo)
	s.store(offStackHi, hi)
}

// Stack returns the range SetStack set (0, 0: none).
func (s *State) Stack() (lo, hi uint64) { return s.load(offStackLo), s.load(offStackHi) }

// SetBacktraceDepth sets the frames of a resource call's backtrace (-b).
func (s *State) SetBacktraceDepth(n int) { s.store(offBTDepth, uint64(max(n, 0))) }

// SetUnwind points the walker at its module index (0: none, every walk
// stops); the thread may be running: the store is atomic, and the index
// written before it.
func (s *State) SetUnwind(index uint64) { s.store(offUnwind, index) }

// ResLost is the number of resource calls the thread dropped on a full
// ring.
func (s *State) ResLost() uint64 { return s.load(offResLost) }

// TakeResLost returns the resource calls the thread dropped since the
// last call (Pending says there are some).
func (s *State) TakeResLost() uint64 {
	n := s.load(offResLost)
	d := n - s.seenResLost
	s.seenResLost = n
	return d
}

// WalkStopped returns what the walker found before it stopped (Sites.
// WalkStop): the frames, and the registers of the last one, from which
// rtrace finishes the walk (exact: its pc is where a signal interrupted
// it).
func (s *State) WalkStopped() (frames []uint64, pc, sp, bp uint64, exact bool) {
	n := min(int(s.load(offWalkN)), WalkMax)
	frames = make([]uint64, n)
	for i := range frames {
		frames[i] = s.load(offWalkBuf + 8*i)
	}
	return frames, s.load(offWalkPC), s.load(offWalkSP), s.load(offWalkBP), s.load(offWalkEx) != 0
}

// SetWalk writes a finished walk's frames (at most WalkMax) for the
// walker to take on. The thread must be stopped.
func (s *State) SetWalk(frames []uint64) {
	frames = frames[:min(len(frames), WalkMax)]
	for i, f := range frames {
		s.store(offWalkBuf+8*i, f)
	}
	s.store(offWalkN, uint64(len(frames)))
}

// Rec is one ring record: a TSC reading and a packed word (Unword).
type Rec struct{ TSC, Word uint64 }

// Drain hands the records written since the last drain (at most most) to
// f, in at most two parts of the ring, and then frees their room: f reads
// them in place and must not keep the parts. lost is a number of records
// the ring had no room for right after those handed to f: a loss happens
// only with the ring full, so every record below the head read before the
// lost counter came before the loss, and a batch stops at that head to
// report it.
func (s *State) Drain(most int, f func(part []Rec)) (lost uint64) {
	tail := s.load(offTail)
	head := s.load(offHead) // acquire: the records below it are written
	if l := s.load(offLost); l != s.seenLost {
		s.losses = append(s.losses, loss{at: head, n: l - s.seenLost})
		s.seenLost = l
	}
	if head-tail > RingCap {
		// More than the ring holds: not the stubs' writing (the process
		// overwrote its state). Skip to it, counting the records lost.
		s.store(offTail, head)
		s.wake()
		lost = head - tail
		for _, l := range s.losses {
			lost += l.n
		}
		s.losses = s.losses[:0]
		return lost
	}
	end := min(head, tail+uint64(most))
	if len(s.losses) > 0 && s.losses[0].at < end {
		end = max(s.losses[0].at, tail)
	}
	// The records between tail and end, in at most two parts of the ring,
	// are the thread's until the tail moves past them.
	for i := tail; i < end; {
		at := i % RingCap
		n := min(end-i, RingCap-at)
		f(s.ring[at : at+n])
		i += n
	}
	s.store(offTail, end) // release: the producer may reuse the room
	if end != tail {
		s.wake()
	}
	if len(s.losses) > 0 && s.losses[0].at <= end {
		lost = s.losses[0].n
		s.losses = s.losses[1:]
	}
	if end != tail || lost > 0 {
		s.store(offStall, 0) // a full ring waits for room again
	}
	return lost
}

// wake wakes the thread when it sleeps for room in its ring (stub.S,
// room): it set WAITING, then read the tail it sleeps on. The store of the
// tail before this load, and the thread's xchg of WAITING before its load
// of the tail, are full barriers: either the thread saw the new tail, or
// this sees WAITING (and FUTEX_WAIT fails at once if the tail moved since
// the thread read it: futex(2)).
func (s *State) wake() {
	if s.load(offWaiting) == 0 {
		return
	}
	s.store(offWaiting, 0)
	futexWake(s.word(offTail))
}

// futexWake wakes the thread sleeping on w, if one is. Not FUTEX_PRIVATE:
// the thread's process maps the same memfd.
func futexWake(w *uint64) {
	const wake = 1 // FUTEX_WAKE, linux/futex.h
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), wake, 1, 0, 0, 0)
}

// Emit appends a record as the stubs' emit does, or counts it lost when
// the ring is full: the producer's side, for a thread that is stopped (and
// for tests).
func (s *State) Emit(r Rec) {
	head := s.load(offHead)
	if head-s.load(offTail) >= RingCap {
		s.store(offLost, s.load(offLost)+1)
		return
	}
	s.ring[head%RingCap] = r
	s.store(offHead, head+1) // release: the record is written
}

// Lost reports whether the ring ever had no room for a record.
func (s *State) Lost() bool { return s.load(offLost) != 0 }

// Len is the number of records in the ring, not drained yet.
func (s *State) Len() uint64 { return s.load(offHead) - s.load(offTail) }

// Pending reports whether the ring holds records not drained yet, or the
// thread dropped records or resource calls not reported yet (a count
// raised after the last read of a ring that stays empty, or whose thread
// ends, is reported all the same).
func (s *State) Pending() bool {
	return s.load(offHead) != s.load(offTail) || s.load(offLost) != s.seenLost || len(s.losses) > 0 ||
		s.load(offResLost) != s.seenResLost
}

// PendingRes is the resource call a thread is making, as res.S keeps it:
// its return address slot (INRES, 0: none), its frame's depth plus 1
// (INRESD), the exit address that hijacked the slot (INRESX), its
// descriptor, arguments and entry time (RESDESC, RESARG, RESTSC).
type PendingRes struct {
	Slot, Depth, Exit, Desc, TSC uint64
	Word                         uint64 // its frame's (Word): function and depth
	RelSince                     uint64 // ReleasingSince
	SigRes                       uint64 // SignalInRes
	Args                         [6]uint64
}

// PendingRes returns the resource call being made. The thread must be
// stopped.
func (s *State) PendingRes() PendingRes {
	p := PendingRes{Slot: s.load(offInRes), Depth: s.load(offInResD), Exit: s.load(offInResX), Desc: s.load(offResDesc), TSC: s.load(offResTSC),
		Word: s.load(offInResW), RelSince: s.load(offRelSince), SigRes: s.load(offSigRes)}
	for i := range p.Args {
		p.Args[i] = s.load(offResArg + 8*i)
	}
	return p
}

// SetPendingRes makes p the resource call being made: a forked child's,
// whose shadow stack holds its parent's frames; the call rtrace makes at
// a stop, whose nested calls the stubs then leave untraced. The thread
// must be stopped.
func (s *State) SetPendingRes(p PendingRes) {
	s.store(offInRes, p.Slot)
	s.store(offInResD, p.Depth)
	s.store(offInResX, p.Exit)
	s.store(offResDesc, p.Desc)
	s.store(offResTSC, p.TSC)
	s.store(offInResW, p.Word)
	s.store(offRelSince, p.RelSince)
	s.store(offSigRes, p.SigRes)
	for i, a := range p.Args {
		s.store(offResArg+8*i, a)
	}
}

// NestedRes decides as res_entry does whether a resource call whose
// return address is at slot, holding word, is nested in the call being
// made: that call's frame is still on the shadow stack, its slot (read
// with peek, on the thread's stack) holds the exit that hijacked it or its
// return address, and it is above slot on the stack, or at slot for a
// tail call (word is the exit), or below it when a signal interrupted it
// (SignalInRes). A call being made that a jump left is
// forgotten. The thread must be stopped.
func (s *State) NestedRes(slot, word uint64, peek func(uint64) (uint64, error)) bool {
	p := s.PendingRes()
	if p.Slot == 0 {
		return false
	}
	off := offFrames + (int(p.Depth)-1)*frameSize
	if p.Depth >= 1 && p.Depth <= uint64(s.Depth()) && s.load(off+8) == p.Slot && s.load(off+16) == p.Word {
		live := true
		if lo, hi := s.Stack(); p.Slot >= lo && p.Slot < hi {
			v, err := peek(p.Slot)
			live = err != nil || v == p.Exit || v == s.Frame(int(p.Depth)-1).Ret
		}
		if live && (p.Slot > slot || p.Slot == slot && word == p.Exit || p.Slot < slot && p.Slot == p.SigRes) {
			return true
		}
	}
	s.store(offInRes, 0) // left without returning
	return false
}

// SetMakingRes makes the call whose frame is at depth-1, its return
// address at slot hijacked with exit, the resource call being made (one
// rtrace records at stops), its descriptor and arguments left as they
// are. The thread must be stopped.
func (s *State) SetMakingRes(slot, depth, exit uint64) {
	s.store(offSigRes, 0)
	s.store(offInRes, slot)
	s.store(offInResD, depth)
	s.store(offInResX, exit)
	s.store(offInResW, s.load(offFrames+(int(depth)-1)*frameSize+16))
}

// DoneRes forgets the resource call being made if its frame is the one at
// depth-1 with its return address at slot (it returned).
func (s *State) DoneRes(slot, depth uint64) {
	if s.load(offInRes) == slot && s.load(offInResD) == depth {
		s.store(offInRes, 0)
	}
}

// SignalInRes notes, as rtrace delivers a signal to the thread, the
// resource call it interrupts, if any: its handler's calls are nested in
// that call even on an alternate stack that lies above its frame on the
// thread's stack (res_entry). The thread must be stopped.
func (s *State) SignalInRes() {
	s.store(offSigRes, s.load(offInRes))
}

// ReleasingSince is the TSC since which the thread is making a release
// whose record is not written yet (DescEntryTime, DescBoth), 0 for none:
// another thread's call made since may depend on what it released.
func (s *State) ReleasingSince() uint64 { return s.load(offRelSince) }

// SetCoarse sets the time (a TSC reading) the thread's resource calls
// take instead of reading the TSC (stub.S's NOWTSC), 0 for the TSC: the
// coarse clock of docs/FAST-PATH.md, which rtrace keeps current.
func (s *State) SetCoarse(tsc uint64) { s.store(offCoarse, tsc) }

// Coarse returns the time SetCoarse set.
func (s *State) Coarse() uint64 { return s.load(offCoarse) }
