package tracer

import (
	"maps"
	"slices"

	"golang.org/x/sys/unix"

	"rtrace/internal/uftrace"
	"rtrace/tracer/fast"
)

// process is one traced process (thread group).
type process struct {
	pid         int
	sid         string
	image       *image
	swallowCont bool // the SIGCONT rtrace sent to hand the process to PTRACE_SEIZE
	entered     bool // the program's entry point was reached
	// multi: it had a second thread; coarse: its only thread's state,
	// while its resource calls take the drain's clock (fast_coarse.go, drain/coarse.go).
	multi  bool
	coarse *fast.State
	// peakRSS: the largest VmHWM its threads' exit events read, in bytes
	// (usage.go).
	peakRSS uint64
	// ends: its threads' stack pointers at their exit events, in order;
	// scanned: its memory was scanned at its end (heapscan.go).
	ends    []threadEnd
	scanned bool
}

// frame is one entry on a thread's shadow stack.
type frame struct {
	ret   uint64              // the real return address
	slot  uint64              // where it lives on the stack (rsp at entry)
	f     *fn                 // the function called
	depth int                 // record depth, -1 when the call is not recorded
	call  *resCall            // a resource call being made (-e)
	reads []uftrace.ReadEvent // read= counters at the entry
}

// thread is one traced thread with its shadow stack.
type thread struct {
	tid  int
	proc *process
	// trapFirst: park let it report a pending SIGTRAP before parking it.
	trapFirst bool
	stack     []frame
	batch     []Rec // not yet handed to the sink
	depth     int   // recorded frames open
	// stackLo, stackHi: the thread's stack (stackRange), once a resource
	// call needed it (popDead); 0, 0: not known yet.
	stackLo, stackHi uint64
	// sigRes: the slot of the resource call a signal interrupted
	// (signalInRes): its handler's calls are nested in it.
	sigRes uint64
	// unhooked: the real return addresses are back on the stack while an
	// exception unwinds it (see hookUnwind).
	unhooked bool
	unwinds  []int             // shadow stack depth at each running unwind, outermost first
	jmpbufs  map[uint64]jmpbuf // what a longjmp to a jmp_buf returns to, by its address
	// setjmp: the setjmp call just recorded, until its hook sees the jmp_buf.
	setjmp setjmpCall
	// lastCPU: the CPU of the thread's last recorded call or return, plus
	// 1 (0: none yet), for -W cpu (the int3 engine's; the fast engine's is
	// in the thread's state).
	lastCPU uint64
	// backtrace: inside backtrace(), with the real return addresses on
	// the stack (hookBacktrace).
	backtrace bool
	// openEnds: the frames closed while it is set get no EXIT record
	// (closeAll at an exec).
	openEnds bool
	parked   bool // stopped by rtrace for an attach or detach
	// groupStop: it was in a group-stop (SIGSTOP) when attached.
	groupStop bool
	vforked   bool // a vfork child, in its parent's memory until it execs
	ending    bool // it stopped at its exit event (heapscan.go)
	// vforkWait: a vfork parent, waiting in the kernel until its child
	// execs or exits, where no tracer can stop it (the wait is killable
	// only); it runs none of its code before then. Cleared at its next
	// stop.
	vforkWait bool
	// fast: what the fast engine keeps of the thread.
	fast fastThread
}

// fastThread is what the fast engine keeps of a thread. A forked child
// starts with none of it but the resource call being made and the read=
// counters of the frames it shares with its parent (clone).
type fastThread struct {
	started bool // its first stop was seen (fastStart)
	// The thread's state and its key in the table; in a vfork child, the
	// parent's state its calls write to, and the parent.
	fs          *fast.State
	fsKey       uint64
	fsKeys      []uint64 // more keys, after arch_prctl(ARCH_SET_FS)
	vfork       *fast.State
	vforkParent *thread
	vforkFrames []fast.Frame // the parent's frames at the vfork
	// vforkShared: how many of them are not in the child's view (all,
	// for a child on a stack of its own: posix_spawn's).
	vforkShared int
	// forkFrames: a forked child not set up yet, with its parent's frames.
	forkFrames []fast.Frame
	forkRes    fast.PendingRes // and its resource call being made
	forkNeeded bool
	// res: the resource call being made, reported at the return of its
	// frame (a nested one is not reported).
	res *pendingRes
	// reads: the read= counters at the entry of the frames that have
	// them, by slot and depth (a tail call shares a slot).
	reads map[frameKey][]uftrace.ReadEvent
	// held: signals that came while the thread was inside a stub's
	// critical section, delivered when it leaves it (fastHold).
	held []heldSignal
}

// frameKey names a frame of the fast engine's shadow stack: its return
// address slot and depth.
type frameKey struct {
	slot  uint64
	depth int
}

// setjmpCall is a recorded call of setjmp: its entry's stack pointer
// (which its hook, reached by a jump, sees too), address and record depth.
type setjmpCall struct {
	rsp, addr uint64
	depth     int
}

