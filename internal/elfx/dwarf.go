package elfx

import (
	"debug/dwarf"
	"fmt"
	"path/filepath"
	"sort"
)

// Subprogram is a function described by DWARF: its link-time entry address
// and where it is declared.
type Subprogram struct {
	Low  uint64
	Line int
	File string
	// Params are the types of the formal parameters, in order; Return is
	// the return type, nil for void. Types are as debug/dwarf resolves them.
	Params []dwarf.Type
	Return dwarf.Type
	// Variadic: the parameter list ends in "...".
	Variadic bool
}

// Subprograms lists the functions with code that the DWARF of path
// describes, sorted by address, with their types. A file without DWARF
// gives nil, nil; corrupt DWARF gives an error.
func Subprograms(path string) ([]Subprogram, error) { return readSubprograms(path, true) }

// SubprogramLines is Subprograms without the types (Params, Return and
// Variadic stay empty): it skips what functions hold, several times
// quicker on a large program.
func SubprogramLines(path string) ([]Subprogram, error) { return readSubprograms(path, false) }

func readSubprograms(path string, types bool) ([]Subprogram, error) {
	ef, err := OpenELF(path)
	if err != nil {
		return nil, err
	}
	defer ef.Close()
	if ef.Section(".debug_info") == nil {
		return nil, nil
	}
	d, err := DWARF(ef)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var subs []Subprogram
	err = Guard(func() error {
		var err error
		subs, err = subprograms(d, types)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: reading DWARF: %w", path, err)
	}
	return subs, nil
}

// subprograms walks d for Subprograms (types: with the types).
func subprograms(d *dwarf.Data, types bool) (subs []Subprogram, err error) {
	r := d.Reader()
	var files []*dwarf.LineFile
	seen := map[uint64]bool{}
	for {
		e, err := r.Next()
		if err != nil {
			return nil, err
		}
		if e == nil {
			break
		}
		switch e.Tag {
		case dwarf.TagCompileUnit:
			files = nil
			if lr, err := d.LineReader(e); err == nil && lr != nil {
				files = lr.Files()
			}
		case dwarf.TagSubprogram:
			low, ok := e.Val(dwarf.AttrLowpc).(uint64)
			if !ok || seen[low] {
				continue
			}
			seen[low] = true
			s := Subprogram{Low: low}
			line, _ := e.Val(dwarf.AttrDeclLine).(int64)
			fi, _ := e.Val(dwarf.AttrDeclFile).(int64)
			if fi > 0 && int(fi) < len(files) && files[fi] != nil && line > 0 {
				s.Line, s.File = int(line), filepath.Clean(files[fi].Name)
			}
			if !types {
				r.SkipChildren()
				subs = append(subs, s)
				continue
			}
			if off, ok := e.Val(dwarf.AttrType).(dwarf.Offset); ok {
				s.Return, _ = d.Type(off)
			}
			if e.Children {
				if err := params(r, d, &s); err != nil {
					return nil, err
				}
			}
			subs = append(subs, s)
		}
	}
	sort.Slice(subs, func(i, j int) bool { return subs[i].Low < subs[j].Low })
	return subs, nil
}

// params reads the children of a subprogram entry, collecting its formal
// parameters (direct children only) into s.
func params(r *dwarf.Reader, d *dwarf.Data, s *Subprogram) error {
	depth := 1
	for depth > 0 {
		e, err := r.Next()
		if err != nil {
			return err
		}
		if e == nil {
			return nil
		}
		if e.Tag == 0 {
			depth--
			continue
		}
		if depth == 1 {
			switch e.Tag {
			case dwarf.TagFormalParameter:
				var t dwarf.Type
				if off, ok := e.Val(dwarf.AttrType).(dwarf.Offset); ok {
					t, _ = d.Type(off)
				}
				s.Params = append(s.Params, t)
			case dwarf.TagUnspecifiedParameters:
				s.Variadic = true
			}
		}
		if e.Children {
			depth++
		}
	}
	return nil
}
