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
// bool plain, char /c, char pointers /s, other pointers and references /p,
// float and double fparg/32 and /64, long double fparg/80 on the stack,
// enums /e:NAME, structs passed by value /tSIZE:NAME with the registers or
// stack words that carry them, std::string by value /S.
//
// Locations follow the SysV x86-64 ABI (placer): once a struct is passed
// (or returned) by value, every later argument names its register, as
// uftrace does; a float whose xmm register is not its fparg number, and
// anything passed on the stack, name theirs too. A parameter of a type
// rtrace cannot place ends the argument list there.
func AutoSpecs(s *elfx.Subprogram) (args, ret string, enums []string) {
	var p placer
	if s.Return != nil {
		c := describe(s.Return)
		switch c.kind {
		case kindInt:
			ret = "@retval" + c.format
		case kindFloat, kindLongDouble:
			ret = "@retval/f" + strings.TrimPrefix(c.format, "/")
		case kindStruct, kindString:
			ret = "@retval" + c.format
			// uftrace names the registers of every argument after a
			// value returned as a struct; one too big for registers
			// comes back through a hidden pointer in rdi.
			p.named = true
			if c.kind == kindString || c.memory() {
				p.ints = 1
			}
		}
		if c.enum != "" {
			enums = appendOnce(enums, c.enum)
		}
	}
	var items []string
	for _, t := range s.Params {
		c := describe(t)
		item, ok := p.place(c)
		if !ok {
			break
		}
		items = append(items, item)
		if c.enum != "" {
			enums = appendOnce(enums, c.enum)
		}
	}
	if len(items) > 0 {
		args = "@" + strings.Join(items, ",")
	}
	return args, ret, enums
}

// Kinds of values, as the ABI passes them.
const (
	kindNone       = iota // a type rtrace does not place
	kindInt               // an integer register or stack word
	kindFloat             // an xmm register or stack word
	kindLongDouble        // 16 bytes of stack
	kindStruct            // eightbytes in registers, or on the stack
	kindString            // std::string by value: a hidden reference
)

// valueClass is how a type is passed: its kind, its spec format suffix
// ("/c", "/64", "/t8:pt"), an E: line for an enum, and for a struct its
// size and the class of each eightbyte ('i' integer, 'f' sse; nil when
// it goes in memory).
type valueClass struct {
	kind    int
	format  string
	enum    string
	size    int64
	classes []byte
}

// memory reports whether a struct is passed on the stack (returned
// through a hidden pointer).
func (c valueClass) memory() bool { return c.kind == kindStruct && c.classes == nil }

// placer hands out the argument registers and stack words of a call in
// order (SysV x86-64 ABI, "Parameter Passing").
type placer struct {
	ints, fps  int  // integer and xmm registers taken
	stack      int  // 8-byte words of stack arguments taken
	idx, fpidx int  // uftrace's argN and fpargN numbers given
	named      bool // name every later location, as uftrace does after a struct
}

// place returns the spec item of the next argument, false if it cannot be
// placed (and nothing after it either).
func (p *placer) place(c valueClass) (string, bool) {
	switch c.kind {
	case kindInt, kindString:
		p.idx++
		item := fmt.Sprintf("arg%d%s", p.idx, c.format)
		if c.kind == kindString {
			p.named = true // uftrace: "arg1/S%RDI"
		}
		return item + p.intLoc(), true
	case kindFloat:
		p.fpidx++
		item := fmt.Sprintf("fparg%d%s", p.fpidx, c.format)
		if p.fps < len(xmmNames) {
			if p.named || p.fps != p.fpidx-1 {
				item += "%" + xmmNames[p.fps]
			}
			p.fps++
			return item, true
		}
		return item + p.stackLoc(1, 1), true
	case kindLongDouble:
		p.fpidx++
		return fmt.Sprintf("fparg%d/80%s", p.fpidx, p.stackLoc(2, 2)), true
	case kindStruct:
		if c.size > maxStructSize {
			return "", false
		}
		p.idx++
		item := fmt.Sprintf("arg%d%s", p.idx, c.format)
		p.named = true
		if c.size == 0 { // nothing is passed; uftrace names the stack
			return item + fmt.Sprintf("%%stack+%d", p.stack+1), true
		}
		ni, nf := 0, 0
		for _, k := range c.classes {
			if k == 'f' {
				nf++
			} else {
				ni++
			}
		}
		if c.memory() || p.ints+ni > len(intRegNames) || p.fps+nf > len(xmmNames) {
			return item + p.stackLoc(int(c.size+7)/8, 1), true
		}
		for i, k := range c.classes {
			sep := "+"
			if i == 0 {
				sep = "%"
			}
			if k == 'f' {
				item += sep + xmmNames[p.fps]
				p.fps++
			} else {
				item += sep + intRegNames[p.ints]
				p.ints++
			}
		}
		return item, true
	}
	return "", false
}

// intLoc takes the next integer register (named only when uftrace names
// it) or the next stack word.
func (p *placer) intLoc() string {
	if p.ints < len(intRegNames) {
		loc := ""
		if p.named {
			loc = "%" + intRegNames[p.ints]
		}
		p.ints++
		return loc
	}
	return p.stackLoc(1, 1)
}

// stackLoc takes words of stack, aligned to align words, and names the
// first as uftrace does: stack+1 is the word above the return address.
func (p *placer) stackLoc(words, align int) string {
	p.stack = (p.stack + align - 1) / align * align
	loc := fmt.Sprintf("%%stack+%d", p.stack+1)
	p.stack += words
	return loc
}

// maxStructSize is the largest struct uftrace's record buffer takes.
const maxStructSize = 1024

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

