package uftrace

import (
	"fmt"
	"strconv"
	"strings"
)

// ArgKind says where an argument spec takes its value from.
type ArgKind uint8

// Kinds of argument specs: an integer argument, a floating-point argument,
// or the return value.
const (
	IntArg ArgKind = iota
	FloatArg
	RetVal
)

// ArgSpec is one item of a uftrace argument spec: arg2/i32, fparg1/64,
// retval/s, arg3/e:color, arg1%rdi.
type ArgSpec struct {
	Kind  ArgKind
	Index int    // 1-based argument number; 0 for RetVal
	Fmt   byte   // 0 (default, like d) or one of "diuxscfSpe"
	Size  int    // value size in bytes; 0 = default
	Enum  string // enum name for Fmt 'e', struct name for Fmt 't'
	Loc   string // explicit location suffix without '%' ("rdi", "stack+2"); kept verbatim
}

// FuncSpec is the spec of one function pattern: "name@arg1/i32,arg2/s".
type FuncSpec struct {
	Pattern string
	// Module is the module the spec names among its items, as uftrace's
	// triggers take one (utils/filter.c, setup_trigger_action: an item
	// that is no action): "PLT", the executable's library calls, or a
	// prefix of a module's file name (MatchModule). "": every module's.
	Module string
	Args   []ArgSpec
}

const specFormats = "diuxscfSpet"

// ParseArgSpec parses one spec item such as "arg2/i32" or "retval/s".
func ParseArgSpec(s string) (ArgSpec, error) {
	var a ArgSpec
	item := s
	if i := strings.IndexByte(item, '%'); i >= 0 {
		a.Loc = item[i+1:]
		item = item[:i]
		if a.Loc == "" {
			return a, fmt.Errorf("argument spec %q: empty location after %%", s)
		}
	}
	name, format, hasFmt := strings.Cut(item, "/")
	switch {
	case name == "retval":
		a.Kind = RetVal
	case strings.HasPrefix(name, "fparg"):
		a.Kind = FloatArg
		a.Fmt = 'f'
		name = name[len("fparg"):]
	case strings.HasPrefix(name, "arg"):
		name = name[len("arg"):]
	default:
		return a, fmt.Errorf("argument spec %q: want argN, fpargN or retval", s)
	}
	if a.Kind != RetVal {
		// Any number is taken, as uftrace takes it: one past the
		// registers and the stack uftrace reads records 0.
		n, err := strconv.Atoi(name)
		if err != nil || n < 1 {
			return a, fmt.Errorf("argument spec %q: bad argument number %q", s, name)
		}
		a.Index = n
	}
	if !hasFmt {
		return a, nil
	}
	if format == "" {
		return a, fmt.Errorf("argument spec %q: empty format after /", s)
	}
	if a.Kind == FloatArg && format[0] >= '0' && format[0] <= '9' {
		format = "f" + format // fparg1/32 means a 32-bit float
	}
	a.Fmt = format[0]
	if !strings.ContainsRune(specFormats, rune(a.Fmt)) {
		return a, fmt.Errorf("argument spec %q: unknown format %q (want one of %s)", s, a.Fmt, specFormats)
	}
	if a.Kind == FloatArg && a.Fmt != 'f' {
		return a, fmt.Errorf("argument spec %q: fparg takes only a float size (32, 64, 80)", s)
	}
	rest := format[1:]
	if a.Fmt == 't' { // t16:S: a struct of 16 bytes named S, passed by value
		size, name, _ := strings.Cut(rest, ":")
		n, err := strconv.Atoi(size)
		if err != nil || n < 0 || n > 1024 {
			return a, fmt.Errorf("argument spec %q: struct format wants tSIZE[:NAME], SIZE in bytes up to 1024", s)
		}
		a.Size, a.Enum = n, name
		return a, nil
	}
	if a.Fmt == 'e' {
		if !strings.HasPrefix(rest, ":") || len(rest) < 2 {
			return a, fmt.Errorf("argument spec %q: enum format needs a name (e:NAME)", s)
		}
		a.Enum = rest[1:]
		return a, nil
	}
	if rest == "" {
		return a, nil
	}
	bits, err := strconv.Atoi(rest)
	if err != nil {
		return a, fmt.Errorf("argument spec %q: bad size %q", s, rest)
	}
	switch {
	case a.Fmt == 'f' && (bits == 32 || bits == 64 || bits == 80):
	case strings.IndexByte("diux", a.Fmt) >= 0 && (bits == 8 || bits == 16 || bits == 32 || bits == 64):
	default:
		return a, fmt.Errorf("argument spec %q: size %d not valid for format %c", s, bits, a.Fmt)
	}
	a.Size = bits / 8
	return a, nil
}

// String returns the spec in uftrace syntax.
func (a ArgSpec) String() string {
	var b strings.Builder
	switch a.Kind {
	case RetVal:
		b.WriteString("retval")
	case FloatArg:
		fmt.Fprintf(&b, "fparg%d", a.Index)
	default:
		fmt.Fprintf(&b, "arg%d", a.Index)
	}
	switch {
	case a.Fmt == 'e':
		b.WriteString("/e:" + a.Enum)
	case a.Fmt == 't' && a.Enum == "":
		fmt.Fprintf(&b, "/t%d", a.Size)
	case a.Fmt == 't':
		fmt.Fprintf(&b, "/t%d:%s", a.Size, a.Enum)
	case a.Kind == FloatArg:
		if a.Size != 0 {
			fmt.Fprintf(&b, "/%d", a.Size*8)
		}
	case a.Fmt != 0:
		b.WriteByte('/')
		b.WriteByte(a.Fmt)
		if a.Size != 0 {
			fmt.Fprintf(&b, "%d", a.Size*8)
		}
	}
	if a.Loc != "" {
		b.WriteString("%" + a.Loc)
	}
	return b.String()
}

// ParseFuncSpec parses "pattern@spec,spec,...". The pattern may be empty, as
// in .dbg A:/R: lines ("@arg1/s").
func ParseFuncSpec(s string) (FuncSpec, error) {
	pat, list, ok := strings.Cut(s, "@")
	if !ok {
		return FuncSpec{}, fmt.Errorf("function spec %q: missing '@'", s)
	}
	f := FuncSpec{Pattern: pat}
	// uftrace takes the actions in any case (strncasecmp): "Retval" is a
	// misspelt spec, an error here, not a module.
	for _, item := range strings.Split(list, ",") {
		if item == "" {
			continue
		}
		if l := strings.ToLower(strings.TrimSpace(item)); !strings.HasPrefix(l, "arg") && !strings.HasPrefix(l, "fparg") && !strings.HasPrefix(l, "retval") {
			if f.Module == "" { // uftrace ignores an extra module
				f.Module = item
			}
			continue
		}
		a, err := ParseArgSpec(item)
		if err != nil {
			return FuncSpec{}, err
		}
		f.Args = append(f.Args, a)
	}
	if len(f.Args) == 0 {
		return FuncSpec{}, fmt.Errorf("function spec %q: no arguments", s)
	}
	return f, nil
}

// ParseSpecList parses a ';'-separated list of function specs, the form of
// info's argspec:/retspec: lines.
func ParseSpecList(s string) ([]FuncSpec, error) {
	var out []FuncSpec
	for _, part := range strings.Split(s, ";") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		f, err := ParseFuncSpec(part)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// Split returns the argument specs and the return-value specs of f.
func (f FuncSpec) Split() (args, rets []ArgSpec) {
	for _, a := range f.Args {
		if a.Kind == RetVal {
			rets = append(rets, a)
		} else {
			args = append(args, a)
		}
	}
	return args, rets
}
