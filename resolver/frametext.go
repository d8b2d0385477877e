package resolver

import (
	"strconv"
	"strings"

	"rtrace/internal/cxxname"
)

// The frame texts of sp-rtrace-resolve (src/rtrace-resolve/resolver.c:
// get_address_info, rs_resolve_address, UNKNOWN_SYMBOL).
const unknownFrame = "in ??"

// frameText formats what was found of a frame in module: "name() at
// file:line", "name() from module", or "from module" without a name.
func frameText(name, file string, line int, module string, full bool) string {
	if name == "" {
		return "from " + module
	}
	fn := displayName(name)
	if file == "" || line <= 0 {
		return fn + " from " + module
	}
	return fn + " at " + displayPath(file, full) + ":" + strconv.Itoa(line)
}

// frameText formats a: unknownFrame outside any mapping.
func (a *answer) frameText(full bool) string {
	if a.m == nil {
		return unknownFrame
	}
	return frameText(a.name, a.file, a.line, a.m.Path, full)
}

// displayName is a function name as sp-rtrace prints it: a C++ name
// demangled with its parameter list (libiberty's cplus_demangle with
// DMGL_PARAMS | DMGL_ANSI: "geo::Shape::area() const"), any other name
// followed by "()". Like sp-rtrace it drops glib's "IA__" prefix of
// internal aliases, and it drops a symbol version ("fgetpos64@@GLIBC_2.2.5"
// in glibc's .symtab).
func displayName(sym string) string {
	sym = strings.TrimPrefix(sym, "IA__")
	if i := strings.IndexByte(sym, '@'); i > 0 {
		sym = sym[:i]
	}
	if strings.HasPrefix(sym, "_Z") {
		if s, ok := cxxname.Full(sym); ok {
			return s
		}
	}
	return sym + "()"
}
