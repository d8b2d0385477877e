package tracer

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"rtrace/internal/elfx"
	"rtrace/internal/uftrace"
	"rtrace/tracer/bp"
	"rtrace/tracer/ptrace"
)

// hookKind is what a hook breakpoint on a runtime-library function does.
// Hooks keep the shadow stacks right where control flow bypasses returns,
// as uftrace's libmcount wrappers do (libmcount/wrap.c).
type hookKind uint8

const (
	// hookUnwind: the unwinder is about to walk this thread's stack (a C++
	// throw or rethrow, pthread_exit's forced unwind). Put the real return
	// addresses back: the unwinder finds no unwind info for the return
	// breakpoint and would terminate the program.
	hookUnwind hookKind = iota + 1
	// hookCatch: __cxa_begin_catch, called from the landing pad of the frame
	// that caught. Frames below it were unwound: record their exits, then
	// hijack the live frames' return addresses again.
	hookCatch
	// hookSetjmp: remember the shadow stack depth of the jmp_buf in rdi.
	hookSetjmp
	// hookLongjmp: end the frames above the depth saved for the jmp_buf
	// in rdi, at the time of the jump (longjmpShown).
	hookLongjmp
	// hookBacktrace: glibc's backtrace(), which walks the stack with the
	// unwinder: put the real return addresses back for the walk, as
	// uftrace's wrapper does (libmcount/wrap.c, backtrace), and
	// hookBacktraceEnd, at its ret instructions: hijack them again.
	hookBacktrace
	hookBacktraceEnd
	// hookLoader: the loader's rendezvous function (_dl_debug_state),
	// called before and after it maps or unmaps libraries (dlopen,
	// dlclose): compare the maps with the modules rtrace knows.
	hookLoader
)

// hookNames maps the runtime functions rtrace hooks to what it does there.
// Aliases at one address need only one name to match.
var hookNames = map[string]hookKind{
	"_Unwind_RaiseException":    hookUnwind,
	"_Unwind_Resume_or_Rethrow": hookUnwind,
	"_Unwind_ForcedUnwind":      hookUnwind,
	"pthread_exit":              hookUnwind,
	"__cxa_begin_catch":         hookCatch,
	"_setjmp":                   hookSetjmp,
	"setjmp":                    hookSetjmp,
	"__sigsetjmp":               hookSetjmp,
	"sigsetjmp":                 hookSetjmp,
	"longjmp":                   hookLongjmp,
	"_longjmp":                  hookLongjmp,
	"siglongjmp":                hookLongjmp,
	"__libc_siglongjmp":         hookLongjmp,
	"__longjmp_chk":             hookLongjmp,
	"_dl_debug_state":           hookLoader,
	"backtrace":                 hookBacktrace,
}

// hookSlots is the scratch room kept for hook breakpoints' out-of-line copies.
const hookSlots = 32

// hookModule plants the hook breakpoints of one module of im loaded at
// bias: the executable (a static one holds libc) or a library.
func (t *Tracer) hookModule(mem *os.File, im *image, f *elfx.File, bias uint64) {
	plant := func(fn elfx.Func, kind hookKind) {
		if err := t.plantHook(mem, im, fn.Value+bias, kind); err != nil {
			fmt.Fprintf(t.cfg.Warn, "rtrace: warning: cannot hook %s in %s: %v\n", fn.Name, f.Path, err)
		} else if kind == hookUnwind {
			im.unwinders = append(im.unwinders, [2]uint64{fn.Value + bias, fn.Value + bias + fn.Size})
		}
	}
	// glibc's setjmp and _setjmp set %esi and jump to __sigsetjmp: a hook
	// on a wrapper was a second stop per call (one more per thread, in
	// start_thread) for the same jmp_buf at the same depth. A wrapper is
	// hooked only if what it jumps to has no setjmp hook.
	type wrapper struct {
		fn elfx.Func
		to uint64
	}
	var wrappers []wrapper
	for _, fn := range f.Funcs {
		kind := hookNames[fn.Name]
		if kind == 0 {
			continue
		}
		if kind == hookSetjmp {
			code := make([]byte, 16)
			if n, _ := mem.ReadAt(code, int64(fn.Value+bias)); n > 0 {
				if to, ok := bp.TailJump(code[:n], fn.Value+bias); ok && to != fn.Value+bias {
					wrappers = append(wrappers, wrapper{fn, to})
					continue
				}
			}
		}
		if kind == hookBacktrace {
			// Without a hook at each of its returns, the addresses put
			// back would stay: leave it alone.
			code := make([]byte, fn.Size)
			n, _ := mem.ReadAt(code, int64(fn.Value+bias))
			rets, ok := bp.Returns(code[:n], fn.Value+bias)
			if !ok {
				fmt.Fprintf(t.cfg.Warn, "rtrace: warning: cannot hook %s in %s: its returns are not all known; under rtrace it sees one frame\n", fn.Name, f.Path)
				continue
			}
			planted := true
			for _, r := range rets {
				if err := t.plantHook(mem, im, r, hookBacktraceEnd); err != nil {
					fmt.Fprintf(t.cfg.Warn, "rtrace: warning: cannot hook %s in %s: %v\n", fn.Name, f.Path, err)
					planted = false
				}
			}
			if !planted {
				continue // an end not hooked would leave the real addresses for good
			}
		}
		plant(fn, kind)
	}
	for _, w := range wrappers {
		if b := im.bps.At(w.to); b == nil || b.Kind&bp.Hook == 0 || hookKind(b.Hook) != hookSetjmp {
			plant(w.fn, hookSetjmp)
		}
	}
}

