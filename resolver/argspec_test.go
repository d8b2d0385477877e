package resolver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
