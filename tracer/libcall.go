package tracer

import (
	"encoding/binary"
	"fmt"
	"os"
	"rtrace/internal/uftrace"

	"rtrace/tracer/bp"
	"rtrace/tracer/fast"
)

// patchGOT redirects the GOT slots the executable calls through directly
// (code built with -fno-plt has no PLT stub to detour) to trampolines in
// the hook scratch room. Called at the program's entry point, once the
// loader has filled the slots. Each trampoline is a detour of a
// `jmp *cell(%rip)` whose cell holds the slot's original target: it stops
// at its int3 with the return address in r11, hijacks the return, and jumps
// to the library function. Its Plan records the slot and its original
// bytes, so a detach can put them back.
func (t *Tracer) patchGOT(mem *os.File, im *image) {
	for _, imp := range im.gotCalls {
		slot := imp.GOT + im.bias
		if im.hookNext+16+bp.MaxSlot > im.hookEnd {
			fmt.Fprintf(t.cfg.Warn, "rtrace: warning: no scratch room left to trace calls of %s\n", imp.Name)
			return
		}
		orig := make([]byte, 8)
		if _, err := mem.ReadAt(orig, int64(slot)); err != nil || binary.LittleEndian.Uint64(orig) == 0 {
			continue // unresolved (a weak import): never called
		}
		cell := im.hookNext
		fake := cell + 8 // where the jmp would live; only its rip-relative operand matters
		jmp := binary.LittleEndian.AppendUint32([]byte{0xff, 0x25}, uint32(int32(int64(cell)-int64(fake+6))))
		tramp := cell + 16
		var desc []byte // the args stub's descriptor, between the cell and the trampoline
		var plan bp.Plan
		var err error
		if im.fast != nil {
			// The fast engine's stub records the call (and its -A/-R values
			// in integer registers: args.S), then jumps on.
			head := func(at uint64) ([]byte, error) { return fast.Head(at, slot, im.fast.sites[0].Entry) }
			var args, rets []uftrace.ArgSpec
			if t.cfg.Specs != nil {
				args, rets = t.cfg.Specs(im.elf, imp.Name, 0)
			}
			if len(args)+len(rets) > 0 {
				why := "only integer registers' are (--engine int3 records them all)"
				if im.hookNext+32+bp.MaxSlot > im.hookEnd {
					why = "no scratch room left for its descriptor"
				} else if d, ok := t.argsDescFor(args, rets, slot); ok {
					desc, tramp, why = d.Bytes(), cell+32, ""
					head = func(at uint64) ([]byte, error) { return fast.ArgsHead(at, cell+16, im.fast.sites[0].EntryArgs) }
				}
				if why != "" {
					fmt.Fprintf(t.cfg.Warn, "rtrace: warning: the -A/-R values of %s are not recorded at its calls through the GOT (-fno-plt) on the fast engine: %s\n", imp.Name, why)
				}
			}
			plan, err = bp.PrepareDetourWith(jmp, fake, tramp, head)
		} else {
			plan, err = bp.PrepareDetour(jmp, fake, tramp, im.retAddr)
		}
		if err != nil {
			fmt.Fprintf(t.cfg.Warn, "rtrace: warning: cannot trace calls of %s: %v\n", imp.Name, err)
			continue
		}
		code := append(append(append(orig[:8:8], make([]byte, 8)...), desc...), plan.Slot...)
		if _, err := mem.WriteAt(code, int64(cell)); err != nil {
			continue
		}
		plan.Patch, plan.Orig = slot, orig
		plan.Jmp = binary.LittleEndian.AppendUint64(nil, tramp)
		if _, err := mem.WriteAt(plan.Jmp, int64(slot)); err != nil {
			fmt.Fprintf(t.cfg.Warn, "rtrace: warning: cannot trace calls of %s: %v\n", imp.Name, err)
			continue
		}
		im.hookNext = (cell + uint64(len(code)) + 15) &^ 15
		im.funcs = append(im.funcs, t.newFn(im.elf, imp.Name, slot, 0))
		key := plan.Trap
		if im.fast != nil {
			key = tramp // no int3: the key of its bookkeeping
		}
		im.bps.Add(&bp.Breakpoint{Addr: key, Kind: bp.FuncEntry, Plan: plan, Func: len(im.funcs) - 1})
	}
}
