package resolver

import (
	"debug/dwarf"

	"testing"

	"rtrace/internal/elfx"
	"rtrace/internal/testutil"
	"rtrace/internal/uftrace"
)

// FuzzAutoSpecs derives argument specs from fuzzed DWARF (the sections of
// fixtures with structs, enums, long doubles and classes, cut and changed):
// whatever types the DWARF describes, cyclic or nonsensical, AutoSpecs
// returns specs that parse and never panics or loops.
func FuzzAutoSpecs(f *testing.F) {
	for _, c := range []struct {
		src   string
		flags []string
	}{
		{"autotypes.c", []string{"-g", "-O0"}},
		{"byvalue.c", []string{"-g", "-O0"}},
		{"abi.cc", []string{"-gdwarf-4", "-O0"}},
	} {
		seed := testutil.PackDWARF(f, testutil.BuildC(f, c.src, c.flags...))
		d, err := testutil.UnpackDWARF(seed)
		if err != nil {
			f.Fatalf("%s: %v", c.src, err)
		}
		subs, err := elfx.DataSubprograms(d, true)
		specs := 0
		for i := range subs {
			if a, r, _ := AutoSpecs(&subs[i]); a != "" || r != "" {
				specs++
			}
		}
		if err != nil || specs < 5 {
			f.Fatalf("%s: %d functions with specs, %v", c.src, specs, err)
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var d *dwarf.Data
		if err := elfx.Guard(func() (err error) {
			d, err = testutil.UnpackDWARF(in)
			return err
		}); err != nil {
			return
		}
		subs, err := elfx.DataSubprograms(d, true)
		if err != nil {
			return
		}
		for i := range subs {
			var args, ret string
			// debug/dwarf resolves types lazily: its panics on bad
			// input are errors (Guard), rtrace's own are bugs.
			elfx.Guard(func() error {
				args, ret, _ = AutoSpecs(&subs[i])
				return nil
			})
			for _, s := range []string{args, ret} {
				if s == "" {
					continue
				}
				if _, err := uftrace.ParseFuncSpec("f" + s); err != nil {
					t.Fatalf("AutoSpecs gave %q, which does not parse: %v", s, err)
				}
			}
		}
	})
}
