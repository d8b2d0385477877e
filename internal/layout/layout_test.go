package layout

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"rtrace/internal/testutil"
)

// stages are the pipeline's stage packages (and the launcher that chains
// them), by import path; a package below one belongs to it.
var stages = []string{"rtrace/tracer", "rtrace/preproc", "rtrace/postproc", "rtrace/resolver", "rtrace/launcher"}

// stageOf is the stage pkg belongs to, "" for none.
func stageOf(pkg string) string {
	for _, s := range stages {
		if pkg == s || strings.HasPrefix(pkg, s+"/") {
			return s
		}
	}
	return ""
}

type listed struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
	Deps       []string
}

// packages lists the module's packages as `go list -json` does.
func packages(t *testing.T) []listed {
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = testutil.Root()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var list []listed
	dec := json.NewDecoder(out)
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		list = append(list, p)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("go list: %v", err)
	}
	if len(list) < 10 {
		t.Fatalf("go list found %d packages", len(list))
	}
	return list
}

func TestPackageGraph(t *testing.T) {
	for _, p := range packages(t) {
		own := stageOf(p.ImportPath)
		switch {
		case strings.HasPrefix(p.ImportPath, "rtrace/internal/"):
			// Not even through another package: internal code is shared
			// by the stages and must not pull one in.
			for _, d := range p.Deps {
				if s := stageOf(d); s != "" {
					t.Errorf("%s depends on the stage %s (through %s)", p.ImportPath, s, d)
				}
			}
		case own != "" && own != "rtrace/launcher":
			for _, d := range p.Imports {
				if s := stageOf(d); s != "" && s != own {
					t.Errorf("stage %s imports the stage %s", p.ImportPath, d)
				}
				// The tracer's rooms below it (fast: what is put into the
				// process; fast/drain: the drain of its rings; unwind: the
				// unwinder and the table compiler; bp: the stub plans;
				// ptrace) are leaves: the event loop calls them, never one
				// the other, so each is tested alone. A room within a room
				// may use the one it is in (the drain reads fast's rings).
				room := own == "rtrace/tracer" && p.ImportPath != own
				if room && (d == own || strings.HasPrefix(d, own+"/") && !strings.HasPrefix(d, p.ImportPath+"/") && !strings.HasPrefix(p.ImportPath, d+"/")) {
					t.Errorf("the tracer's room %s imports %s: rooms are leaves the event loop calls", p.ImportPath, d)
				}
			}
		case p.ImportPath == "rtrace/cmd/rtrace":
			checkCmd(t, p)
		}
	}
}

// cmdUses is what cmd/rtrace may name of each stage: the launcher's
// entry points (and its reading of uftrace's command line) and the
// post-processor's option table, which the CLI builds its flags from.
var cmdUses = map[string]map[string]bool{
	"rtrace/launcher":      nil, // the session and stage runner: all of it
	"rtrace/launcher/ucli": nil, // its reading of uftrace's command line
	"rtrace/postproc":      {"Flags": true, "Options": true, "CategoryFunc": true, "CategoryResource": true},
}

func checkCmd(t *testing.T, p listed) {
	for _, imp := range p.Imports {
		if s := stageOf(imp); s != "" {
			if _, ok := cmdUses[imp]; !ok {
				t.Errorf("cmd/rtrace imports %s; it runs the stages through the launcher", imp)
			}
		}
	}
	fset := token.NewFileSet()
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		local := map[string]string{} // import name -> path
		for _, im := range f.Imports {
			path := strings.Trim(im.Path.Value, `"`)
			n := filepath.Base(path)
			if im.Name != nil {
				n = im.Name.Name
			}
			local[n] = path
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			id, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			allowed, ok := cmdUses[local[id.Name]]
			if ok && allowed != nil && !allowed[sel.Sel.Name] {
				t.Errorf("%s: cmd/rtrace uses %s.%s; only %v", fset.Position(sel.Pos()), id.Name, sel.Sel.Name, allowed)
			}
			return true
		})
	}
}

// maxLines is the most lines a non-test .go file under tracer/ may have:
// a file past it holds more than one concern, and a newcomer no longer
// finds the fast engine's parts by name (TRACER-ROOMS.md: one room per
// concern, prefixed files in package tracer).
const maxLines = 800

func TestFileSizes(t *testing.T) {
	root := testutil.Root()
	n := 0
	err := filepath.WalkDir(filepath.Join(root, "tracer"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n++
		lines := bytes.Count(b, []byte("\n"))
		if len(b) > 0 && b[len(b)-1] != '\n' {
			lines++
		}
		if lines > maxLines {
			rel, _ := filepath.Rel(root, path)
			t.Errorf("%s has %d lines, more than %d: split it into rooms named after their concerns", rel, lines, maxLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no .go file under tracer/")
	}
}
