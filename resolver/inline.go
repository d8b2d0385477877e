package resolver

import (
	"debug/dwarf"
	"fmt"
	"sort"
)

// cuRange is a PC range of a compilation unit.
type cuRange struct {
	span
	cu dwarf.Offset
}

// dwarfIndex answers which function, inlined or not, DWARF places at an
// address. Each unit's functions are read the first time an address falls
// in it.
type dwarfIndex struct {
	d     *dwarf.Data
	lines *lineTable
	cus   []cuRange
	units map[dwarf.Offset]*unitFuncs // nil value: the unit failed to parse
	names map[dwarf.Offset]string
}

// unitFuncs are the functions with code of one unit.
type unitFuncs struct {
	ranges []funcRange // sorted by lo
	funcs  []dwarfFunc
}

type funcRange struct {
	span
	fn int
}

// dwarfFunc is a subprogram with code and the inlined subroutines in it.
type dwarfFunc struct {
	die     dwarf.Offset
	inlined []inlineRange
}

// inlineRange is code of an inlined subroutine: origin is the DIE its name
// comes from, depth its nesting (1 for one inlined directly).
type inlineRange struct {
	span
	depth  int
	origin dwarf.Offset
}

// function returns the name of the innermost function at pc as DWARF gives
// it (a linkage name when there is one), and whether it was inlined there.
func (x *dwarfIndex) function(pc uint64) (name string, inlined bool, err error) {
	cu, ok := x.unitAt(pc)
	if !ok {
		return "", false, nil
	}
	u, seen := x.units[cu]
	if !seen {
		u, err = x.readUnit(cu)
		x.units[cu] = u
		if err != nil {
			return "", false, err
		}
	}
	if u == nil {
		return "", false, nil
	}
	i := sort.Search(len(u.ranges), func(i int) bool { return u.ranges[i].lo > pc }) - 1
	for j := i; j >= 0 && j > i-lookback; j-- {
		if r := u.ranges[j]; pc < r.hi {
			fn := &u.funcs[r.fn]
			best := -1
			for k, in := range fn.inlined {
				if in.lo <= pc && pc < in.hi && (best < 0 || in.depth > fn.inlined[best].depth) {
					best = k
				}
			}
			if best >= 0 {
				if n := x.name(fn.inlined[best].origin, 0); n != "" {
					return n, true, nil
				}
			}
			return x.name(fn.die, 0), false, nil
		}
	}
	return "", false, nil
}

// unitAt returns the unit whose ranges hold pc.
func (x *dwarfIndex) unitAt(pc uint64) (dwarf.Offset, bool) {
	i := sort.Search(len(x.cus), func(i int) bool { return x.cus[i].lo > pc }) - 1
	for j := i; j >= 0 && j > i-lookback; j-- {
		if pc < x.cus[j].hi {
			return x.cus[j].cu, true
		}
	}
	return 0, false
}

// readUnit walks the entries of the unit at off.
func (x *dwarfIndex) readUnit(off dwarf.Offset) (*unitFuncs, error) {
	r := x.d.Reader()
	r.Seek(off)
	cu, err := r.Next()
	if err != nil || cu == nil || !cu.Children {
		return nil, err
	}
	u := &unitFuncs{}
	// stack holds, per open entry with children, the function it is
	// in (-1 outside any) and the inline depth there.
	type level struct{ fn, depth int }
	stack := []level{{-1, 0}}
	for len(stack) > 0 {
		e, err := r.Next()
		if err != nil {
			return nil, fmt.Errorf("reading DWARF unit at %#x: %w", off, err)
		}
		if e == nil {
			break
		}
		if e.Tag == 0 {
			stack = stack[:len(stack)-1]
			continue
		}
		cur := stack[len(stack)-1]
		switch e.Tag {
		case dwarf.TagSubprogram:
			rs, _ := x.d.Ranges(e)
			if len(rs) > 0 {
				cur = level{len(u.funcs), 0}
				u.funcs = append(u.funcs, dwarfFunc{die: e.Offset})
				for _, rg := range rs {
					if rg[1] > rg[0] {
						u.ranges = append(u.ranges, funcRange{span{rg[0], rg[1]}, cur.fn})
					}
				}
			}
		case dwarf.TagInlinedSubroutine:
			if cur.fn >= 0 {
				cur.depth++
				origin, _ := e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset)
				rs, _ := x.d.Ranges(e)
				for _, rg := range rs {
					if rg[1] > rg[0] {
						u.funcs[cur.fn].inlined = append(u.funcs[cur.fn].inlined, inlineRange{span{rg[0], rg[1]}, cur.depth, origin})
					}
				}
			}
		}
		if e.Children {
			stack = append(stack, cur)
		}
	}
	sort.Slice(u.ranges, func(i, j int) bool { return u.ranges[i].lo < u.ranges[j].lo })
	return u, nil
}

// attrMIPSLinkageName is DW_AT_MIPS_linkage_name, the linkage name
// attribute of DWARF 2 and 3 producers.
const attrMIPSLinkageName = dwarf.Attr(0x2007)

// name returns the name of the function entry at off: its linkage name,
// else its name, else that of its specification or abstract origin.
func (x *dwarfIndex) name(off dwarf.Offset, depth int) string {
	if n, ok := x.names[off]; ok {
		return n
	}
	r := x.d.Reader()
	r.Seek(off)
	e, err := r.Next()
	n := ""
	if err == nil && e != nil {
		for _, a := range []dwarf.Attr{dwarf.AttrLinkageName, attrMIPSLinkageName, dwarf.AttrName} {
			if s, ok := e.Val(a).(string); ok && s != "" {
				n = s
				break
			}
		}
		for _, a := range []dwarf.Attr{dwarf.AttrSpecification, dwarf.AttrAbstractOrigin} {
			if ref, ok := e.Val(a).(dwarf.Offset); ok && n == "" && depth < 4 && ref != off {
				n = x.name(ref, depth+1)
			}
		}
	}
	x.names[off] = n
	return n
}
