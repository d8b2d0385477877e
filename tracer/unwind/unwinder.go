package unwind

import (
	"fmt"
	"io"
	"sort"
)

// Unwinder computes backtraces of one target. It owns the parsed CFI of the
// target's modules and a stack buffer: it is not safe for concurrent use.
type Unwinder struct {
	// Warn, if set, receives one line for each module whose CFI cannot
	// be read (it is then unwound with frame pointers only).
	Warn io.Writer

	mods  []*module // sorted by lo, disjoint
	cfis  map[cfiKey]*cfi
	stack stack
}

// module is an ELF object mapped in the target.
type module struct {
	key    cfiKey
	lo, hi uint64 // runtime range of its code
	cfi    *cfi   // nil until first used; without FDEs if unreadable
}

type cfiKey struct {
	path string
	bias uint64
}

// New returns an Unwinder with no modules.
func New() *Unwinder {
	return &Unwinder{cfis: map[cfiKey]*cfi{}}
}

// AddModule registers the ELF object at path, mapped with load bias bias
// (runtime address = link-time address + bias), whose executable code is at
// [lo,hi) in the target. A module already registered over part of that
// range is replaced. Its CFI is parsed on first use, once per path and bias.
func (u *Unwinder) AddModule(path string, bias, lo, hi uint64) {
	if hi <= lo {
		return
	}
	var gone []*module
	keep := u.mods[:0]
	for _, m := range u.mods {
		if m.hi <= lo || m.lo >= hi {
			keep = append(keep, m)
		} else {
			gone = append(gone, m)
		}
	}
	m := &module{key: cfiKey{path, bias}, lo: lo, hi: hi}
	i := sort.Search(len(keep), func(i int) bool { return keep[i].lo >= lo })
	keep = append(keep, nil)
	copy(keep[i+1:], keep[i:])
	keep[i] = m
	u.mods = keep
	for _, g := range gone {
		u.forget(g)
	}
}

// RemoveModule unregisters the module whose code starts at lo (dlclose).
func (u *Unwinder) RemoveModule(lo uint64) {
	for i, m := range u.mods {
		if m.lo == lo {
			u.mods = append(u.mods[:i], u.mods[i+1:]...)
			u.forget(m)
			return
		}
	}
}

// forget drops the parsed CFI of m, no longer registered, unless a module
// still is with the same path and bias: a library dlopened again usually
// comes back at another bias, and the cache must not grow without bound.
func (u *Unwinder) forget(m *module) {
	for _, o := range u.mods {
		if o.key == m.key {
			return
		}
	}
	delete(u.cfis, m.key)
}

// find returns the module whose code holds pc, or nil.
func (u *Unwinder) find(pc uint64) *module {
	i := sort.Search(len(u.mods), func(i int) bool { return u.mods[i].hi > pc })
	if i < len(u.mods) && u.mods[i].lo <= pc {
		return u.mods[i]
	}
	return nil
}

// cfiOf returns m's CFI, parsing it on first use.
func (u *Unwinder) cfiOf(m *module) *cfi {
	if m.cfi != nil {
		return m.cfi
	}
	c, ok := u.cfis[m.key]
	if !ok {
		var err error
		if c, err = loadCFI(m.key.path, m.key.bias); err != nil {
			if u.Warn != nil {
				fmt.Fprintf(u.Warn, "unwind: %v; using frame pointers there\n", err)
			}
			c = &cfi{} // frame pointers only
		}
		u.cfis[m.key] = c
	}
	m.cfi = c
	return c
}

// ModuleInfo is a module the unwinder knows: its code's runtime range, its
// load bias and its file.
type ModuleInfo struct {
	Lo, Hi, Bias uint64
	Path         string
}

// Modules lists the modules registered, sorted by Lo: the index an
// in-process walker searches (fast's walk.S) holds the same, so that a pc
// finds the same module, or none, in both.
func (u *Unwinder) Modules() []ModuleInfo {
	out := make([]ModuleInfo, len(u.mods))
	for i, m := range u.mods {
		out[i] = ModuleInfo{Lo: m.lo, Hi: m.hi, Bias: m.key.bias, Path: m.key.path}
	}
	return out
}

// Table compiles the CFI of the module m holds (its Modules entry) into
// its Table, from the CFI Backtrace parsed of it (parsed now if not yet):
// a module whose CFI cannot be read gets an empty one (every row the rbp
// chain), as Backtrace then unwinds it with frame pointers.
func (u *Unwinder) Table(m ModuleInfo) *Table {
	for _, mod := range u.mods {
		if mod.lo == m.Lo && mod.key.path == m.Path {
			return compileAt(u.cfiOf(mod).fdes, mod.key.bias)
		}
	}
	return &Table{}
}
