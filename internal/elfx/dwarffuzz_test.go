package elfx

import (
	"debug/dwarf"
	"testing"

	"rtrace/internal/testutil"
)

// FuzzSubprograms walks fuzzed DWARF (the sections of real fixtures, cut and
// changed) for functions, with and without their types, as resolve and
// record's argument specs do: bad DWARF gives an error, never a panic or a
// walk that does not end.
func FuzzSubprograms(f *testing.F) {
	for _, c := range []struct {
		src   string
		flags []string
	}{
		{"autotypes.c", []string{"-g", "-O0"}},
		{"abi.cc", []string{"-gdwarf-4", "-O0"}},
	} {
		seed := testutil.PackDWARF(f, testutil.BuildC(f, c.src, c.flags...))
		d, err := testutil.UnpackDWARF(seed)
		if err != nil {
			f.Fatalf("%s: %v", c.src, err)
		}
		// The seeds walk whole: DWARF rejected at once would leave the
		// fuzzer nothing to explore.
		if subs, err := DataSubprograms(d, true); err != nil || len(subs) < 5 {
			f.Fatalf("%s: %d functions, %v", c.src, len(subs), err)
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var d *dwarf.Data
		// debug/dwarf's panics on bad input are errors (Guard).
		if err := Guard(func() (err error) {
			d, err = testutil.UnpackDWARF(in)
			return err
		}); err != nil {
			return
		}
		DataSubprograms(d, true)
		DataSubprograms(d, false)
	})
}
