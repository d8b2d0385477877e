package uftrace

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// Symbol is one line of a .sym file. Addr is relative to the start of the
// module's first mapping. Type is 'T'/'t' (function), 'W'/'w' (weak), 'P'
// (PLT entry) or '?' (end marker).
type Symbol struct {
	Addr uint64
	Type byte
	Name string
}

// SymEnd is the name of the end marker that gives the last symbol its size.
const SymEnd = "__sym_end"

// WriteSyms writes a .sym file: a header naming the module, the symbols
// sorted by address and an end marker at end (the end of the last symbol;
// 0 means "last symbol + 1").
func WriteSyms(w io.Writer, path, buildID string, syms []Symbol, end uint64) error {
	sorted := make([]Symbol, 0, len(syms))
	for _, s := range syms {
		if strings.ContainsAny(s.Name, "\n ") || s.Name == "" {
			return fmt.Errorf("symbol %q at %#x: empty name or whitespace in name", s.Name, s.Addr)
		}
		sorted = append(sorted, s)
	}
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Addr < sorted[j].Addr })
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# symbols: %d\n", len(sorted))
	if path != "" {
		fmt.Fprintf(bw, "# path name: %s\n", path)
	}
	if buildID != "" {
		fmt.Fprintf(bw, "# build-id: %s\n", buildID)
	}
	for _, s := range sorted {
		fmt.Fprintf(bw, "%016x %c %s\n", s.Addr, s.Type, s.Name)
	}
	if n := len(sorted); n > 0 {
		if last := sorted[n-1].Addr; end <= last {
			end = last + 1
		}
		fmt.Fprintf(bw, "%016x ? %s\n", end, SymEnd)
	}
	return bw.Flush()
}

// SymTable is a sorted symbol table with size-aware lookup.
type SymTable struct {
	Path    string
	BuildID string
	Syms    []Symbol // sorted by Addr, end markers included
}

// ParseSyms reads a .sym file.
func ParseSyms(r io.Reader) (*SymTable, error) {
	t := &SymTable{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "# path name: "); ok {
			t.Path = p
			continue
		}
		if id, ok := strings.CutPrefix(line, "# build-id: "); ok {
			t.BuildID = id
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.SplitN(line, " ", 3)
		if len(f) != 3 || len(f[1]) != 1 {
			return nil, fmt.Errorf("line %d: want \"<hex addr> <type> <name>\", got %q", n, truncate(line, 60))
		}
		a, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: bad address %q", n, truncate(f[0], 20))
		}
		t.Syms = append(t.Syms, Symbol{Addr: a, Type: f[1][0], Name: f[2]})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	sort.SliceStable(t.Syms, func(i, j int) bool { return t.Syms[i].Addr < t.Syms[j].Addr })
	return t, nil
}

// isFunc reports whether a symbol type names code uftrace resolves records to.
func isFunc(t byte) bool {
	switch t {
	case 'T', 't', 'W', 'w', 'P', 'i':
		return true
	}
	return false
}

// Size returns the size of the function containing the module-relative
// address off, as Lookup finds it: the distance to the next line (0 when
// Lookup finds none).
func (t *SymTable) Size(off uint64) uint64 {
	i, ok := t.index(off)
	if !ok {
		return 0
	}
	return t.Syms[i+1].Addr - t.Syms[i].Addr
}

// Lookup returns the function containing the module-relative address off:
// the last function symbol at or below off, provided off is below the next
// symbol (its size is the distance to the next line).
func (t *SymTable) Lookup(off uint64) (Symbol, bool) {
	i, ok := t.index(off)
	if !ok {
		return Symbol{}, false
	}
	return t.Syms[i], true
}

// index is the index in Syms of Lookup's symbol, which has a next line.
func (t *SymTable) index(off uint64) (int, bool) {
	i := sort.Search(len(t.Syms), func(i int) bool { return t.Syms[i].Addr > off }) - 1
	if i < 0 || !isFunc(t.Syms[i].Type) || i+1 == len(t.Syms) {
		return 0, false // none, or no end: the last line has no size
	}
	return i, true
}
