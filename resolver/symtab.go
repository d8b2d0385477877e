package resolver

import (
	"sort"

	"rtrace/internal/elfx"
)

// span is an address range [lo, hi).
type span struct{ lo, hi uint64 }

// symtab finds the function symbol of a link-time address.
type symtab struct {
	funcs []elfx.Func // sorted by Value, one per address
	// text are the executable sections, sorted: a symbol names addresses
	// after its end only within its own section.
	text []span
}

// lookback bounds the search for a sized symbol that encloses an address
// past later (nested or unsized) symbols.
const lookback = 8

// lookup returns the symbol naming pc: a sized symbol that contains it,
// otherwise the nearest symbol before it in the same executable section.
func (s *symtab) lookup(pc uint64) (elfx.Func, bool) {
	i := sort.Search(len(s.funcs), func(i int) bool { return s.funcs[i].Value > pc }) - 1
	if i < 0 {
		return elfx.Func{}, false
	}
	for j := i; j >= 0 && j > i-lookback; j-- {
		if f := s.funcs[j]; f.Size > 0 && pc-f.Value < f.Size {
			return f, true
		}
	}
	sec, ok := s.section(pc)
	if !ok || s.funcs[i].Value < sec.lo {
		return elfx.Func{}, false
	}
	return s.funcs[i], true
}

// section returns the executable section holding pc.
func (s *symtab) section(pc uint64) (span, bool) {
	i := sort.Search(len(s.text), func(i int) bool { return s.text[i].lo > pc }) - 1
	if i < 0 || pc >= s.text[i].hi {
		return span{}, false
	}
	return s.text[i], true
}

func sortSpans(s []span) {
	sort.Slice(s, func(i, j int) bool { return s[i].lo < s[j].lo })
}
