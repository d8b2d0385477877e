package ptrace

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Options every tracee gets: kill it if rtrace dies, follow clone, fork,
// vfork and exec, and mark syscall stops (ptrace(2), PTRACE_SETOPTIONS).
const Options = unix.PTRACE_O_EXITKILL | unix.PTRACE_O_TRACECLONE | unix.PTRACE_O_TRACEFORK |
	unix.PTRACE_O_TRACEVFORK | unix.PTRACE_O_TRACEEXEC | unix.PTRACE_O_TRACESYSGOOD

// Offset of rip in struct user_regs_struct (arch/x86/include/asm/user_64.h):
// 16 eight-byte registers precede it.
const offRip = 16 * 8

func ptrace(req, pid int, addr, data uintptr) error {
	_, _, e := unix.RawSyscall6(unix.SYS_PTRACE, uintptr(req), uintptr(pid), addr, data, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// ptracePtr is ptrace with data pointing at rtrace's memory. The pointer
// stays a pointer until the system call's own argument list: made a
// uintptr before a call to a Go function, it is not updated when that
// call grows the goroutine's stack and copies it, and the kernel then
// writes into the old copy (a register set or a word read as zeros). The
// unsafe package's rule 4: only assembly functions such as RawSyscall6
// may take it converted.
func ptracePtr(req, pid int, addr uintptr, data unsafe.Pointer) error {
	_, _, e := unix.RawSyscall6(unix.SYS_PTRACE, uintptr(req), uintptr(pid), addr, uintptr(data), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// Seize attaches to pid without stopping it, with opts (PTRACE_SEIZE). Called
// on the tracer thread.
func Seize(pid int, opts int) error { return ptrace(unix.PTRACE_SEIZE, pid, 0, uintptr(opts)) }

// SetOptions sets the ptrace options of a stopped tracee (PTRACE_SETOPTIONS).
func SetOptions(pid int, opts int) error {
	return ptrace(unix.PTRACE_SETOPTIONS, pid, 0, uintptr(opts))
}

// Interrupt stops a seized tracee (PTRACE_INTERRUPT).
func Interrupt(pid int) error { return ptrace(unix.PTRACE_INTERRUPT, pid, 0, 0) }

// Listen keeps a tracee in group-stop while letting it report SIGCONT
// (PTRACE_LISTEN, seized tracees only).
func Listen(pid int) error { return ptrace(unix.PTRACE_LISTEN, pid, 0, 0) }

// Detach releases pid, delivering sig (0 for none).
func Detach(pid, sig int) error { return ptrace(unix.PTRACE_DETACH, pid, 0, uintptr(sig)) }

// Cont resumes pid, delivering sig (0 for none).
func Cont(pid, sig int) error { return ptrace(unix.PTRACE_CONT, pid, 0, uintptr(sig)) }

// SingleStep resumes pid for one instruction.
func SingleStep(pid int) error { return ptrace(unix.PTRACE_SINGLESTEP, pid, 0, 0) }

// EventMsg returns the message of the last ptrace event (the new tid of a
// clone, the child of a fork, the former tid at exec).
func EventMsg(pid int) (uint64, error) {
	var msg uint64
	err := ptracePtr(unix.PTRACE_GETEVENTMSG, pid, 0, unsafe.Pointer(&msg))
	return msg, err
}

// SigInfo is a siginfo_t as PTRACE_GETSIGINFO reads it (128 bytes,
// include/uapi/asm-generic/siginfo.h).
type SigInfo [128]byte

// GetSigInfo reads the siginfo of the signal pid is stopped for.
func GetSigInfo(pid int, info *SigInfo) error {
	return ptracePtr(unix.PTRACE_GETSIGINFO, pid, 0, unsafe.Pointer(info))
}

// SetSigInfo replaces the siginfo of the signal pid is stopped for: with
// Cont's signal, what the program's handler receives.
func SetSigInfo(pid int, info *SigInfo) error {
	return ptracePtr(unix.PTRACE_SETSIGINFO, pid, 0, unsafe.Pointer(info))
}

// GetRegs reads the general registers of pid.
func GetRegs(pid int, regs *unix.PtraceRegs) error {
	return ptracePtr(unix.PTRACE_GETREGS, pid, 0, unsafe.Pointer(regs))
}

// SetRegs writes the general registers of pid.
func SetRegs(pid int, regs *unix.PtraceRegs) error {
	return ptracePtr(unix.PTRACE_SETREGS, pid, 0, unsafe.Pointer(regs))
}

// FPRegs is the FXSAVE area PTRACE_GETFPREGS fills (user_fpregs_struct).
type FPRegs [512]byte

// XMM returns the low 8 bytes of register xmm<i>.
func (f *FPRegs) XMM(i int) uint64 {
	o := 160 + 16*i // 32 bytes of control words, then 8 x87 registers of 16
	return uint64(f[o]) | uint64(f[o+1])<<8 | uint64(f[o+2])<<16 | uint64(f[o+3])<<24 |
		uint64(f[o+4])<<32 | uint64(f[o+5])<<40 | uint64(f[o+6])<<48 | uint64(f[o+7])<<56
}

// ST returns x87 register st(i): FXSAVE keeps them in stack order, ten
// bytes in each 16-byte slot after 32 bytes of control words (Intel SDM
// vol. 1, 10.5.1 "FXSAVE Area").
func (f *FPRegs) ST(i int) [10]byte {
	var st [10]byte
	copy(st[:], f[32+16*i:])
	return st
}

// GetFPRegs reads the floating-point and SSE registers of pid.
func GetFPRegs(pid int, f *FPRegs) error {
	return ptracePtr(unix.PTRACE_GETFPREGS, pid, 0, unsafe.Pointer(f))
}

// SetPC writes only rip (PTRACE_POKEUSER): a third the cost of SETREGS.
func SetPC(pid int, pc uint64) error {
	return ptrace(unix.PTRACE_POKEUSR, pid, offRip, uintptr(pc))
}

// PeekWord reads 8 bytes of tracee memory.
func PeekWord(pid int, addr uint64) (uint64, error) {
	var v uint64
	// PTRACE_PEEKDATA's raw syscall stores the word at *data.
	err := ptracePtr(unix.PTRACE_PEEKDATA, pid, uintptr(addr), unsafe.Pointer(&v))
	return v, err
}

// PokeWord writes 8 bytes of tracee memory, also into read-only text.
func PokeWord(pid int, addr, v uint64) error {
	return ptrace(unix.PTRACE_POKEDATA, pid, uintptr(addr), uintptr(v))
}

// ReadMem reads len(buf) bytes at addr with one process_vm_readv.
func ReadMem(pid int, addr uint64, buf []byte) error {
	if len(buf) == 0 {
		return nil
	}
	local := []unix.Iovec{{Base: &buf[0], Len: uint64(len(buf))}}
	remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: len(buf)}}
	n, err := unix.ProcessVMReadv(pid, local, remote, 0)
	if err != nil {
		return err
	}
	if n != len(buf) {
		return fmt.Errorf("short read at %#x: %d of %d bytes", addr, n, len(buf))
	}
	return nil
}

// WriteText writes b at addr with PTRACE_POKEDATA, word by word (read-modify-
// write for a partial last word). process_vm_writev cannot write read-only
// text mappings.
func WriteText(pid int, addr uint64, b []byte) error {
	for len(b) > 0 {
		if len(b) >= 8 {
			v := uint64(0)
			for i := 7; i >= 0; i-- {
				v = v<<8 | uint64(b[i])
			}
			if err := PokeWord(pid, addr, v); err != nil {
				return fmt.Errorf("writing tracee memory at %#x: %w", addr, err)
			}
			addr += 8
			b = b[8:]
			continue
		}
		old, err := PeekWord(pid, addr)
		if err != nil {
			return fmt.Errorf("reading tracee memory at %#x: %w", addr, err)
		}
		for i, c := range b {
			old = old&^(0xff<<(8*i)) | uint64(c)<<(8*i)
		}
		return PokeWord(pid, addr, old)
	}
	return nil
}