// library returns the parsed ELF file of a library, parsed once per run.
func (t *Tracer) library(path string) (*elfx.File, error) {
	if f, ok := t.libs[path]; ok {
		if f == nil {
			return nil, errNotELF
		}
		return f, nil
	}
	f, err := elfx.Open(path)
	if err != nil {
		t.libs[path] = nil
		return nil, err
	}
	f = t.withSyms(f)
	t.libs[path] = f
	return f, nil
}

// plantHook plants an int3 hook at addr, its displaced instruction run out
// of line from the scratch room kept for hooks.
func (t *Tracer) plantHook(mem *os.File, im *image, addr uint64, kind hookKind) error {
	if b := im.bps.At(addr); b != nil {
		b.Kind |= bp.Hook
		b.Hook = uint8(kind)
		return nil
	}
	b, err := stageInt3(mem, im, addr)
	if err != nil {
		return err
	}
	if err := armInt3(mem, b); err != nil {
		return err
	}
	b.Kind, b.Hook = bp.Hook, uint8(kind)
	im.bps.Add(b)
	return nil
}

// stageInt3 plans an int3 at addr whose displaced instruction runs out of
// line in the image's hook scratch room, and writes that copy there. The
// int3 itself is not written yet (armInt3), nor the breakpoint added.
func stageInt3(mem *os.File, im *image, addr uint64) (*bp.Breakpoint, error) {
	if im.hookNext+bp.MaxSlot > im.hookEnd {
		return nil, fmt.Errorf("no scratch room left")
	}
	code := make([]byte, 16)
	if _, err := mem.ReadAt(code, int64(addr)); err != nil {
		return nil, err
	}
	plan, err := bp.Prepare(code, addr, im.hookNext)
	if err != nil {
		return nil, err
	}
	if len(plan.Slot) > 0 {
		if _, err := mem.WriteAt(plan.Slot, int64(im.hookNext)); err != nil {
			return nil, err
		}
		im.hookNext += uint64(len(plan.Slot)+15) &^ 15
	}
	return &bp.Breakpoint{Addr: addr, Orig: code[0], Plan: plan, Func: -1}, nil
}

// armInt3 writes the int3 of a staged breakpoint.
func armInt3(mem *os.File, b *bp.Breakpoint) error {
	_, err := mem.WriteAt([]byte{bp.Int3}, int64(b.Addr))
	return err
}

