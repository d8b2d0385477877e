package tracer

import (
	"encoding/binary"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"rtrace/internal/trace"
	"rtrace/tracer/fast"
	"rtrace/tracer/fast/drain"
	"rtrace/tracer/ptrace"
	"rtrace/tracer/unwind"
)

// resFn ties a traced function to the resource module entry it reports.
type resFn struct {
	rf  *ResFunc
	res int // the resource type's id in the stream (1-based)
	// shmRole: the shm module's shmctl (1) or shmdt (2), whose calls end
	// segments (shmend.go); segRes: the segment's resource type.
	shmRole, segRes int
}

// newResFn is the resFn of module m's function rf, ids numbering the
// resource types.
func newResFn(m *ResModule, rf *ResFunc, ids map[*ResType]int) *resFn {
	f := &resFn{rf: rf, res: ids[&m.Resources[rf.Res]]}
	if f.shmRole = shmEndRole(m, rf); f.shmRole != 0 {
		f.segRes = ids[&m.Resources[0]]
	}
	return f
}

// resCall is a resource call between its entry and its return.
type resCall struct {
	f      *resFn
	args   [6]uint64
	time   time.Duration // time of day at the entry
	frames []trace.Frame
	// recArgs are the argument records, read at the entry (a path may be
	// freed by the time the call returns).
	recArgs []trace.Arg
	// reported: a release whose effect does not depend on its result
	// (ResFunc.AtEntry), reported at its entry, before what it releases
	// can be another thread's; its frame stays for the calls nested in it.
	reported bool
	// shmKeep: an IPC_RMID of a segment still attached; shmEnds: the
	// last shmdt of segment shmSeg, marked for removal (shmEntry).
	shmKeep, shmEnds bool
	shmSeg           uint64
}

// resIDs numbers the resource types of the selected modules in order,
// from 1: the ids RESR packets carry.
func resIDs(mods []*ResModule) map[*ResType]int {
	ids := map[*ResType]int{}
	n := 0
	for _, m := range mods {
		for i := range m.Resources {
			n++
			ids[&m.Resources[i]] = n
		}
	}
	return ids
}

// resEntry starts a resource call at the entry of f (the int3 engine,
// its frame fr just pushed): it is reported unless tracing is off or it is
// nested in another resource call of the thread (realloc calling malloc,
// fopen calling open).
func (t *Tracer) resEntry(th *thread, fr *frame, f *fn, regs *unix.PtraceRegs, ret uint64) {
	if !t.on || t.res == nil {
		return
	}
	for i := len(th.stack) - 2; i >= 0; i-- {
		if out := &th.stack[i]; out.call != nil {
			// Its slot holds the return breakpoint or its return address
			// put back; another call's when a jump left it.
			v, err := ptrace.PeekWord(th.tid, out.slot)
			live := err != nil || th.proc.image.isRet(v) || v == out.ret
			if live && (nestedIn(out.slot, regs.Rsp, th.proc.image.isRet(ret)) || out.slot < regs.Rsp && out.slot == th.sigRes) {
				return // a handler's, on an alternate stack above it, too
			}
			out.call = nil // left without returning
		}
	}
	fr.call = t.newResCall(th, f, regs, ret)
	t.resAtEntry(th, fr.call, regs)
}

// resAtEntry reports at its entry a release whose effect does not depend
// on its result (free, operator delete): before what it releases can be
// another thread's, whose call of a stop handled before its return's
// would come first.
func (t *Tracer) resAtEntry(th *thread, c *resCall, regs *unix.PtraceRegs) {
	if c != nil && (c.f.rf.AtEntry || c.f.rf.Effect == freeArg) {
		t.resReport(th, c, regs)
		c.reported = true
	}
}

// nestedIn decides whether a call whose return address is at slot is
// nested in the resource call whose return address is at outer, a frame
// rtrace still holds: the outer frame is above the new call's on the stack,
// or the same for a tail call (tail: the slot holds rtrace's return
// address). A frame a jump rtrace could not follow left (__builtin_longjmp,
// a longjmp to a copied jmp_buf) is below the stack pointer: the thread's
// calls are reported again.
func nestedIn(outer, slot uint64, tail bool) bool {
	return outer > slot || outer == slot && tail
}

