package resolver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rtrace/internal/cxxname"
	"rtrace/internal/elfx"
	"rtrace/internal/testutil"
	"rtrace/internal/uftrace"
)

// uftraceSpecs records the -pg build of src with uftrace -a and returns
// its .dbg entries, with rtrace's for the plain build.
func uftraceSpecs(t *testing.T, src string) (want, got []uftrace.DebugFunc) {
	t.Helper()
	uft := testutil.RequireTool(t, "uftrace")
	plain := testutil.BuildC(t, src, "-g", "-O0")
	pg := testutil.BuildC(t, src, "-g", "-O0", "-pg")
	tmp := t.TempDir()
	testutil.Run(t, tmp, uft, "record", "--no-libcall", "-a", "-d", "U", pg)
	b, err := os.Open(filepath.Join(tmp, "U", filepath.Base(pg)+".dbg"))
	if err != nil {
		t.Fatal(err)
	}
	want, err = uftrace.ParseDebug(b)
	b.Close()
	if err != nil {
		t.Fatal(err)
	}
	f, err := elfx.Open(plain)
	if err != nil {
		t.Fatal(err)
	}
	got, err = DebugFuncs(plain, f, true)
	if err != nil {
		t.Fatal(err)
	}
	return want, got
}

// AutoSpecs writes the A:/R:/E: lines uftrace -a writes for the -pg build
// of the same source, long doubles and structs by value included. Where
// uftrace's spec reads the wrong register, rtrace's names the right one
// (fixes).
func TestAutoSpecsMatchUftrace(t *testing.T) {
	for _, c := range []struct {
		src   string
		min   int
		enums int
		fixes map[string]string
	}{
		{"autotypes.c", 12, 1, nil},
		// ld_two(float, long double, long double, double): the double
		// is in xmm1, long doubles take no xmm register; uftrace reads
		// fparg4 from xmm3.
		{"byvalue.c", 12, 0, map[string]string{
			"ld_two": "@fparg1/32,fparg2/80%stack+1,fparg3/80%stack+3,fparg4/64%XMM1",
		}},
	} {
		t.Run(c.src, func(t *testing.T) {
			want, got := uftraceSpecs(t, c.src)
			byName := map[string]uftrace.DebugFunc{}
			for _, d := range got {
				byName[d.Name] = d
			}
			checked := 0
			for _, w := range want {
				g, ok := byName[w.Name]
				if fix, fixed := c.fixes[w.Name]; fixed {
					w.ArgSpec = fix
				}
				switch {
				case !ok:
					t.Errorf("%s: no debug entry", w.Name)
				case g.ArgSpec != w.ArgSpec || g.RetSpec != w.RetSpec:
					t.Errorf("%s: A %q R %q, want A %q R %q", w.Name, g.ArgSpec, g.RetSpec, w.ArgSpec, w.RetSpec)
				default:
					checked++
				}
			}
			if checked < c.min {
				t.Errorf("only %d functions compared", checked)
			}
			var wantEnums, enums []string
			for _, d := range want {
				wantEnums = append(wantEnums, d.Enums...)
			}
			for _, d := range got {
				enums = append(enums, d.Enums...)
			}
			if len(wantEnums) != c.enums || strings.Join(enums, "\n") != strings.Join(wantEnums, "\n") {
				t.Errorf("enums %q, uftrace %q", enums, wantEnums)
			}
		})
	}
}

// AutoSpecs places what only the ABI decides, whatever DWARF version g++
// writes: a static member is no part of the value (and one of the
// struct's own type does not loop), bit-fields lie where their bits do, a
// class with bases is not placed, a struct of a long double goes on the
// stack 16-byte aligned and comes back in st(0), a class with a destructor
// is passed by reference, an empty class takes nothing.
func TestAutoSpecsABI(t *testing.T) {
	want := map[string][2]string{
		"v2":        {"@arg1/t8:Vec2%XMM0,arg2%RDI", "@retval/f32"},
		"bits":      {"@arg1/t16:Bits%XMM0+RDI,arg2%RSI", "@retval/f64"},
		"bits2":     {"@arg1/t16:Bits2%RDI+RSI,arg2%RDX", "@retval"},
		"derived":   {"", "@retval"},
		"ld7":       {"@arg1,arg2,arg3,arg4,arg5,arg6,arg7%stack+1,arg8/t16:LD%stack+3", "@retval"},
		"ldret":     {"@arg1%RDI", "@retval/t16:LD"},
		"dtor":      {"@arg1/t8:Dtor%RDI,arg2%RSI", "@retval"},
		"emptyret":  {"@arg1%RDI", "@retval/t0:Empty"},
		"defaulted": {"@arg1/t8:Defaulted%XMM0,arg2%RDI", "@retval"},
		"emptydtor": {"@arg1/t1:EmptyDtor%RDI,arg2%RSI", "@retval"},
		"bigret":    {"@arg1%RSI,arg2%RDX", ""},
	}
	for _, dwarfVersion := range []string{"-gdwarf-4", "-gdwarf-5"} {
		t.Run(dwarfVersion, func(t *testing.T) {
			prog := testutil.BuildC(t, "abi.cc", dwarfVersion, "-O0")
			f, err := elfx.Open(prog)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DebugFuncs(prog, f, true)
			if err != nil {
				t.Fatal(err)
			}
			seen := 0
			for _, d := range got {
				w, ok := want[cxxname.Short(d.Name)]
				if !ok {
					continue
				}
				seen++
				if d.ArgSpec != w[0] || d.RetSpec != w[1] {
					t.Errorf("%s: A %q R %q, want A %q R %q", d.Name, d.ArgSpec, d.RetSpec, w[0], w[1])
				}
			}
			if seen != len(want) {
				t.Errorf("%d of %d functions found", seen, len(want))
			}
		})
	}
}