// hook runs the hook of b for th, stopped at its entry.
func (t *Tracer) hook(th *thread, b *bp.Breakpoint, regs *unix.PtraceRegs, ts uint64) {
	if th.proc.image.fast != nil {
		t.fastHook(th, hookKind(b.Hook), regs, ts)
		return
	}
	switch hookKind(b.Hook) {
	case hookUnwind:
		// Frames below rsp are dead (skipped by an unhooked longjmp): their
		// slots may now hold live data of the current frames.
		t.popBelow(th, regs.Rsp, ts)
		th.realRets()
		th.backtrace = false // a throw from inside the walk: the catch hijacks
		// Frames below this mark belong to this unwind; an exception thrown
		// and caught meanwhile (in a destructor) must leave them alone. One
		// unwinder function calling another is the same unwind.
		if !th.fromUnwinder(regs.Rsp) {
			th.unwinds = append(th.unwinds, len(th.stack))
		}
		th.unhooked = true
	case hookCatch:
		// rsp is the catching frame's, less __cxa_begin_catch's return address.
		t.popBelow(th, regs.Rsp+8, ts)
		if !th.unhooked {
			break
		}
		// This catch ends the innermost unwind. The frames an outer unwind,
		// still running, is walking keep their real return addresses.
		from := 0
		if n := len(th.unwinds); n > 0 {
			th.unwinds = th.unwinds[:n-1]
			if n > 1 {
				from = min(th.unwinds[n-2], len(th.stack))
			}
		}
		th.hijackRets(from)
		th.unhooked = len(th.unwinds) > 0
	case hookSetjmp:
		th.saveJmpbuf(regs, len(th.stack))
	case hookLongjmp:
		th.backtrace = false // out of a backtrace walk, if in one: its end hook will not run
		jb, ok := th.jmpbufs[regs.Rdi]
		if !ok {
			break
		}
		var top uint64 // the longjmp call recorded, if it is one
		if n := len(th.stack); n > 0 && th.stack[n-1].depth >= 0 && th.stack[n-1].slot == regs.Rsp {
			top = th.stack[n-1].f.addr
		}
		// As uftrace records a longjmp it shows: the frames skipped stay
		// open, and setjmp returns a second time.
		shown := longjmpShown(th.proc.image, jb, top)
		th.openEnds = shown
		for len(th.stack) > jb.n {
			t.exit(th, ts, nil)
		}
		th.openEnds = false
		if shown {
			t.record(th, uftrace.Record{Time: ts, Type: uftrace.Exit, Depth: jb.call.depth, Addr: jb.call.addr}, t.setjmpReturn(th, jb.call.addr, regs, longjmpValue(regs)))
		}
		th.rehook(regs.Rsp + 1)
	case hookBacktrace:
		if !th.unhooked && !th.backtrace {
			th.realRets()
			th.backtrace = true
		}
	case hookBacktraceEnd:
		if th.backtrace {
			th.backtrace = false
			th.rehook(regs.Rsp) // backtrace's own call, about to return
		}
	case hookLoader:
		t.syncModules(th, ts)
	}
}

// realRets puts the real return addresses of th's frames back on its
// stack, over a return breakpoint only: a frame a jump rtrace could not
// follow left may have its slot in a live frame's memory now.
func (th *thread) realRets() {
	im := th.proc.image
	for i := len(th.stack) - 1; i >= 0; i-- {
		// Top down: of two frames sharing a slot (a tail call), the
		// lower one's real return address is the one that stays.
		if fr := th.stack[i]; !im.isRet(fr.ret) {
			if v, err := ptrace.PeekWord(th.tid, fr.slot); err == nil && im.isRet(v) {
				ptrace.PokeWord(th.tid, fr.slot, fr.ret)
			}
		}
	}
}

// recoverCaller puts the real return address of the caller of th's top
// frame back on the stack: only the innermost call's return is rtrace's,
// so that code walking the stack finds the real ones, as uftrace's
// auto-recover does (libmcount/misc.c, mcount_auto_restore). rehook
// hijacks it again when the top frame goes. Not in a vfork child (its
// caller may be its parent's frame, which the parent returns through
// later), nor while the real ones stay anyway (an exception unwinds, a
// backtrace walks: no return re-hooks then), nor into a slot not above the
// top frame's (a tail call's, or a dead frame's).
func (th *thread) recoverCaller() {
	n := len(th.stack)
	if n < 2 || th.vforked || th.unhooked || th.backtrace {
		return
	}
	slot := th.stack[n-1].slot
	if th.stack[n-2].slot <= slot {
		return // a tail call (one slot), or a dead frame below
	}
	im := th.proc.image
	for i := n - 2; i >= 0; i-- {
		// A caller that was tail-called has no return address of its
		// own: its caller's is in the slot they share.
		if fr := th.stack[i]; !im.isRet(fr.ret) {
			// Only over the return breakpoint: a frame a jump rtrace
			// could not follow left (__builtin_longjmp) may have its slot
			// in a live frame now, holding another call's return address.
			if v, err := ptrace.PeekWord(th.tid, fr.slot); err == nil && fr.slot > slot && im.isRet(v) {
				ptrace.PokeWord(th.tid, fr.slot, fr.ret)
			}
			return
		}
	}
}