// pendingRes is the fast engine's resource call being made: its frame
// on the thread's shadow stack, and what its entry read.
type pendingRes struct {
	key  frameKey
	call *resCall
}

// fastResEntry starts a resource call at the entry of f on the fast
// engine, stopped at its int3 with its return address ret; nil when it is
// not reported (tracing off, or nested in the call being made: the
// state's, a stub's or one made at a stop, decides as res_entry does).
func (t *Tracer) fastResEntry(th *thread, st *fast.State, f *fn, regs *unix.PtraceRegs, ret uint64) *resCall {
	if !t.on || t.res == nil {
		return nil
	}
	if st.NestedRes(regs.Rsp, ret, func(a uint64) (uint64, error) { return ptrace.PeekWord(th.tid, a) }) {
		return nil
	}
	th.fast.res = nil // left without returning, if any
	return t.newResCall(th, f, regs, ret)
}

// newResCall reads a resource call at the entry of f: its arguments, the
// argument records and the backtrace.
func (t *Tracer) newResCall(th *thread, f *fn, regs *unix.PtraceRegs, ret uint64) *resCall {
	c := &resCall{f: f.res, time: timeOfDay()}
	for i, r := range intArgRegs {
		c.args[i] = r(regs)
	}
	for _, a := range f.res.rf.Args {
		c.recArgs = append(c.recArgs, trace.Arg{Name: a.Name, Value: t.argText(th.tid, a, c.args[a.Arg])})
	}
	if rf := f.res.rf; rf.Len > 0 {
		c.args[argLen] = t.strLen(th.tid, c.args[rf.Len-1], rf.Wide)
	}
	if f.res.shmRole != 0 {
		shmEntry(c, th.proc.pid)
	}
	if depth := t.cfg.Backtrace; depth > 0 && t.wantBacktrace(f.res.rf, &c.args) {
		pcs := t.backtrace(th, unwind.Regs{PC: ret, SP: regs.Rsp + 8, BP: regs.Rbp}, depth)
		c.frames = make([]trace.Frame, len(pcs))
		for i, pc := range pcs {
			c.frames[i].Addr = pc
		}
	}
	return c
}

// wantBacktrace: backtraces go with allocations, with --backtrace-all with
// every call, and with --monitor only with allocations of those sizes.
func (t *Tracer) wantBacktrace(rf *ResFunc, args *[6]uint64) bool {
	return wantBacktrace(rf, args, t.cfg.BacktraceAll, t.cfg.Monitor)
}

func wantBacktrace(rf *ResFunc, args *[6]uint64, all bool, monitor []uint64) bool {
	if !rf.allocates() {
		return all
	}
	if len(monitor) == 0 {
		return true
	}
	size := callSize(rf, args)
	for _, s := range monitor {
		if s == size {
			return true
		}
	}
	return false
}

// allocates reports whether rf's calls allocate (release functions only
// release).
// releases reports whether a call of rf may release a resource as well
// as allocate one (realloc, mremap, freopen, dup2).
func (rf *ResFunc) releases() bool {
	switch rf.Effect {
	case freeArg, freeArgOK, shmctlRmid, reallocPtr, reallocMap, freopenFp, dupFd, rebindFd, freeAllOK:
		return true
	}
	return false
}

func (rf *ResFunc) allocates() bool {
	return rf.Effect != freeArg && rf.Effect != freeArgOK && rf.Effect != shmctlRmid && rf.Effect != freeAllOK
}

// resExit finishes the resource call of fr at its return (regs non-nil)
// and reports what it did; a call cut short (longjmp, exit) reports nothing.
func (t *Tracer) resExit(th *thread, fr *frame, regs *unix.PtraceRegs) {
	if fr.call == nil || regs == nil || fr.call.reported {
		return
	}
	t.resReport(th, fr.call, regs)
}

