// Package cxxname gives C++ symbols the short demangled form uftrace shows
// and matches its patterns against: "geo::Shape::Shape" for
// _ZN3geo5ShapeC2Ei, no parameters, no template arguments, no clone
// suffixes. Names that are not mangled come back unchanged. Full gives the
// long form sp-rtrace prints. Both guard rtrace against panics of the
// third-party demangler.
package cxxname

import "github.com/ianlancetaylor/demangle"

// Short returns the uftrace-style name of sym.
func Short(sym string) (name string) {
	if len(sym) < 2 || sym[0] != '_' || sym[1] != 'Z' {
		return sym
	}
	defer func() {
		if recover() != nil { // the demangler must not take rtrace down
			name = sym
		}
	}()
	return demangle.Filter(sym, demangle.NoParams, demangle.NoTemplateParams, demangle.NoClones)
}

// Full returns sym demangled with its parameter list, as libiberty's
// cplus_demangle gives it with DMGL_PARAMS | DMGL_ANSI ("geo::Shape::area()
// const"); ok is false when sym does not demangle, or demangles to nothing
// (the demangler returns "" without an error for some input: see
// testdata/fuzz/FuzzShort).
func Full(sym string) (name string, ok bool) {
	defer func() {
		if recover() != nil { // as in Short
			name, ok = "", false
		}
	}()
	name, err := demangle.ToString(sym)
	return name, err == nil && name != ""
}