// rehook aims the return of th's top frame at the return breakpoint
// again (recoverCaller put its real return address back) when its slot is
// at least min, unless the real ones are to stay (an exception unwinds, a
// backtrace walks), and only over its own return address: a frame a jump
// rtrace could not follow left may have its slot in a live frame now.
func (th *thread) rehook(min uint64) {
	n := len(th.stack)
	if n == 0 || th.unhooked || th.backtrace || th.stack[n-1].slot < min {
		return
	}
	slot := th.stack[n-1].slot
	v, err := ptrace.PeekWord(th.tid, slot)
	if err != nil {
		return
	}
	// The frame's return address, or for a tail-called frame (its return
	// address the breakpoint) that of the frame below it at the same slot.
	im := th.proc.image
	for i := n - 1; i >= 0 && th.stack[i].slot == slot; i-- {
		if v == th.stack[i].ret {
			ptrace.PokeWord(th.tid, slot, im.retAddr)
			return
		}
		if !im.isRet(th.stack[i].ret) {
			return
		}
	}
}

// hijackRets aims the return addresses of th's frames from the from-th
// on at the return breakpoint again.
func (th *thread) hijackRets(from int) {
	im := th.proc.image
	for _, fr := range th.stack[from:] {
		// Over what rtrace left only: the frame's return address, or a
		// return breakpoint.
		if v, err := ptrace.PeekWord(th.tid, fr.slot); err == nil && (v == fr.ret || im.isRet(v)) && v != im.retAddr {
			ptrace.PokeWord(th.tid, fr.slot, im.retAddr)
		}
	}
}

// longjmpShown reports whether a longjmp to jb, made by a call of top
// (0: none recorded), is recorded as uftrace records one: a call of
// longjmp that does not return, then a second return of the setjmp that
// saved jb, which uftrace's replay shows at the setjmp's depth
// (utils/fstack.c, FSTACK_FL_LONGJMP). Both calls must be recorded: a
// longjmp from a library, or to a setjmp not recorded, closes the frames
// it skips instead.
func longjmpShown(im *image, jb jmpbuf, top uint64) bool {
	if jb.call.addr == 0 || top == 0 {
		return false
	}
	f := im.fnAt(top)
	return f != nil && hookNames[f.name] == hookLongjmp
}

// popBelow records the exits of th's frames whose return address slot is
// below sp: frames that are gone from the stack.
func (t *Tracer) popBelow(th *thread, sp uint64, ts uint64) {
	for len(th.stack) > 0 && th.stack[len(th.stack)-1].slot < sp {
		t.exit(th, ts, nil)
	}
}

// fromUnwinder says whether the unwinder function whose hook stopped th
// (rsp at its entry) was called by another one: libgcc's
// _Unwind_Resume_or_Rethrow, a C++ rethrow, calls _Unwind_RaiseException,
// and both are hooked. That is one unwind, caught once.
func (th *thread) fromUnwinder(rsp uint64) bool {
	ret, err := ptrace.PeekWord(th.tid, rsp)
	if err != nil {
		return false
	}
	for _, r := range th.proc.image.unwinders {
		if ret > r[0] && ret <= r[1] {
			return true
		}
	}
	return false
}

// setjmpReturn is the payload of the exit of the setjmp call at addr that
// returns val, when -R asks for its return value (nil otherwise): rtrace
// writes a setjmp's exits itself, at the call (0) and at a longjmp to it
// (longjmpValue), as uftrace shows them (_setjmp() = 0, } = 1;).
func (t *Tracer) setjmpReturn(th *thread, addr uint64, regs *unix.PtraceRegs, val uint64) []byte {
	f := th.proc.image.fnAt(addr)
	if f == nil || len(f.rets) == 0 {
		return nil
	}
	r := *regs
	r.Rax = val
	return t.values(th, f.rets, &r)
}

// longjmpValue is what setjmp returns a second time at the entry of a
// longjmp (regs): its second argument, 1 for 0 (longjmp(3)).
func longjmpValue(regs *unix.PtraceRegs) uint64 {
	if uint32(regs.Rsi) == 0 {
		return 1
	}
	return uint64(uint32(regs.Rsi))
}