// resReport reports what the resource call c did, given the registers at
// its return.
func (t *Tracer) resReport(th *thread, c *resCall, regs *unix.PtraceRegs) {
	rf := c.f.rf
	peek := func(addr uint64) (uint64, error) { return ptrace.PeekWord(th.tid, addr) }
	evs := resEffects(nil, rf, &c.args, regs.Rax, peek)
	if c.f.shmRole != 0 {
		evs = shmEffects(evs, c)
	}
	for _, e := range evs {
		tc := &trace.Call{Time: c.time, Tid: th.tid, Res: c.f.res, Alloc: e.Alloc, Name: rf.Display(), ID: e.ID, Size: e.Size, Args: c.recArgs}
		if e.Res != 0 {
			tc.Res = e.Res // another resource type than the function's
		}
		if e.Alloc || t.cfg.BacktraceAll {
			tc.Frames = c.frames
		}
		t.emit(t.res.Call(tc))
	}
}

// resEvent is one thing a resource call did: allocate (Alloc) or release
// the resource ID; an allocation has a Size.
type resEvent = drain.Effect

// resEffects decides what a call of rf with args that returned ret did to
// its resources, in the order they are reported. A failed call does
// nothing. peek reads a word of the process: the out argument of a call
// that returns its resource through a pointer, read only when it succeeded.
// The events are appended to out[:0].
func resEffects(out []resEvent, rf *ResFunc, args *[6]uint64, ret uint64, peek func(addr uint64) (uint64, error)) []resEvent {
	out = out[:0]
	call := func(alloc bool, id uint64) {
		e := resEvent{Alloc: alloc, ID: id}
		if alloc {
			e.Size = callSize(rf, args)
		}
		out = append(out, e)
	}
	failedPtr := ret == 0 || ret == ^uint64(0)
	failedFd := int64(ret) < 0 || int32(ret) < 0
	switch rf.Effect {
	case allocRet:
		if !failedPtr {
			call(true, ret)
		}
	case allocRetFd:
		if !failedFd {
			call(true, uint64(uint32(ret)))
		}
	case allocOutPtr:
		if uint32(ret) == 0 {
			if v, err := peek(args[rf.Out]); err == nil {
				call(true, v)
			}
		}
	case allocOutFds:
		if uint32(ret) == 0 {
			if v, err := peek(args[rf.Out]); err == nil {
				call(true, uint64(uint32(v)))
				call(true, v>>32)
			}
		}
	case freeArg:
		if id := args[rf.ID]; id != 0 {
			call(false, id)
		}
	case freeArgOK:
		if uint32(ret) == 0 {
			id := uint64(0)
			if rf.ID >= 0 {
				id = args[rf.ID]
			}
			call(false, id)
		}
	case reallocPtr:
		// realloc(p, 0) may free p and return NULL; a failed realloc keeps p.
		if old := args[0]; old != 0 && (ret != 0 || callSize(rf, args) == 0) {
			call(false, old)
		}
		if ret != 0 {
			call(true, ret)
		}
	case reallocMap:
		if !failedPtr {
			call(false, args[0])
			call(true, ret)
		}
	case freopenFp:
		if args[2] != 0 {
			call(false, args[2])
		}
		if !failedPtr {
			call(true, ret)
		}
	case dupFd:
		if !failedFd {
			if rf.Sym != "dup" && uint32(args[1]) != uint32(args[0]) {
				call(false, uint64(uint32(args[1]))) // dup2 closes newfd first
			}
			call(true, uint64(uint32(ret)))
		}
	case fcntlDup:
		if cmd := uint32(args[1]); (cmd == unix.F_DUPFD || cmd == unix.F_DUPFD_CLOEXEC) && !failedFd {
			call(true, uint64(uint32(ret)))
		}
	case shmctlRmid:
		if uint32(args[1]) == unix.IPC_RMID && uint32(ret) == 0 {
			call(false, uint64(uint32(args[0])))
		}
	case allocArg, transfer:
		call(true, args[rf.ID])
	case allocOne:
		call(true, 1)
	case rebindFd:
		if uint32(ret) == 0 {
			fd := uint64(uint32(args[rf.ID]))
			call(false, fd)
			call(true, fd)
		}
	case freeAllOK:
		if uint32(ret) == 0 {
			call(false, ^uint64(0))
		}
	}
	return out
}