// describe returns how a value of type t is passed.
func describe(t dwarf.Type) valueClass {
	switch v := strip(t).(type) {
	case *dwarf.CharType:
		if v.Name == "char" {
			return valueClass{kind: kindInt, format: "/c"}
		}
		return valueClass{kind: kindInt}
	case *dwarf.IntType, *dwarf.UintType, *dwarf.UcharType, *dwarf.BoolType:
		return valueClass{kind: kindInt}
	case *dwarf.FloatType:
		switch v.ByteSize {
		case 4:
			return valueClass{kind: kindFloat, format: "/32"}
		case 8:
			return valueClass{kind: kindFloat, format: "/64"}
		case 16:
			if v.Name == "long double" {
				return valueClass{kind: kindLongDouble, format: "/80"}
			}
		}
	case *dwarf.PtrType:
		if c, ok := strip(v.Type).(*dwarf.CharType); ok && c.Name == "char" {
			return valueClass{kind: kindInt, format: "/s"}
		}
		return valueClass{kind: kindInt, format: "/p"}
	case *dwarf.UnsupportedType:
		// debug/dwarf does not model C++ references; uftrace shows them
		// as pointers.
		if v.Tag == dwarf.TagReferenceType || v.Tag == dwarf.TagRvalueReferenceType {
			return valueClass{kind: kindInt, format: "/p"}
		}
	case *dwarf.EnumType:
		if v.EnumName == "" {
			return valueClass{kind: kindInt}
		}
		return valueClass{kind: kindInt, format: "/e:" + v.EnumName, enum: enumLine(v)}
	case *dwarf.StructType:
		if isStdString(v) {
			return valueClass{kind: kindString, format: "/S"}
		}
		if v.Incomplete {
			break
		}
		size := v.ByteSize
		if len(v.Field) == 0 && size <= 1 {
			size = 0 // C++ gives an empty struct one byte; nothing is passed
		}
		c := valueClass{kind: kindStruct, size: size, format: fmt.Sprintf("/t%d", size)}
		if name := structName(v.StructName); name != "" {
			c.format += ":" + name
		}
		c.classes = eightbytes(v)
		return c
	}
	return valueClass{}
}

// structName is the name uftrace gives a struct: a C++ template's without
// its arguments.
func structName(name string) string {
	if len(name) > 1 {
		if i := strings.IndexAny(name[1:], "< ({["); i >= 0 {
			return name[:i+1]
		}
	}
	return name
}

// isStdString reports whether s is libstdc++'s std::string (a
// basic_string holding _M_dataplus), which uftrace reads with /S.
func isStdString(s *dwarf.StructType) bool {
	if structName(s.StructName) != "basic_string" {
		return false
	}
	for _, f := range s.Field {
		if f.Name == "_M_dataplus" {
			return true
		}
	}
	return false
}

// eightbytes classifies a struct of at most 16 bytes by its eightbytes
// ('i' when any field in it is an integer, else 'f'), nil when the ABI
// passes it in memory: larger, holding a long double, or with a field
// out of its natural alignment (SysV x86-64 ABI, "Classification").
func eightbytes(s *dwarf.StructType) []byte {
	if s.ByteSize <= 0 || s.ByteSize > 16 {
		return nil
	}
	classes := make([]byte, (s.ByteSize+7)/8)
	if !classifyFields(s, 0, classes) {
		return nil
	}
	for i, k := range classes {
		if k == 0 { // padding only
			classes[i] = 'f'
		}
	}
	return classes
}

// classifyFields merges the classes of the fields of t, placed at off,
// into classes; false when t must go in memory.
func classifyFields(t dwarf.Type, off int64, classes []byte) bool {
	switch v := strip(t).(type) {
	case *dwarf.StructType:
		for _, f := range v.Field {
			if f.BitSize != 0 || f.DataBitOffset != 0 && f.DataBitOffset%8 != 0 {
				if !mark(classes, off+f.ByteOffset, 'i') {
					return false
				}
				continue
			}
			if !classifyFields(f.Type, off+f.ByteOffset, classes) {
				return false
			}
		}
		return true
	case *dwarf.ArrayType:
		if v.Count <= 0 {
			return v.Count == 0
		}
		size := v.Type.Size()
		for i := int64(0); i < v.Count; i++ {
			if !classifyFields(v.Type, off+i*size, classes) {
				return false
			}
		}
		return true
	case *dwarf.FloatType:
		if v.ByteSize > 8 || off%v.ByteSize != 0 {
			return false
		}
		return mark(classes, off, 'f')
	case *dwarf.IntType, *dwarf.UintType, *dwarf.CharType, *dwarf.UcharType,
		*dwarf.BoolType, *dwarf.EnumType, *dwarf.PtrType:
		if n := v.Size(); n <= 0 || n > 8 || off%n != 0 {
			return false
		}
		return mark(classes, off, 'i')
	case *dwarf.UnsupportedType:
		if v.Tag == dwarf.TagReferenceType || v.Tag == dwarf.TagRvalueReferenceType {
			return off%8 == 0 && mark(classes, off, 'i')
		}
	}
	return false
}

// mark merges class k into the eightbyte holding off: integer wins.
func mark(classes []byte, off int64, k byte) bool {
	i := off / 8
	if i < 0 || i >= int64(len(classes)) {
		return false
	}
	if classes[i] != 'i' {
		classes[i] = k
	}
	return true
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

// xmmNames are the SysV floating-point argument registers as uftrace names them.
var xmmNames = []string{"XMM0", "XMM1", "XMM2", "XMM3", "XMM4", "XMM5", "XMM6", "XMM7"}
