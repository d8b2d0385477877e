package tracer

import (
	"encoding/binary"
	"os"
)

// The fast engine (docs/FAST-PATH.md): every traced function's entry leads
// to a stub in the process that records the call in the thread's ring and
// hijacks its return to an exit stub that records the return; no ptrace
// stop per call. rtrace drains the rings, which it maps too, while the
// program runs. Rare events (a thread's first call, setjmp, longjmp,
// exceptions, fork, exec, thread exit) still stop: the tracer then reads
// and changes the stopped thread's state through the same mapping.

// releaseFast unmaps rtrace's view of the states no thread of fi uses:
// at the end of the process or of its image. The unmapping is left to a
// goroutine: freeing a few rings of touched pages took 1 ms, on the way
// to the end of the trace.
func (t *Tracer) releaseFast(fi *fastImage) {
	if fi.ended {
		return // released already (an exec whose thread was killed on its way out: execed, then gone)
	}
	t.reclaim(fi, true)
	free := fi.free
	fi.free = nil
	fi.ended = true
	fi.arena.release()
	fi.arena = nil
	fi.life.release()
	fi.life = nil
	go func() {
		for _, st := range free {
			unmapState(st)
		}
	}()
}

// hasFSGSBase reports whether the kernel lets user code run rdfsbase
// (AT_HWCAP2 bit HWCAP2_FSGSBASE, arch/x86/include/uapi/asm/hwcap2.h).
// RTRACE_NO_RDFSBASE=1 says no, so that the stubs that read their key at
// %fs:0 run on a machine that has it too (the tests).
func hasFSGSBase() bool {
	if os.Getenv("RTRACE_NO_RDFSBASE") != "" {
		return false
	}
	auxv, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return false
	}
	for i := 0; i+16 <= len(auxv); i += 16 {
		if binary.LittleEndian.Uint64(auxv[i:]) == 26 { // AT_HWCAP2
			return binary.LittleEndian.Uint64(auxv[i+8:])&2 != 0
		}
	}
	return false
}