// callSize is the size an allocation reports: its size argument (times
// another for calloc), 1 for resources without a size.
func callSize(rf *ResFunc, args *[6]uint64) uint64 {
	if rf.Len > 0 {
		if rf.Wide {
			return args[argLen] * 4
		}
		return args[argLen]
	}
	if rf.Size == 0 {
		return 1
	}
	n := args[rf.Size-1]
	if rf.SizeMul > 0 {
		n *= args[rf.SizeMul-1]
	}
	if rf.Scale > 0 {
		n *= uint64(rf.Scale)
	}
	return n
}

// argText shows an argument record's value.
func (t *Tracer) argText(tid int, a ArgRec, v uint64) string {
	if a.Kind == 's' {
		return t.readString(tid, v)
	}
	return argValue(a, v)
}

// argValue shows the value of an argument record that is not a string.
func argValue(a ArgRec, v uint64) string {
	switch a.Kind {
	case 'd':
		return strconv.FormatInt(int64(int32(v)), 10)
	case 'o':
		return "0" + strconv.FormatUint(uint64(uint32(v)), 8)
	}
	return "0x" + strconv.FormatUint(v, 16)
}

// timeOfDay is the local time of day, as sp-rtrace's call timestamps.
func timeOfDay() time.Duration {
	n := time.Now()
	y, m, d := n.Date()
	return n.Sub(time.Date(y, m, d, 0, 0, 0, 0, n.Location()))
}

// backtrace unwinds th's stack from the caller state regs. The return
// addresses rtrace swapped for its return breakpoint or the fast engine's
// exit stub are read as the real ones: the shadow stack knows them by
// slot.
func (t *Tracer) backtrace(th *thread, regs unwind.Regs, depth int) []uint64 {
	im := th.proc.image
	if im.unwinder == nil {
		return nil
	}
	mem := &shadowMem{mem: unwind.ProcMem(th.tid), rets: shadowRets(th), hijacked: im.hijacked}
	if im.hijacked(regs.PC) {
		// A hijacked return address (a traced PLT stub jumped here).
		for i := len(mem.rets) - 1; i >= 0; i-- {
			if mem.rets[i].slot == regs.SP-8 {
				regs.PC = mem.rets[i].ret
				break
			}
		}
	}
	return im.unwinder.Backtrace(mem, regs, depth, nil)
}

// slotRet is a hijacked return address's slot and the real address.
type slotRet struct{ slot, ret uint64 }

// shadowRets lists th's hijacked return addresses, outermost first: the
// int3 engine's shadow stack, or the fast engine's in the thread's state.
func shadowRets(th *thread) []slotRet {
	var out []slotRet
	for _, fr := range th.stack {
		out = append(out, slotRet{fr.slot, fr.ret})
	}
	if st := th.fastView(); st != nil {
		for i := range st.Depth() {
			fr := st.Frame(i)
			out = append(out, slotRet{fr.Slot, fr.Ret})
		}
	}
	return out
}

// shadowMem reads the target's memory with the real return addresses in
// the slots rtrace hijacked: those of the shadow stack that hold one of
// rtrace's return addresses (a frame a jump left may be live memory now),
// as the fast engine's walker reads them (walk.S, walk_real).
type shadowMem struct {
	mem      unwind.Memory
	rets     []slotRet
	hijacked func(uint64) bool
}

func (m *shadowMem) ReadMemory(buf []byte, addr uint64) (int, error) {
	n, err := m.mem.ReadMemory(buf, addr)
	if n <= 0 {
		return 0, err
	}
	for _, r := range m.rets {
		if r.slot >= addr && r.slot+8 <= addr+uint64(n) && m.hijacked(binary.LittleEndian.Uint64(buf[r.slot-addr:])) {
			binary.LittleEndian.PutUint64(buf[r.slot-addr:], r.ret)
		}
	}
	return n, nil
}

// hijacked reports whether v is one of rtrace's return addresses in im:
// the int3 engine's return breakpoints, the fast engine's exit stubs.
func (im *image) hijacked(v uint64) bool {
	return im.isRet(v) || im.fast != nil && im.fast.isExit(v)
}
