// Package usdt reads USDT probe notes (.note.stapsdt) and decodes their
// argument operands (docs/usdt.md).
package usdt

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"path"
	"strconv"
	"strings"

	"rtrace/internal/elfnote"
)

// Probe is one probe site of an ELF object. PC and Semaphore are
// link-time addresses, already adjusted for prelinking; Semaphore is 0
// for a probe without one.
type Probe struct {
	Provider, Name string
	PC, Semaphore  uint64
	Args           string // the operand string, e.g. "-4@%edi 8@-8(%rbp)"
}

// FullName is provider:name, as -E patterns and events.txt name it.
func (p Probe) FullName() string { return p.Provider + ":" + p.Name }

// Probes returns the probes of f (none when it has no .note.stapsdt).
// Malformed notes end the list with an error; the probes before them are
// returned.
func Probes(f *elf.File) ([]Probe, error) {
	s := f.Section(".note.stapsdt")
	if s == nil {
		return nil, nil
	}
	data, err := s.Data()
	if err != nil {
		return nil, fmt.Errorf(".note.stapsdt: %w", err)
	}
	notes, perr := elfnote.Parse(data)
	var adjust uint64
	baseSec := f.Section(".stapsdt.base")
	var out []Probe
	for _, n := range notes {
		desc := n.Desc
		if n.Name != "stapsdt" || n.Type != 3 {
			continue
		}
		if len(desc) < 24 {
			return out, fmt.Errorf(".note.stapsdt: probe descriptor of %d bytes", len(desc))
		}
		p := Probe{PC: binary.LittleEndian.Uint64(desc), Semaphore: binary.LittleEndian.Uint64(desc[16:])}
		if baseSec != nil {
			adjust = baseSec.Addr - binary.LittleEndian.Uint64(desc[8:])
		}
		strs := strings.SplitN(string(desc[24:]), "\x00", 4)
		if len(strs) < 3 {
			return out, fmt.Errorf(".note.stapsdt: probe at %#x: missing provider, name or arguments", p.PC)
		}
		p.Provider, p.Name, p.Args = strs[0], strs[1], strs[2]
		p.PC += adjust
		if p.Semaphore != 0 {
			p.Semaphore += adjust
		}
		out = append(out, p)
	}
	if perr != nil {
		return out, fmt.Errorf(".note.stapsdt: %w", perr)
	}
	return out, nil
}

// Match reports whether the probe's provider:name matches pattern, a glob
// over provider:name ("app:*", "*:start"); a pattern without ':' matches
// the name alone.
func (p Probe) Match(pattern string) bool {
	if !strings.Contains(pattern, ":") {
		ok, _ := path.Match(pattern, p.Name)
		return ok
	}
	ok, _ := path.Match(pattern, p.FullName())
	return ok
}

// Kind of operand.
type Kind uint8

const (
	Reg Kind = iota + 1 // %edi
	Imm                 // $5
	Mem                 // disp(base,index,scale), sym(%rip)
)

// Arg is one decoded argument: a value of Size bytes (1, 2, 4, 8), signed
// when Signed, read from a register, an immediate or memory.
type Arg struct {
	Size   int
	Signed bool
	Kind   Kind
	Reg    string // Reg: the register (its 64-bit name); Mem: the base ("" for none)
	Index  string // Mem: index register, "" for none
	Scale  int64  // Mem: index scale
	Disp   int64  // Imm: the value; Mem: the displacement
	Sym    string // Mem: a symbol displacement (foo(%rip)), "" for none
}

// ParseArgs decodes an operand string. An operand that does not decode
// gives an error naming it; the arguments before it are returned.
func ParseArgs(s string) ([]Arg, error) {
	var out []Arg
	for _, op := range strings.Fields(s) {
		a, err := parseArg(op)
		if err != nil {
			return out, fmt.Errorf("operand %q: %w", op, err)
		}
		out = append(out, a)
	}
	return out, nil
}

