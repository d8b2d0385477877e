package uftrace

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Mapping is one line of a /proc/<pid>/maps copy.
type Mapping struct {
	Start, End uint64
	Perm       string
	Offset     uint64
	Path       string // "" for anonymous mappings
}

// Module is a file mapped into the target: consecutive mappings of one path
// merged. Base is the start of its first mapping, the origin of .sym addresses.
type Module struct {
	Path       string
	Base, End  uint64
	SymFile    string // basename of its .sym/.dbg files in the directory
	Syms       *SymTable
	debugFuncs []DebugFunc
	// dbgBuildID is the build id the .dbg file names ("" for none: uftrace
	// reads a .dbg with one only when the map line repeats it).
	dbgBuildID string
}

// ParseMaps parses the text of /proc/<pid>/maps (or a sid-*.map copy).
func ParseMaps(r io.Reader) ([]Mapping, error) {
	var out []Mapping
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 5 {
			return nil, fmt.Errorf("line %d: want at least 5 fields, got %q", n, truncate(line, 60))
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		off, err3 := strconv.ParseUint(f[2], 16, 64)
		if !ok || err1 != nil || err2 != nil || err3 != nil || end < start {
			return nil, fmt.Errorf("line %d: bad address range or offset in %q", n, truncate(line, 60))
		}
		m := Mapping{Start: start, End: end, Perm: f[1], Offset: off}
		if len(f) >= 6 {
			// The path is the sixth column to the end; uftrace appends
			// " build-id:<hex>", which is not part of the path.
			i := indexField(line, 5)
			m.Path = strings.TrimSpace(line[i:])
			if p, _, ok := strings.Cut(m.Path, " build-id:"); ok {
				m.Path = p
			}
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// indexField returns the byte offset of the n-th (0-based) whitespace-separated field.
func indexField(s string, n int) int {
	i := 0
	for f := 0; ; f++ {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if f == n {
			return i
		}
		for i < len(s) && s[i] != ' ' && s[i] != '\t' {
			i++
		}
	}
}

// Modules merges consecutive mappings of one file into modules, as uftrace's
// reader does; anonymous and [special] mappings are left out.
func Modules(maps []Mapping) []*Module {
	var out []*Module
	for _, m := range maps {
		if m.Path == "" || m.Path[0] == '[' {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Path == m.Path {
			out[n-1].End = m.End
			continue
		}
		out = append(out, &Module{Path: m.Path, Base: m.Start, End: m.End})
	}
	return out
}

// HasStack reports whether the maps include the [stack] line uftrace requires.
func HasStack(maps []Mapping) bool {
	for _, m := range maps {
		if m.Path == "[stack]" {
			return true
		}
	}
	return false
}
