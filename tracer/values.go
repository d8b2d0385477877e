package tracer

import (
	"bytes"
	"encoding/binary"
	"math"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"rtrace/internal/elfx"
	"rtrace/internal/uftrace"
	"rtrace/tracer/ptrace"
	"rtrace/tracer/unwind"
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

// maxStackWord is the farthest stack word uftrace reads an argument from
// (arch/x86_64/mcount-support.c, mcount_get_stack_arg); beyond it, as for
// arg9999999, the value is recorded as 0.
const maxStackWord = 100

// values reads the values specs describe from th, stopped at a function's
// entry (arguments) or at its return (the return value), and encodes the
// payload. Integer arguments come from registers, then the stack above the
// return address; floating-point ones and float return values from the xmm
// registers, a long double returned from st(0) (one PTRACE_GETFPREGS, only
// when a spec needs it); an explicit location (arg1%RSI, fparg2/80%stack+1,
// arg1/t16:S%XMM0+RDI) says where a value is.
func (t *Tracer) values(th *thread, specs []uftrace.ArgSpec, regs *unix.PtraceRegs) []byte {
	vals := make([]uftrace.Value, len(specs))
	var fp *ptrace.FPRegs
	fpregs := func() *ptrace.FPRegs {
		if fp == nil {
			fp = new(ptrace.FPRegs)
			if ptrace.GetFPRegs(th.tid, fp) != nil {
				*fp = ptrace.FPRegs{}
			}
		}
		return fp
	}
	// word reads one 8-byte location: a register, or a word of the stack.
	word := func(loc string) uint64 {
		if r, ok := namedRegs[loc]; ok {
			return r(regs)
		}
		if n, ok := strings.CutPrefix(loc, "xmm"); ok {
			if i, err := strconv.Atoi(n); err == nil && i >= 0 && i < 16 {
				return fpregs().XMM(i)
			}
		}
		return 0
	}
	// stack reads size bytes from stack word n (1: just above the return address).
	stack := func(n, size int) []byte {
		b := make([]byte, size)
		if n >= 1 && n <= maxStackWord {
			if ptrace.ReadMem(th.tid, regs.Rsp+8*uint64(n), b) != nil {
				clear(b)
			}
		}
		return b
	}
	for i, a := range specs {
		loc := strings.ToLower(a.Loc) // uftrace writes arg1%RSI
		stackWord := 0
		if n, ok := strings.CutPrefix(loc, "stack"); ok { // stack+N, or stackN as uftrace's strtol reads it
			stackWord, _ = strconv.Atoi(strings.TrimPrefix(n, "+"))
			if stackWord < 1 {
				stackWord = maxStackWord + 1 // unreadable: 0
			}
		}
		float := a.Fmt == 'f' || a.Kind == uftrace.FloatArg
		switch {
		case a.Fmt == 't':
			vals[i].Str = t.structValue(a, loc, stackWord, word, stack)
			continue
		case float && a.Size == uftrace.F80Size:
			var b []byte
			switch {
			case stackWord > 0:
				b = stack(stackWord, uftrace.F80Size)
			case a.Kind == uftrace.RetVal:
				st0 := fpregs().ST(0)
				b = st0[:]
			default: // a register, as uftrace reads it: 8 bytes
				if loc == "" {
					loc = xmmFor(a)
				}
				var w [uftrace.F80Size]byte
				binary.LittleEndian.PutUint64(w[:], word(loc))
				b = w[:]
			}
			vals[i].Str = string(b)
			vals[i].Float = uftrace.F80ToFloat64(b)
			continue
		}
		var raw uint64
		switch {
		case stackWord > 0:
			raw = binary.LittleEndian.Uint64(stack(stackWord, 8))
		case loc != "":
			raw = word(loc)
		case a.Kind == uftrace.RetVal && float:
			raw = fpregs().XMM(0)
		case a.Kind == uftrace.RetVal:
			raw = regs.Rax
		case a.Kind == uftrace.FloatArg && a.Index <= 8:
			raw = fpregs().XMM(a.Index - 1)
		case a.Kind == uftrace.IntArg && a.Index <= len(intArgRegs):
			raw = intArgRegs[a.Index-1](regs)
		case a.Kind == uftrace.IntArg:
			// The seventh integer argument is just above the return address.
			raw = binary.LittleEndian.Uint64(stack(a.Index-len(intArgRegs), 8))
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
	// Not nil even when the values take no bytes: the record says it has them.
	b, err := uftrace.AppendPayload(make([]byte, 0, 8), specs, vals)
	if err != nil {
		return nil
	}
	return b
}

// xmmFor names the xmm register an fpargN without a location is read
// from (fparg1: xmm0), "" for other specs.
func xmmFor(a uftrace.ArgSpec) string {
	if a.Kind != uftrace.FloatArg || a.Index > 8 {
		return ""
	}
	return "xmm" + strconv.Itoa(a.Index-1)
}

// structValue reads the bytes of a struct passed by value: from the
// registers its location lists ("rdi+rsi", "xmm0+rdi"), eight bytes each,
// or from the stack. A returned struct, and one without a location, is
// recorded as zeros: uftrace shows a struct as NAME{...}, never its bytes.
func (t *Tracer) structValue(a uftrace.ArgSpec, loc string, stackWord int,
	word func(string) uint64, stack func(n, size int) []byte) string {
	if stackWord > 0 {
		return string(stack(stackWord, a.Size))
	}
	b := make([]byte, a.Size)
	if a.Kind == uftrace.RetVal || loc == "" {
		return string(b)
	}
	for i, r := range strings.Split(loc, "+") {
		if 8*i >= len(b) {
			break
		}
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], word(r))
		copy(b[8*i:], w[:])
	}
	return string(b)
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

// strLen is the length of the string at addr in tid's memory, in
// characters (wide: 4-byte ones), as strlen and wcslen count: the size of
// a memtransfer module's call (strcpy, strdup...). It reads a page at a
// time, up to 16 MiB; an unreadable string counts what was read.
func (t *Tracer) strLen(tid int, addr uint64, wide bool) uint64 {
	if addr == 0 {
		return 0
	}
	mem := unwind.ProcMem(tid)
	var buf [4096]byte
	var n uint64
	for n < 16<<20 {
		at := addr + n
		chunk := buf[:elfx.PageSize-at%elfx.PageSize]
		got, _ := mem.ReadMemory(chunk, at)
		if got <= 0 {
			break
		}
		if wide {
			got &^= 3
			for i := 0; i < got; i += 4 {
				if binary.LittleEndian.Uint32(chunk[i:]) == 0 {
					return (n + uint64(i)) / 4
				}
			}
		} else if i := bytes.IndexByte(chunk[:got], 0); i >= 0 {
			return n + uint64(i)
		}
		n += uint64(got)
	}
	if wide {
		return n / 4
	}
	return n
}
