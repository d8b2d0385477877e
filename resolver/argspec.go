package resolver

import (
	"debug/dwarf"
	"fmt"
	"slices"
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
		c := describe(s.Return, s.Aggs)
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
			if c.kind == kindString || c.retMemory() {
				p.ints = 1
			}
		case kindNone:
			if st, ok := strip(s.Return).(*dwarf.StructType); ok && !st.Incomplete {
				// A struct rtrace does not place: too big for registers,
				// it comes back through rdi; else where its arguments
				// start is unknown.
				if st.ByteSize <= 16 {
					return "", "", enums
				}
				p.named, p.ints = true, 1
			}
		}
		if c.enum != "" {
			enums = appendOnce(enums, c.enum)
		}
	}
	var items []string
	for _, t := range s.Params {
		c := describe(t, s.Aggs)
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
	align   int64 // a struct's, in bytes
	byRef   bool  // a non-trivial class: by invisible reference
	// unplaced: nothing is passed, and uftrace gives no location (a class
	// of one byte with member functions and no data)
	unplaced bool
	x87      bool // a struct of one long double: returned in st(0)
}

// memory reports whether a struct argument is passed on the stack.
func (c valueClass) memory() bool { return c.kind == kindStruct && c.size > 0 && c.classes == nil }

// retMemory reports whether a struct is returned through a hidden pointer
// (rdi): by reference, or in memory but for a lone long double (st(0)).
func (c valueClass) retMemory() bool {
	return c.kind == kindStruct && (c.byRef || c.memory() && !c.x87)
}

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
		if c.unplaced {
			return item, true
		}
		if c.byRef { // its address, as an integer argument is passed
			if p.ints < len(intRegNames) {
				p.ints++
				return item + "%" + intRegNames[p.ints-1], true
			}
			return "", false // uftrace reads no struct from a stacked pointer
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
			return item + p.stackLoc(int(c.size+7)/8, int(max(c.align/8, 1))), true
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

// describe returns how a value of type t is passed; aggs are the traits of
// the structs of its file.
func describe(t dwarf.Type, aggs elfx.Aggregates) valueClass {
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
		if isReference(v) { // uftrace shows a reference as a pointer
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
		traits := aggs[v]
		size := v.ByteSize
		if size <= 1 && !hasFields(v, traits) && !traits.NonTrivial && !traits.Methods {
			// C++ gives an empty class one byte; nothing is passed. As
			// uftrace (utils/dwarf.c, is_empty_aggregate), a class with
			// member functions is not empty: a lambda, std::less<int>.
			size = 0
		}
		c := valueClass{kind: kindStruct, size: size, format: fmt.Sprintf("/t%d", size), align: 1}
		if name := structName(v.StructName); name != "" {
			c.format += ":" + name
		}
		switch {
		case traits.NonTrivial:
			// Passed and returned by invisible reference (Itanium C++
			// ABI, 3.1.2), as uftrace places it too, even when empty.
			c.byRef = true
			return c
		case size == 0:
			return c
		case size == 1 && !hasFields(v, traits) && traits.Methods:
			// A class with member functions and no data, std::less<int>:
			// nothing is passed, as for any empty class, but uftrace takes
			// it for one byte and names it without a location
			// (arg1/t1:less), shown as less{...}.
			c.unplaced = true
			return c
		case traits.Bases:
			break // the members of its bases are not listed: unplaceable
		default:
			l := layout{aggs: aggs, visiting: map[*dwarf.StructType]bool{}, align: 1}
			if size <= 16 {
				l.classes = make([]byte, (size+7)/8)
			}
			if !l.add(v, 0) || !l.memory && slices.Contains(l.classes, 0) {
				break // a type rtrace does not place, or padding alone in an eightbyte
			}
			c.align, c.x87 = l.align, l.x87 && l.leaves == 1 && size == 16
			if !l.memory && size <= 16 {
				c.classes = l.classes
			}
			return c
		}
	}
	return valueClass{}
}

// isReference says whether t is a C++ reference, which debug/dwarf does
// not model: passed as a pointer.
func isReference(t *dwarf.UnsupportedType) bool {
	return t.Tag == dwarf.TagReferenceType || t.Tag == dwarf.TagRvalueReferenceType
}

// hasFields says whether struct s has a member other than its static ones.
func hasFields(s *dwarf.StructType, traits elfx.Aggregate) bool {
	for _, f := range s.Field {
		if !traits.Static[f.Name] {
			return true
		}
	}
	return false
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

// layout classifies the members of a struct by the eightbytes they lie in
// (SysV x86-64 ABI, "Classification"): 'i' when any member there is an
// integer, else 'f'; with memory set when the ABI passes it in memory (a
// member out of its natural alignment, a long double). It keeps the
// largest alignment of a member.
type layout struct {
	aggs     elfx.Aggregates
	classes  []byte // per eightbyte; nil for a struct of more than 16 bytes
	memory   bool
	x87      bool // a long double seen
	leaves   int  // members of a base type seen
	align    int64
	visiting map[*dwarf.StructType]bool
}

// add places the members of t, at byte off in the struct; false when t
// holds something rtrace does not place (a base class, a non-trivial
// class, __int128, _Complex, a type debug/dwarf does not model).
func (l *layout) add(t dwarf.Type, off int64) bool {
	switch v := strip(t).(type) {
	case *dwarf.StructType:
		traits := l.aggs[v]
		if v.Incomplete || l.visiting[v] || traits.Bases || traits.NonTrivial {
			return false
		}
		l.visiting[v] = true
		defer delete(l.visiting, v)
		for _, f := range v.Field {
			if traits.Static[f.Name] {
				continue // a static data member (DWARF 4): not in the value
			}
			if f.BitSize != 0 {
				// A bit-field: an integer in each eightbyte it spans.
				start := off*8 + bitStart(f)
				for b := start / 64; b <= (start+f.BitSize-1)/64; b++ {
					if !l.mark(b*8, 'i', 1) {
						return false
					}
				}
				l.leaves++
				continue
			}
			if !l.add(f.Type, off+f.ByteOffset) {
				return false
			}
		}
		return true
	case *dwarf.ArrayType:
		elem := v.Type.Size()
		switch {
		case v.Count == 0:
			return true
		case v.Count < 0 || elem <= 0:
			return false
		}
		n := v.Count
		if l.classes == nil {
			n = 1 // only alignment and what it holds matter
		} else {
			n = min(n, int64(len(l.classes))*8/elem+1)
		}
		for i := int64(0); i < n; i++ {
			if !l.add(v.Type, off+i*elem) {
				return false
			}
		}
		return true
	case *dwarf.FloatType:
		n := v.ByteSize
		if n == 16 && v.Name == "long double" {
			l.x87, l.memory = true, true // class X87: memory for an argument
			l.leaves++
			l.align = max(l.align, 16)
			return true
		}
		if n != 4 && n != 8 {
			return false
		}
		return l.leaf(off, n, 'f')
	case *dwarf.IntType, *dwarf.UintType, *dwarf.CharType, *dwarf.UcharType,
		*dwarf.BoolType, *dwarf.EnumType, *dwarf.PtrType:
		n := v.Size()
		if n <= 0 || n > 8 {
			return false // __int128 and the like
		}
		return l.leaf(off, n, 'i')
	case *dwarf.UnsupportedType:
		if isReference(v) {
			return l.leaf(off, 8, 'i')
		}
	}
	return false
}

// leaf places a member of a base type, n bytes at off, of class k.
func (l *layout) leaf(off, n int64, k byte) bool {
	l.leaves++
	l.align = max(l.align, n)
	if off%n != 0 {
		l.memory = true // unaligned: memory
		return true
	}
	return l.mark(off, k, n)
}

// mark merges class k into the eightbyte holding off: integer wins.
func (l *layout) mark(off int64, k byte, n int64) bool {
	if l.classes == nil {
		return true
	}
	i := off / 8
	if i < 0 || i >= int64(len(l.classes)) || (off%8)+n > 8 {
		return false
	}
	if l.classes[i] != 'i' {
		l.classes[i] = k
	}
	return true
}

// bitStart is the offset in bits of bit-field f in its struct:
// DW_AT_data_bit_offset (DWARF 4 and later), else DW_AT_bit_offset, counted
// from the most significant bit of its storage unit (DWARF 2 and 3).
func bitStart(f *dwarf.StructField) int64 {
	if f.DataBitOffset != 0 || f.ByteSize == 0 {
		return f.DataBitOffset
	}
	return f.ByteOffset*8 + f.ByteSize*8 - f.BitOffset - f.BitSize
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
