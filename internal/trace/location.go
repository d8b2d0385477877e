package trace

// Location is what the resolver knows of one backtrace address, in pieces
// rather than as sp-rtrace frame text: what a profile format needs. It
// lives here so that writers such as internal/pprofout need no stage
// package.
type Location struct {
	Module       string // mapping's file path, "" when no mapping
	Start, Limit uint64 // the mapping
	Offset       uint64 // file offset of Start if known, else 0
	Func         string // demangled display name without "()", "" when unknown
	File         string // source file as DWARF gives it (full path), "" when unknown
	Line         int
}
