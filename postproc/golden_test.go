package postproc

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rtrace/internal/rtext"
	"rtrace/internal/trace"
)

// The golden files are sp-rtrace 1.6's own test data (see
// testdata/sp-rtrace-postproc/README.md): sample.txt.<in>.<opts> is what
// sp-rtrace-postproc -<opts> printed for sample.txt.<in>.
const goldenDir = "testdata/sp-rtrace-postproc"

// golden is one golden file: its input and options.
type golden struct {
	name, input, opts string
}

// goldens lists the golden files. A name with one dot group after
// sample.txt came from a binary trace that was not kept: sample.txt, the
// text of the same run, is its input.
func goldens(t *testing.T) []golden {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(goldenDir, "sample.txt.*"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no golden files in %s: %v", goldenDir, err)
	}
	var out []golden
	for _, p := range paths {
		name := filepath.Base(p)
		g := golden{name: name, input: "sample.txt"}
		rest := strings.TrimPrefix(name, "sample.txt.")
		if i := strings.LastIndexByte(rest, '.'); i >= 0 {
			if rest[:i] != "" {
				g.input += "." + rest[:i]
			}
			g.opts = rest[i+1:]
		} else {
			g.opts = rest
		}
		out = append(out, g)
	}
	return out
}

func readGolden(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goldenDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// process runs text through Run with opts and returns the text written.
func process(t testing.TB, input string, opts Options) string {
	t.Helper()
	var out bytes.Buffer
	if err := Run(rtext.NewReader(strings.NewReader(input)), rtext.NewWriter(&out), opts); err != nil {
		t.Fatalf("Run: %v", err)
	}
	return out.String()
}

func optionsOf(t *testing.T, letters string) Options {
	t.Helper()
	if letters == "" {
		return Options{}
	}
	o, err := ParseOptions([]string{"-" + letters})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestGolden: every golden file whose options do not resolve is
// reproduced byte for byte.
func TestGolden(t *testing.T) {
	for _, g := range goldens(t) {
		if strings.Contains(g.opts, "r") {
			continue // TestGoldenResolve
		}
		t.Run(g.name, func(t *testing.T) {
			got := process(t, readGolden(t, g.input), optionsOf(t, g.opts))
			if want := readGolden(t, g.name); got != want {
				t.Errorf("%s -%s: got\n%s\nwant\n%s", g.input, g.opts, got, want)
			}
		})
	}
}

// tableResolver resolves from a table: the frame texts of a resolved
// golden file, standing in for the binaries that are gone.
type tableResolver struct {
	text     map[uint64]string
	mappings int
}

func (r *tableResolver) AddMapping(trace.Mapping) { r.mappings++ }
func (r *tableResolver) Frame(addr uint64) string { return r.text[addr] }

func resolvedTable(t *testing.T) *tableResolver {
	rd := rtext.NewReader(strings.NewReader(readGolden(t, "sample.txt..r")))
	r := &tableResolver{text: map[uint64]string{}}
	for {
		it, err := rd.Next()
		if err != nil {
			break
		}
		if c, ok := it.(*trace.Call); ok {
			for _, f := range c.Frames {
				r.text[f.Addr] = f.Text
			}
		}
	}
	if len(r.text) == 0 {
		t.Fatal("no resolved frames in sample.txt..r")
	}
	return r
}

// TestGoldenResolve checks the -r golden files with a resolver that
// answers from sample.txt..r: this tests the header, the placement of the
// frame texts and the filters, not the resolving.
func TestGoldenResolve(t *testing.T) {
	for _, g := range goldens(t) {
		if !strings.Contains(g.opts, "r") {
			continue
		}
		t.Run(g.name, func(t *testing.T) {
			opts := optionsOf(t, g.opts)
			res := resolvedTable(t)
			opts.Resolver = res
			got := process(t, readGolden(t, g.input), opts)
			if want := readGolden(t, g.name); got != want {
				t.Errorf("%s -%s: got\n%s\nwant\n%s", g.input, g.opts, got, want)
			}
			if res.mappings != 11 {
				t.Errorf("resolver got %d mappings, want 11", res.mappings)
			}
		})
	}
}
