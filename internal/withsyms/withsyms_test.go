package withsyms

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"rtrace/internal/elfx"
	"rtrace/internal/uftrace"
)

const sample = `# symbols: 6
# path name: /tmp/prog
# build-id: 0123abcd
0000000000001040 P puts
0000000000001139 T main
0000000000001150 t helper
0000000000001150 T helper_alias
0000000000001160 w weakfn
0000000000001170 D table
0000000000001180 ? __sym_end
`

func TestFuncs(t *testing.T) {
	st, err := uftrace.ParseSyms(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	got := Funcs(st, 0x400000)
	want := []elfx.Func{
		{Name: "main", Value: 0x401139, Size: 0x17},
		{Name: "helper", Value: 0x401150, Size: 0x10, Local: true, Aliases: []string{"helper_alias"}},
		{Name: "weakfn", Value: 0x401160, Size: 0x10, Weak: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Funcs:\n%+v\nwant\n%+v", got, want)
	}
}

func TestApply(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prog.sym"), []byte(sample), 0o644); err != nil {
		t.Fatal(err)
	}
	f := &elfx.File{Path: "/elsewhere/prog", BuildID: "0123abcd", Stripped: true}
	got, err := Apply(dir, f)
	if err != nil || got.Stripped || len(got.Funcs) != 3 || f.Funcs != nil {
		t.Errorf("Apply: %+v, %v (f now %+v)", got, err, f)
	}
	if got, err := Apply(dir, &elfx.File{Path: "/x/other"}); err != nil || got.Funcs != nil {
		t.Errorf("no .sym for it: %+v, %v", got, err)
	}
	other := &elfx.File{Path: "/x/prog", BuildID: "ffff", Stripped: true}
	if got, err := Apply(dir, other); err == nil || got != other {
		t.Errorf("another build: %+v, %v", got, err)
	}
	os.WriteFile(filepath.Join(dir, "bad.sym"), []byte("zz T main\n"), 0o644)
	if _, err := Apply(dir, &elfx.File{Path: "/x/bad"}); err == nil || !strings.Contains(err.Error(), "bad.sym") {
		t.Errorf("a bad .sym: %v", err)
	}
}

// FuzzFuncs: any .sym text ParseSyms accepts gives functions within it.
func FuzzFuncs(f *testing.F) {
	f.Add(sample)
	f.Add("0000000000000010 T a\n0000000000000010 W b\n")
	f.Add("ffffffffffffffff T last\n")
	f.Fuzz(func(t *testing.T, text string) {
		st, err := uftrace.ParseSyms(strings.NewReader(text))
		if err != nil {
			return
		}
		type sym struct {
			name string
			addr uint64
		}
		funcs := map[sym]bool{}
		for _, s := range st.Syms {
			if strings.ContainsRune("TtWw", rune(s.Type)) {
				funcs[sym{s.Name, s.Addr}] = true
			}
		}
		for _, fn := range Funcs(st, 0x1000) {
			for _, name := range append([]string{fn.Name}, fn.Aliases...) {
				if !funcs[sym{name, fn.Value - 0x1000}] {
					t.Errorf("%q at %#x: not a function of the file", name, fn.Value)
				}
			}
			if fn.Value-0x1000+fn.Size < fn.Value-0x1000 {
				t.Errorf("%q: size %#x past the end of the address space", fn.Name, fn.Size)
			}
		}
	})
}
