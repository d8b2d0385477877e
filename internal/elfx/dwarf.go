package elfx

import (
	"debug/dwarf"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
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
	// Aggs are the traits of the file's structs (shared by its
	// Subprograms; nil without types).
	Aggs Aggregates
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
	subs, err := DataSubprograms(d, types)
	if err != nil {
		return nil, fmt.Errorf("%s: reading DWARF: %w", path, err)
	}
	return subs, nil
}

// DataSubprograms is Subprograms (types) or SubprogramLines (!types) of
// DWARF data already loaded; corrupt DWARF gives an error wrapping
// ErrCorrupt.
func DataSubprograms(d *dwarf.Data, types bool) (subs []Subprogram, err error) {
	err = Guard(func() error {
		var err error
		subs, err = subprograms(d, types)
		return err
	})
	return subs, err
}

// subprograms walks d for Subprograms (types: with the types). With
// types, it walks every entry: a function's formal parameters are its
// direct children, and a function may hold others (the methods of a local
// struct, a lambda's operator()); what the entries of structs say beyond
// their members goes to the Aggregates every Subprogram shares.
func subprograms(d *dwarf.Data, types bool) (subs []Subprogram, err error) {
	r := d.Reader()
	var files []*dwarf.LineFile
	seen := map[uint64]bool{}
	depth := 0
	// opened are the entries whose children are being read: a function
	// (its index in subs) or a struct (its offset), and their depth.
	type open struct {
		sub    int // -1: a struct
		agg    dwarf.Offset
		depth  int
		traits Aggregate
	}
	var opened []open
	aggs := Aggregates{}
	for {
		e, err := r.Next()
		if err != nil {
			return nil, err
		}
		if e == nil {
			break
		}
		if e.Tag == 0 {
			depth--
			if n := len(opened); n > 0 && opened[n-1].depth == depth {
				if o := opened[n-1]; o.sub < 0 && (o.traits.NonTrivial || o.traits.Bases || o.traits.Methods || o.traits.Static != nil) {
					if t, err := d.Type(o.agg); err == nil {
						aggs[t] = o.traits
					}
				}
				opened = opened[:n-1]
			}
			continue
		}
		var in *open // the entry whose direct child e is
		if n := len(opened); n > 0 && opened[n-1].depth == depth-1 {
			in = &opened[n-1]
		}
		switch e.Tag {
		case dwarf.TagCompileUnit:
			files = nil
			depth, opened = 0, opened[:0] // whatever a broken unit left open
			if lr, err := d.LineReader(e); err == nil && lr != nil {
				files = lr.Files()
			}
		case dwarf.TagSubprogram:
			if in != nil && in.sub < 0 {
				// A member function: a destructor or a virtual one makes
				// the class non-trivial (passed by invisible reference).
				// A destructor defaulted in the class (~S() = default) is
				// trivial; a user-provided copy constructor alone is not
				// seen (a gap docs/uftrace-notes.md names).
				in.traits.Methods = true
				name, _ := e.Val(dwarf.AttrName).(string)
				defaulted, _ := e.Val(dwarf.AttrDefaulted).(int64)
				if strings.HasPrefix(name, "~") && defaulted != 1 || e.Val(dwarf.AttrVirtuality) != nil {
					in.traits.NonTrivial = true
				}
			}
			low, ok := e.Val(dwarf.AttrLowpc).(uint64)
			if !ok || seen[low] {
				break
			}
			seen[low] = true
			s := Subprogram{Low: low}
			line, _ := e.Val(dwarf.AttrDeclLine).(int64)
			fi, _ := e.Val(dwarf.AttrDeclFile).(int64)
			if fi > 0 && int(fi) < len(files) && files[fi] != nil && line > 0 {
				s.Line, s.File = int(line), filepath.Clean(files[fi].Name)
			}
			subs = append(subs, s)
			if !types {
				r.SkipChildren()
				continue
			}
			subs[len(subs)-1].Return = typeOf(d, e)
			if e.Children {
				opened = append(opened, open{sub: len(subs) - 1, depth: depth})
			}
		case dwarf.TagStructType, dwarf.TagClassType, dwarf.TagUnionType:
			if types && e.Children {
				opened = append(opened, open{sub: -1, agg: e.Offset, depth: depth})
			}
		case dwarf.TagInheritance:
			if in != nil && in.sub < 0 {
				in.traits.Bases = true
			}
		case dwarf.TagMember:
			// DWARF 4 writes a static data member as a member with
			// DW_AT_declaration (DWARF 5: a variable); debug/dwarf lists
			// it as a field at offset 0.
			if in != nil && in.sub < 0 && e.Val(dwarf.AttrDeclaration) != nil {
				if name, ok := e.Val(dwarf.AttrName).(string); ok {
					if in.traits.Static == nil {
						in.traits.Static = map[string]bool{}
					}
					in.traits.Static[name] = true
				}
			}
		case dwarf.TagFormalParameter:
			if in != nil && in.sub >= 0 {
				subs[in.sub].Params = append(subs[in.sub].Params, typeOf(d, e))
			}
		case dwarf.TagUnspecifiedParameters:
			if in != nil && in.sub >= 0 {
				subs[in.sub].Variadic = true
			}
		}
		if e.Children {
			depth++
		}
	}
	for i := range subs {
		subs[i].Aggs = aggs
	}
	sort.Slice(subs, func(i, j int) bool { return subs[i].Low < subs[j].Low })
	return subs, nil
}

// Aggregate is what a struct's or class's DWARF entry says beyond the
// members debug/dwarf lists: how a value of it is passed.
type Aggregate struct {
	// NonTrivial: it has a destructor or virtual functions, and is
	// passed and returned by invisible reference (Itanium C++ ABI, 3.1.2).
	NonTrivial bool
	// Bases: it has base classes, whose members debug/dwarf does not list.
	Bases bool
	// Methods: it declares member functions (a lambda's closure type
	// has its operator()).
	Methods bool
	// Static names the static data members debug/dwarf lists as fields.
	Static map[string]bool
}

// Aggregates are the Aggregate traits of the structs of one file that have
// any, by their debug/dwarf type.
type Aggregates map[dwarf.Type]Aggregate

// typeOf returns the type of a subprogram or parameter entry, nil when it
// has none (void). A C++ member function defined out of its class, and an
// out-of-line copy of an inline function, leave their types to the entry
// their DW_AT_specification or DW_AT_abstract_origin names (DWARF 5,
// 2.13.2 and 3.3.8.2): typeOf follows those, a few steps at most.
func typeOf(d *dwarf.Data, e *dwarf.Entry) dwarf.Type {
	for range 4 {
		if off, ok := e.Val(dwarf.AttrType).(dwarf.Offset); ok {
			t, _ := d.Type(off)
			return t
		}
		off, ok := e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset)
		if !ok {
			if off, ok = e.Val(dwarf.AttrSpecification).(dwarf.Offset); !ok {
				return nil
			}
		}
		r := d.Reader()
		r.Seek(off)
		next, err := r.Next()
		if err != nil || next == nil {
			return nil
		}
		e = next
	}
	return nil
}
