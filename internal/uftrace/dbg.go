package uftrace

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// DebugFunc is one function block of a .dbg file.
type DebugFunc struct {
	Addr    uint64 // module-relative, as in .sym
	Name    string
	Line    int    // 0: none
	File    string // source file of Line
	ArgSpec string // "@arg1/i32,arg2/s" (A: line), "" for none
	RetSpec string // "@retval/s" (R: line)
	Enums   []string
}

// WriteDebug writes a .dbg file for one module, functions sorted by address.
func WriteDebug(w io.Writer, path, buildID string, funcs []DebugFunc) error {
	sorted := append([]DebugFunc(nil), funcs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Addr < sorted[j].Addr })
	bw := bufio.NewWriter(w)
	if path != "" {
		fmt.Fprintf(bw, "# path name: %s\n", path)
	}
	if buildID != "" {
		fmt.Fprintf(bw, "# build-id: %s\n", buildID)
	}
	// Enums first, once each, as uftrace writes them: they are global to
	// the module.
	seen := map[string]bool{}
	for _, f := range sorted {
		for _, e := range f.Enums {
			if strings.ContainsAny(e, "\n") {
				return fmt.Errorf("debug info of %s: enum %q contains a newline", f.Name, e)
			}
			if !seen[e] {
				seen[e] = true
				fmt.Fprintf(bw, "E: %s\n", e)
			}
		}
	}
	for _, f := range sorted {
		for _, s := range []string{f.Name, f.File, f.ArgSpec, f.RetSpec} {
			if strings.ContainsAny(s, "\n") {
				return fmt.Errorf("debug info of %s: value %q contains a newline", f.Name, s)
			}
		}
		fmt.Fprintf(bw, "F: %x %s\n", f.Addr, f.Name)
		if f.Line > 0 {
			fmt.Fprintf(bw, "L: %d %s\n", f.Line, f.File)
		}
		if f.ArgSpec != "" {
			fmt.Fprintf(bw, "A: %s\n", f.ArgSpec)
		}
		if f.RetSpec != "" {
			fmt.Fprintf(bw, "R: %s\n", f.RetSpec)
		}
	}
	return bw.Flush()
}

// ParseDebug reads a .dbg file.
func ParseDebug(r io.Reader) ([]DebugFunc, error) {
	var out []DebugFunc
	var pending []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		if len(line) < 3 || line[1] != ':' || line[2] != ' ' {
			return nil, fmt.Errorf("line %d: want \"X: value\", got %q", n, truncate(line, 60))
		}
		v := line[3:]
		if line[0] == 'F' {
			a, name, ok := strings.Cut(v, " ")
			addr, err := strconv.ParseUint(a, 16, 64)
			if !ok || err != nil {
				return nil, fmt.Errorf("line %d: want \"F: <hex addr> <name>\", got %q", n, truncate(line, 60))
			}
			out = append(out, DebugFunc{Addr: addr, Name: name})
			if len(out) == 1 {
				out[0].Enums, pending = pending, nil
			}
			continue
		}
		if line[0] == 'E' && len(out) == 0 {
			pending = append(pending, v) // uftrace writes enums before any F:
			continue
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("line %d: %c: line before any F: line", n, line[0])
		}
		f := &out[len(out)-1]
		switch line[0] {
		case 'L':
			l, file, _ := strings.Cut(v, " ")
			num, err := strconv.Atoi(l)
			if err != nil {
				return nil, fmt.Errorf("line %d: bad line number %q", n, truncate(l, 20))
			}
			f.Line, f.File = num, file
		case 'A':
			f.ArgSpec = v
		case 'R':
			f.RetSpec = v
		case 'E':
			f.Enums = append(f.Enums, v)
		}
	}
	return out, sc.Err()
}
