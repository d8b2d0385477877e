package resolver

import (
	"debug/dwarf"
	"fmt"
	"strings"

	"rtrace/internal/elfx"
)

// AutoSpecs returns a function's argument and return-value specs derived
// from its DWARF types, in the form of uftrace's .dbg A:/R: lines
// ("@arg1,arg2/s,fparg1/64", "@retval/s"), and the enums they name as .dbg
// E: lines. The formats follow uftrace 0.13's own auto-args: integers and
// bool plain, char /c, char pointers /s, other pointers /p, float and
// double fparg/32 and /64, enums /e:NAME. A parameter rtrace cannot place
// (a struct or union passed by value, a long double) ends the argument
// list there: later registers depend on how it was passed.
func AutoSpecs(s *elfx.Subprogram) (args, ret string, enums []string) {
	var items []string
	ints, floats := 0, 0
	// rdi carries the address of a returned struct too big for registers:
	// uftrace then names each integer argument's register (arg1%RSI).
	sret := inMemory(s.Return)
	for _, t := range s.Params {
		class, format, enum := classify(t)
		if class == 0 {
			break
		}
		if enum != "" {
			enums = appendOnce(enums, enum)
		}
		if class == 'f' {
			floats++
			items = append(items, fmt.Sprintf("fparg%d%s", floats, format))
			continue
		}
		ints++
		if sret {
			if ints >= len(intRegNames) {
				break
			}
			items = append(items, fmt.Sprintf("arg%d%s%%%s", ints, format, intRegNames[ints]))
			continue
		}
		items = append(items, fmt.Sprintf("arg%d%s", ints, format))
	}
	if len(items) > 0 {
		args = "@" + strings.Join(items, ",")
	}
	if s.Return != nil {
		class, format, enum := classify(s.Return)
		if class == 'f' {
			format = "/f" + strings.TrimPrefix(format, "/")
		}
		if class != 0 {
			ret = "@retval" + format
			if enum != "" {
				enums = appendOnce(enums, enum)
			}
		}
	}
	return args, ret, enums
}

func appendOnce(list []string, s string) []string {
	for _, o := range list {
		if o == s {
			return list
		}
	}
	return append(list, s)
}

// strip removes typedefs and qualifiers.
func strip(t dwarf.Type) dwarf.Type {
	for {
		switch q := t.(type) {
		case *dwarf.TypedefType:
			t = q.Type
		case *dwarf.QualType:
			t = q.Type
		default:
			return t
		}
	}
}

// classify returns the register class of t ('i' integer, 'f' float, 0 for
// none rtrace can read), its spec format suffix, and an E: line for an enum.
func classify(t dwarf.Type) (class byte, format, enum string) {
	switch v := strip(t).(type) {
	case *dwarf.CharType:
		if v.Name == "char" {
			return 'i', "/c", ""
		}
		return 'i', "", ""
	case *dwarf.IntType, *dwarf.UintType, *dwarf.UcharType, *dwarf.BoolType:
		return 'i', "", ""
	case *dwarf.FloatType:
		switch v.ByteSize {
		case 4:
			return 'f', "/32", ""
		case 8:
			return 'f', "/64", ""
		}
	case *dwarf.PtrType:
		if c, ok := strip(v.Type).(*dwarf.CharType); ok && c.Name == "char" {
			return 'i', "/s", ""
		}
		return 'i', "/p", ""
	case *dwarf.EnumType:
		if v.EnumName == "" {
			return 'i', "", ""
		}
		return 'i', "/e:" + v.EnumName, enumLine(v)
	}
	return 0, "", ""
}

// enumLine writes an enum as uftrace's .dbg E: line: "enum color
// {RED,GREEN=5}", a value written out when it does not follow the previous.
func enumLine(e *dwarf.EnumType) string {
	var b strings.Builder
	fmt.Fprintf(&b, "enum %s {", e.EnumName)
	next := int64(0)
	for i, v := range e.Val {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(v.Name)
		if v.Val != next {
			fmt.Fprintf(&b, "=%d", v.Val)
		}
		next = v.Val + 1
	}
	b.WriteByte('}')
	return b.String()
}

// intRegNames are the SysV integer argument registers as uftrace names them.
var intRegNames = []string{"RDI", "RSI", "RDX", "RCX", "R8", "R9"}

// inMemory reports whether a value of type t is returned through a hidden
// pointer argument: an aggregate larger than 16 bytes (SysV x86-64 ABI,
// class MEMORY).
func inMemory(t dwarf.Type) bool {
	if t == nil {
		return false
	}
	switch v := strip(t).(type) {
	case *dwarf.StructType, *dwarf.ArrayType:
		return v.Size() > 16
	}
	return false
}
