package postproc

import (
	"debug/elf"

	"rtrace/internal/elfx"
	"rtrace/internal/trace"
	"rtrace/internal/uftrace"
)

// addrMatcher is the --call-address filter. A range given for a library
// holds link-time addresses (nm's, as rtrace-function-address prints
// them): it applies to each mapping of that library, moved by the
// library's load bias there.
type addrMatcher struct {
	ranges []AddrRange
	spans  []span // runtime ranges known so far
	// execVaddr is the page-aligned link-time address of the executable
	// segment of the ELF file at path (a field so tests can fake it).
	execVaddr func(path string) (uint64, bool)
	cache     map[string]execInfo
}

type span struct{ lo, hi uint64 }

type execInfo struct {
	vaddr uint64
	ok    bool
}

func newAddrMatcher(ranges []AddrRange) *addrMatcher {
	m := &addrMatcher{ranges: ranges, execVaddr: elfExecVaddr, cache: map[string]execInfo{}}
	for _, r := range ranges {
		if r.Lib == "" {
			m.spans = append(m.spans, span{r.Start, r.Start + r.Size})
		}
	}
	return m
}

// addMapping places the ranges of the library mapped by mp.
//
// The trace's mappings are the executable ones (sp-rtrace listed the r-x
// lines of /proc/PID/maps), so the bias is the mapping's start minus the
// address of the executable PT_LOAD. When the file cannot be read, two
// guesses remain: a non-PIE object (bias 0) and an object linked at 0
// whose code starts the file (bias = start). A placement counts only when
// the range falls inside the mapping.
func (m *addrMatcher) addMapping(mp trace.Mapping) {
	for _, r := range m.ranges {
		if r.Lib == "" || !uftrace.MatchLibName(mp.Path, r.Lib) {
			continue
		}
		var biases []uint64
		if v, ok := m.exec(mp.Path); ok && mp.From >= v {
			biases = append(biases, mp.From-v)
		}
		biases = append(biases, 0, mp.From)
		for _, b := range biases {
			lo, hi := r.Start+b, r.Start+r.Size+b
			if lo >= r.Start && lo >= mp.From && hi <= mp.To && lo < hi {
				m.spans = append(m.spans, span{lo, hi})
				break
			}
		}
	}
}

// match reports whether a frame falls in a range.
func (m *addrMatcher) match(frames []trace.Frame) bool {
	for _, f := range frames {
		for _, s := range m.spans {
			if s.lo <= f.Addr && f.Addr < s.hi {
				return true
			}
		}
	}
	return false
}

func (m *addrMatcher) exec(path string) (uint64, bool) {
	info, ok := m.cache[path]
	if !ok {
		info.vaddr, info.ok = m.execVaddr(path)
		m.cache[path] = info
	}
	return info.vaddr, info.ok
}

// elfExecVaddr reads the first executable PT_LOAD of the ELF file at path.
// A file that cannot be read or parsed is a "no".
func elfExecVaddr(path string) (uint64, bool) {
	f, err := elfx.OpenELF(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			return elfx.PageDown(p.Vaddr), true
		}
	}
	return 0, false
}
