package uftrace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The build id of a .dbg file is found after header lines of any length.
func TestDebugBuildID(t *testing.T) {
	long := "# path name: /" + strings.Repeat("d/", 400) + "prog\n"
	for _, c := range []struct{ text, want string }{
		{"# path name: /bin/x\n# build-id: 0123abcd\nF: 1000 main\n", "0123abcd"},
		{long + "# build-id: 89ef\n", "89ef"},
		{"F: 1000 main\n# build-id: 1234\n", ""},
		{"# path name: /bin/x\n", ""},
		{"", ""},
	} {
		p := filepath.Join(t.TempDir(), "x.dbg")
		if err := os.WriteFile(p, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := debugBuildID(f); got != c.want {
			t.Errorf("%.40q...: build id %q, want %q", c.text, got, c.want)
		}
		f.Close()
	}
}
