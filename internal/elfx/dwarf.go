package elfx

import (
	"debug/dwarf"
	"debug/elf"
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
}

// Subprograms lists the functions with code that the DWARF of path
// describes, sorted by address. A file without DWARF gives nil, nil;
// corrupt DWARF gives an error.
func Subprograms(path string) (subs []Subprogram, err error) {
	defer func() {
		if p := recover(); p != nil {
			subs, err = nil, fmt.Errorf("%s: corrupt DWARF: %v", path, p)
		}
	}()
	ef, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer ef.Close()
	if ef.Section(".debug_info") == nil {
		return nil, nil
	}
	d, err := ef.DWARF()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r := d.Reader()
	var files []*dwarf.LineFile
	seen := map[uint64]bool{}
	for {
		e, err := r.Next()
		if err != nil {
			return nil, fmt.Errorf("%s: reading DWARF: %w", path, err)
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
			subs = append(subs, s)
		}
	}
	sort.Slice(subs, func(i, j int) bool { return subs[i].Low < subs[j].Low })
	return subs, nil
}
