// Package cxxname gives C++ symbols the short demangled form uftrace shows
// and matches its patterns against: "geo::Shape::Shape" for
// _ZN3geo5ShapeC2Ei, no parameters, no template arguments, no clone
// suffixes. Names that are not mangled come back unchanged.
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
