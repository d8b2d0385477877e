package tracer

import (
	"bytes"
	"math"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"rtrace/internal/elfx"
	"rtrace/internal/uftrace"
	"rtrace/tracer/ptrace"
)

// intArgRegs are the integer argument registers of the SysV x86-64 ABI.
var intArgRegs = [...]func(*unix.PtraceRegs) uint64{
	func(r *unix.PtraceRegs) uint64 { return r.Rdi },
	func(r *unix.PtraceRegs) uint64 { return r.Rsi },
	func(r *unix.PtraceRegs) uint64 { return r.Rdx },
	func(r *unix.PtraceRegs) uint64 { return r.Rcx },
	func(r *unix.PtraceRegs) uint64 { return r.R8 },
	func(r *unix.PtraceRegs) uint64 { return r.R9 },
}

// namedRegs are the registers an explicit location (arg1%rdi) may name.
var namedRegs = map[string]func(*unix.PtraceRegs) uint64{
	"rdi": intArgRegs[0], "rsi": intArgRegs[1], "rdx": intArgRegs[2], "rcx": intArgRegs[3],
	"r8": intArgRegs[4], "r9": intArgRegs[5],
	"rax": func(r *unix.PtraceRegs) uint64 { return r.Rax },
	"rbx": func(r *unix.PtraceRegs) uint64 { return r.Rbx },
	"rbp": func(r *unix.PtraceRegs) uint64 { return r.Rbp },
	"rsp": func(r *unix.PtraceRegs) uint64 { return r.Rsp },
	"r10": func(r *unix.PtraceRegs) uint64 { return r.R10 },
	"r11": func(r *unix.PtraceRegs) uint64 { return r.R11 },
	"r12": func(r *unix.PtraceRegs) uint64 { return r.R12 },
	"r13": func(r *unix.PtraceRegs) uint64 { return r.R13 },
	"r14": func(r *unix.PtraceRegs) uint64 { return r.R14 },
	"r15": func(r *unix.PtraceRegs) uint64 { return r.R15 },
}

// values reads the values specs describe from th, stopped at a function's
// entry (arguments) or at its return (the return value), and encodes the
// payload. Integer arguments come from registers, then the stack above the
// return address; floating-point ones and float return values from the xmm
// registers (one PTRACE_GETFPREGS, only when a spec needs it).
func (t *Tracer) values(th *thread, specs []uftrace.ArgSpec, regs *unix.PtraceRegs) []byte {
	vals := make([]uftrace.Value, len(specs))
	var fp *ptrace.FPRegs
	xmm := func(i int) uint64 {
		if fp == nil {
			fp = new(ptrace.FPRegs)
			if ptrace.GetFPRegs(th.tid, fp) != nil {
				*fp = ptrace.FPRegs{}
			}
		}
		return fp.XMM(i)
	}
	for i, a := range specs {
		var raw uint64
		float := a.Fmt == 'f' || a.Kind == uftrace.FloatArg
		switch {
		case a.Loc != "":
			loc := strings.ToLower(a.Loc) // uftrace writes arg1%RSI
			if r, ok := namedRegs[loc]; ok {
				raw = r(regs)
			} else if n, err := strconv.Atoi(strings.TrimPrefix(loc, "stack+")); err == nil && strings.HasPrefix(loc, "stack+") && n > 0 {
				raw, _ = ptrace.PeekWord(th.tid, regs.Rsp+8*uint64(n))
			}
		case a.Kind == uftrace.RetVal && float:
			raw = xmm(0)
		case a.Kind == uftrace.RetVal:
			raw = regs.Rax
		case a.Kind == uftrace.FloatArg && a.Index <= 8:
			raw = xmm(a.Index - 1)
		case a.Kind == uftrace.IntArg && a.Index <= len(intArgRegs):
			raw = intArgRegs[a.Index-1](regs)
		case a.Kind == uftrace.IntArg:
			// The seventh integer argument is just above the return address.
			raw, _ = ptrace.PeekWord(th.tid, regs.Rsp+8*uint64(a.Index-len(intArgRegs)))
		}
		switch {
		case a.Fmt == 'S':
			// A std::string: its first word points at the characters
			// (libstdc++'s _M_p), as uftrace reads it.
			p, err := ptrace.PeekWord(th.tid, raw)
			if err != nil {
				vals[i].Str = uftrace.UnreadableString(raw)
			} else {
				vals[i].Str = t.readString(th.tid, p)
			}
		case a.Fmt == 's':
			vals[i].Str = t.readString(th.tid, raw)
		case float && a.Size == 4:
			vals[i].Float = float64(math.Float32frombits(uint32(raw)))
		case float:
			vals[i].Float = math.Float64frombits(raw)
		default:
			vals[i].Int = raw
		}
	}
	b, err := uftrace.AppendPayload(nil, specs, vals)
	if err != nil {
		return nil
	}
	return b
}

// readString reads the C string at addr as uftrace records it: "NULL" for
// a null pointer, at most uftrace.MaxStringLen bytes, "<0x...>" when the
// memory cannot be read. One process_vm_readv, a second one up to the page
// end when the first crosses into an unmapped page.
func (t *Tracer) readString(tid int, addr uint64) string {
	if addr == 0 {
		return uftrace.NullString
	}
	buf := make([]byte, uftrace.MaxStringLen)
	if err := ptrace.ReadMem(tid, addr, buf); err != nil {
		toPage := int(elfx.PageSize - addr%elfx.PageSize)
		if toPage >= len(buf) || ptrace.ReadMem(tid, addr, buf[:toPage]) != nil {
			return uftrace.UnreadableString(addr)
		}
		buf = buf[:toPage]
	}
	if i := bytes.IndexByte(buf, 0); i >= 0 {
		buf = buf[:i]
	}
	return string(buf)
}