// jmpbuf is what a setjmp saved, as a longjmp to it will find it: the
// shadow stack depth, and the setjmp call if it was recorded (addr 0: not).
type jmpbuf struct {
	n    int
	call setjmpCall
}

// saveJmpbuf remembers the jmp_buf of a setjmp's hook at shadow stack
// depth n, with the setjmp call recorded just before if it is this one.
func (th *thread) saveJmpbuf(regs *unix.PtraceRegs, n int) {
	if th.jmpbufs == nil {
		th.jmpbufs = map[uint64]jmpbuf{}
	}
	jb := jmpbuf{n: n}
	if th.setjmp.addr != 0 && th.setjmp.rsp == regs.Rsp {
		jb.call = th.setjmp
	}
	th.setjmp = setjmpCall{}
	th.jmpbufs[regs.Rdi] = jb
}

// enter pushes a frame for a call of f and returns whether it is recorded:
// every call but a hidden one is. What a trace keeps of them (uftrace's
// -F/-N/-D/-t/--max-stack) is the post-processor's decision
// (postproc.NewFuncStage), the same for every engine.
func (th *thread) enter(f *fn, ret, slot uint64, hidden bool) (frame, bool) {
	fr := frame{ret: ret, slot: slot, f: f, depth: -1}
	if !hidden {
		fr.depth = th.depth
		th.depth++
	}
	th.stack = append(th.stack, fr)
	return fr, !hidden
}

// leave pops the top frame and returns it.
func (th *thread) leave() frame {
	fr := th.stack[len(th.stack)-1]
	th.stack = th.stack[:len(th.stack)-1]
	if fr.depth >= 0 {
		th.depth--
	}
	return fr
}

// exit pops the top frame of th, records its EXIT when the call was
// recorded, and returns it. The return value is known only at a return
// (regs non-nil); frames closed otherwise (exit(), exec, unwinding) have none.
func (t *Tracer) exit(th *thread, ts uint64, regs *unix.PtraceRegs) frame {
	fr := th.leave()
	if fr.call != nil {
		t.resExit(th, &fr, regs)
	}
	if fr.depth >= 0 && !th.openEnds {
		if regs != nil && t.cfg.WatchCPU {
			if w, _, ok := watchCPU(th, &th.lastCPU, ts, fr.depth+1); ok {
				t.record(th, w.Record, w.Payload)
			}
		}
		if regs != nil && len(fr.reads) > 0 {
			recordReads(th, ts, fr.depth+1, fr.f.reads, fr.reads, t.record)
		}
		var payload []byte
		if regs != nil && len(fr.f.rets) > 0 {
			payload = t.values(th, fr.f.rets, regs)
		}
		t.record(th, uftrace.Record{Time: ts, Type: uftrace.Exit, Depth: fr.depth, Addr: fr.f.addr}, payload)
	}
	return fr
}

// closeAll exits every open frame: at exit(), exec, or the death of the thread.
func (t *Tracer) closeAll(th *thread, ts uint64) {
	for len(th.stack) > 0 {
		t.exit(th, ts, nil)
	}
	t.fastClose(th, ts)
}

// endThread ends the frames th has open when it ends (exit, pthread_exit,
// a crash, another thread's exec): without EXIT records, as uftrace leaves
// them (libmcount/mcount.c, mtd_dtor: no exits unless -e), so that replay
// shows where the thread was, a crash site too; with CloseAtEnd (-e), at
// ts, as uftrace -e estimates them.
func (t *Tracer) endThread(th *thread, ts uint64) {
	if t.cfg.CloseAtEnd {
		t.closeAll(th, ts)
	} else {
		t.leaveOpen(th, ts)
	}
}

// leaveOpen ends every frame of th without recording their exits: th
// exec'd. uftrace leaves them open, and its replay shows the new program
// from depth 0 after a call of exec* (utils/fstack.c, FSTACK_FL_EXEC):
// exits written now would print at depth 0 before it, with durations
// from another program.
func (t *Tracer) leaveOpen(th *thread, ts uint64) {
	th.openEnds = true
	t.closeAll(th, ts)
	th.openEnds = false
}

// clone copies the shadow stack for a forked child: its memory holds the
// same hijacked return addresses, and a resource call being made returns
// in the child too, which reports what it did there (as the fast
// engine's child does, through its copy of the call's frame).
func (th *thread) clone(tid int, p *process) *thread {
	c := *th
	c.tid, c.proc = tid, p
	c.stack = append([]frame(nil), th.stack...)
	c.batch = nil
	c.jmpbufs = maps.Clone(th.jmpbufs) // a longjmp in the child may use them
	c.unwinds = slices.Clone(th.unwinds)
	c.vforked, c.ending = false, false
	// Signals held for the parent are not the child's (fork(2): its
	// pending signals are none).
	c.fast = fastThread{res: th.fast.res, reads: maps.Clone(th.fast.reads)}
	return &c
}

// dropCalls forgets the resource calls being made: a vfork child's, which
// its parent reports (the child returns through none of its frames).
func (th *thread) dropCalls() {
	th.fast.res = nil
	for i := range th.stack {
		th.stack[i].call = nil
	}
}