func parseArg(op string) (Arg, error) {
	var a Arg
	at := strings.IndexByte(op, '@')
	if at < 0 {
		return a, fmt.Errorf("no size@ prefix")
	}
	size, err := strconv.Atoi(op[:at])
	if err != nil {
		return a, fmt.Errorf("bad size")
	}
	if size < 0 {
		a.Signed, size = true, -size
	}
	if size != 1 && size != 2 && size != 4 && size != 8 {
		return a, fmt.Errorf("size %d is not 1, 2, 4 or 8", size)
	}
	a.Size = size
	v := op[at+1:]
	switch {
	case strings.HasPrefix(v, "%"):
		r, ok := reg64(v[1:])
		if !ok {
			return a, fmt.Errorf("unknown register %s", v)
		}
		a.Kind, a.Reg = Reg, r
	case strings.HasPrefix(v, "$"):
		n, err := strconv.ParseInt(v[1:], 0, 64)
		if err != nil {
			u, uerr := strconv.ParseUint(v[1:], 0, 64)
			if uerr != nil {
				return a, fmt.Errorf("bad immediate")
			}
			n = int64(u)
		}
		a.Kind, a.Disp = Imm, n
	default:
		open := strings.IndexByte(v, '(')
		if open < 0 || !strings.HasSuffix(v, ")") {
			return a, fmt.Errorf("not a register, an immediate or a memory operand")
		}
		a.Kind, a.Scale = Mem, 1
		if d := v[:open]; d != "" {
			n, err := strconv.ParseInt(d, 0, 64)
			if err != nil {
				// A symbol, maybe with an offset: foo, foo+8.
				a.Sym = d
			} else {
				a.Disp = n
			}
		}
		parts := strings.Split(v[open+1:len(v)-1], ",")
		if len(parts) > 3 {
			return a, fmt.Errorf("bad memory operand")
		}
		if p := parts[0]; p != "" {
			r, ok := reg64(strings.TrimPrefix(p, "%"))
			if !ok || !strings.HasPrefix(p, "%") {
				return a, fmt.Errorf("unknown base register %s", p)
			}
			a.Reg = r
		}
		if len(parts) > 1 {
			r, ok := reg64(strings.TrimPrefix(parts[1], "%"))
			if !ok || !strings.HasPrefix(parts[1], "%") || r == "rip" {
				return a, fmt.Errorf("unknown index register %s", parts[1])
			}
			a.Index = r
		}
		if len(parts) > 2 {
			n, err := strconv.ParseInt(parts[2], 10, 64)
			if err != nil || n != 1 && n != 2 && n != 4 && n != 8 {
				return a, fmt.Errorf("bad scale %s", parts[2])
			}
			a.Scale = n
		}
		if a.Sym != "" && a.Reg != "rip" {
			return a, fmt.Errorf("symbol %s not relative to %%rip", a.Sym)
		}
	}
	return a, nil
}

// reg64 maps a name of an x86-64 general register (rax, eax, ax, al, r8d,
// r8w, r8b...) or rip to its 64-bit name.
func reg64(name string) (string, bool) {
	r, ok := regNames[name]
	return r, ok
}

var regNames = func() map[string]string {
	m := map[string]string{"rip": "rip"}
	// ah, bh, ch and dh (bits 8-15) are left out: a probe using one is
	// reported as undecodable rather than read wrong.
	for _, r := range [][4]string{
		{"rax", "eax", "ax", "al"}, {"rbx", "ebx", "bx", "bl"},
		{"rcx", "ecx", "cx", "cl"}, {"rdx", "edx", "dx", "dl"},
		{"rsi", "esi", "si", "sil"}, {"rdi", "edi", "di", "dil"},
		{"rbp", "ebp", "bp", "bpl"}, {"rsp", "esp", "sp", "spl"},
	} {
		for _, n := range r {
			m[n] = r[0]
		}
	}
	for i := 8; i <= 15; i++ {
		r := fmt.Sprintf("r%d", i)
		for _, suf := range []string{"", "d", "w", "b", "l"} {
			m[r+suf] = r
		}
	}
	return m
}()

// Value computes the argument's value from reg (a register's 64-bit value
// by name) and read (size bytes of memory at an address): truncated to its
// size and sign-extended when signed, as a uint64.
func (a Arg) Value(reg func(string) uint64, read func(addr uint64, size int) (uint64, error)) (uint64, error) {
	var v uint64
	switch a.Kind {
	case Reg:
		v = reg(a.Reg)
	case Imm:
		v = uint64(a.Disp)
	case Mem:
		if a.Sym != "" {
			return 0, fmt.Errorf("symbol operand %s(%%rip) is not supported", a.Sym)
		}
		addr := uint64(a.Disp)
		if a.Reg != "" {
			addr += reg(a.Reg)
		}
		if a.Index != "" {
			addr += reg(a.Index) * uint64(a.Scale)
		}
		var err error
		if v, err = read(addr, a.Size); err != nil {
			return 0, err
		}
	}
	return a.extend(v), nil
}

func (a Arg) extend(v uint64) uint64 {
	bits := uint(a.Size * 8)
	if bits >= 64 {
		return v
	}
	v &= 1<<bits - 1
	if a.Signed && v&(1<<(bits-1)) != 0 {
		v |= ^uint64(0) << bits
	}
	return v
}

// Format renders a value of a as text: signed ones in decimal, unsigned
// 8-byte ones (often pointers) in hex, smaller unsigned ones in decimal.
func (a Arg) Format(v uint64) string {
	switch {
	case a.Signed:
		return strconv.FormatInt(int64(v), 10)
	case a.Size == 8:
		return "0x" + strconv.FormatUint(v, 16)
	}
	return strconv.FormatUint(v, 10)
}
