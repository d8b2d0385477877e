package resolver

import (
	"os"
	"path/filepath"
	"testing"

	"rtrace/internal/elfx"
	"rtrace/internal/testutil"
	"rtrace/internal/uftrace"
)

// AutoSpecs writes the A:/R:/E: lines uftrace -a writes for the -pg build
// of the same source, for every function whose parameters rtrace can place.
// fd (a long double) and fst (a struct by value) are cut short by design.
func TestAutoSpecsMatchUftrace(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	plain := testutil.BuildC(t, "autotypes.c", "-g", "-O0")
	pg := testutil.BuildC(t, "autotypes.c", "-g", "-O0", "-pg")
	tmp := t.TempDir()
	testutil.Run(t, tmp, uft, "record", "--no-libcall", "-a", "-d", "U", pg)
	b, err := os.Open(filepath.Join(tmp, "U", filepath.Base(pg)+".dbg"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := uftrace.ParseDebug(b)
	b.Close()
	if err != nil {
		t.Fatal(err)
	}
	f, err := elfx.Open(plain)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DebugFuncs(plain, f, true)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]uftrace.DebugFunc{}
	for _, d := range got {
		byName[d.Name] = d
	}
	checked := 0
	for _, w := range want {
		g, ok := byName[w.Name]
		switch {
		case !ok:
			t.Errorf("%s: no debug entry", w.Name)
		case w.Name == "fd":
			if g.ArgSpec != "@fparg1/32,fparg2/64" || g.RetSpec != w.RetSpec {
				t.Errorf("fd: %q %q", g.ArgSpec, g.RetSpec)
			}
		case w.Name == "mk":
			// uftrace: "@arg1%RSI,arg2%RDX" and "@retval/t32:big"; rtrace
			// does not record structs by value.
			if g.ArgSpec != w.ArgSpec || g.RetSpec != "" {
				t.Errorf("mk: %q %q, uftrace %q", g.ArgSpec, g.RetSpec, w.ArgSpec)
			}
		case w.Name == "fst":
			if g.ArgSpec != "" || g.RetSpec != "" {
				t.Errorf("fst: %q %q, want no specs", g.ArgSpec, g.RetSpec)
			}
		case g.ArgSpec != w.ArgSpec || g.RetSpec != w.RetSpec:
			t.Errorf("%s: A %q R %q, uftrace A %q R %q", w.Name, g.ArgSpec, g.RetSpec, w.ArgSpec, w.RetSpec)
		default:
			checked++
		}
	}
	if checked < 9 {
		t.Errorf("only %d functions compared", checked)
	}
	if len(want) == 0 || len(want[0].Enums) != 1 || len(got) == 0 {
		t.Fatalf("uftrace enums %v", want)
	}
	var enums []string
	for _, d := range got {
		enums = append(enums, d.Enums...)
	}
	if len(enums) != 1 || enums[0] != want[0].Enums[0] {
		t.Errorf("enums %q, uftrace %q", enums, want[0].Enums)
	}
}
