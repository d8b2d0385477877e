package resolver

import (
	"testing"

	"rtrace/internal/elfx"
)

func TestSymtabLookup(t *testing.T) {
	s := symtab{
		funcs: []elfx.Func{
			{Name: "_init", Value: 0x1000, Size: 0x1b},
			{Name: "_start", Value: 0x1100}, // unsized
			{Name: "outer", Value: 0x1200, Size: 0x100},
			{Name: "label", Value: 0x1250, Size: 0x10}, // nested in outer
			{Name: "small", Value: 0x1400, Size: 0x10},
			{Name: "other_section", Value: 0x3000, Size: 0x8},
		},
		text: []span{{0x1000, 0x1020}, {0x1040, 0x1060}, {0x1100, 0x1500}, {0x3000, 0x3100}},
	}
	for _, c := range []struct {
		pc   uint64
		want string
	}{
		{0xfff, ""},
		{0x1000, "_init"},
		{0x101a, "_init"},
		{0x1045, ""}, // .plt: a section of its own, no symbol in it
		{0x1100, "_start"},
		{0x11ff, "_start"}, // unsized: the nearest before
		{0x1255, "label"},  // the innermost sized symbol
		{0x1270, "outer"},  // past the nested one, still in outer
		{0x12ff, "outer"},
		{0x1300, "label"}, // in no sized symbol: the nearest before
		{0x1410, "small"}, // after its end, same section
		{0x2000, ""},      // in no section
		{0x3004, "other_section"},
		{0x3010, "other_section"},
		{^uint64(0), ""},
	} {
		fn, ok := s.lookup(c.pc)
		if fn.Name != c.want || ok != (c.want != "") {
			t.Errorf("lookup(%#x) = %q, %v; want %q", c.pc, fn.Name, ok, c.want)
		}
	}
}
