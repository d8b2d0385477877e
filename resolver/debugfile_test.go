package resolver

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"rtrace/internal/elfx"
	"rtrace/internal/testutil"
)

// TestDebugFiles strips the fixture and keeps its symbols and DWARF in a
// separate debug file, found by build id or by .gnu_debuglink in each place
// gdb looks.
func TestDebugFiles(t *testing.T) {
	run := runFixture(t, fixtureBuilds[1]) // -O2 PIE: inlined frames too
	want := wantFrames(t)
	objcopy := testutil.RequireTool(t, "objcopy")
	oc := func(args ...string) {
		t.Helper()
		if b, err := exec.Command(objcopy, args...).CombinedOutput(); err != nil {
			t.Fatalf("objcopy %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
	f, err := elfx.Open(run.exe)
	if err != nil || len(f.BuildID) != 40 {
		t.Fatalf("fixture build id %q, %v", f.BuildID, err)
	}
	for _, c := range []struct {
		name string
		// place returns where the debug file goes, given the directory
		// of the stripped program and the debug directory.
		place func(dir, dbg string) string
		link  bool
	}{
		{"build-id", func(dir, dbg string) string {
			return filepath.Join(dbg, ".build-id", f.BuildID[:2], f.BuildID[2:]+".debug")
		}, false},
		{"debuglink", func(dir, dbg string) string { return filepath.Join(dir, "exe.debug") }, true},
		{"debuglink .debug", func(dir, dbg string) string { return filepath.Join(dir, ".debug", "exe.debug") }, true},
		{"debuglink debug dir", func(dir, dbg string) string { return filepath.Join(dbg, dir, "exe.debug") }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			tmp := t.TempDir()
			dir, dbg := filepath.Join(tmp, "bin"), filepath.Join(tmp, "debug")
			exe, debug := filepath.Join(dir, "exe"), c.place(dir, dbg)
			os.MkdirAll(dir, 0o755)
			os.MkdirAll(filepath.Dir(debug), 0o755)
			// objcopy names the link after the file it reads and takes its CRC.
			oc("--only-keep-debug", run.exe, filepath.Join(tmp, "exe.debug"))
			args := []string{"--strip-all"}
			if c.link {
				args = append(args, "--add-gnu-debuglink="+filepath.Join(tmp, "exe.debug"))
			}
			oc(append(args, run.exe, exe)...)
			if err := os.Rename(filepath.Join(tmp, "exe.debug"), debug); err != nil {
				t.Fatal(err)
			}
			var warn strings.Builder
			r := run.resolver(Options{Warn: &warn, DebugDirs: []string{dbg}}, map[string]string{run.exe: exe})
			for _, tag := range []string{"mid", "inlined", "top", "main"} {
				if got := r.Frame(run.rets[tag]); got != want[tag] {
					t.Errorf("%s: Frame = %q, want %q", tag, got, want[tag])
				}
			}
			if warn.Len() > 0 {
				t.Errorf("warnings: %s", warn.String())
			}
		})
	}

	// Garbage where the build id says the debug file is: one warning, and
	// the stripped program's frames show the module only.
	t.Run("build-id garbage", func(t *testing.T) {
		tmp := t.TempDir()
		exe, dbg := filepath.Join(tmp, "exe"), filepath.Join(tmp, "debug")
		oc("--strip-all", run.exe, exe)
		bad := filepath.Join(dbg, ".build-id", f.BuildID[:2], f.BuildID[2:]+".debug")
		os.MkdirAll(filepath.Dir(bad), 0o755)
		os.WriteFile(bad, []byte("\x7fELF\x02\x01\x01garbage"), 0o644)
		var warn strings.Builder
		r := run.resolver(Options{Warn: &warn, DebugDirs: []string{dbg}}, map[string]string{run.exe: exe})
		for _, tag := range []string{"mid", "main"} {
			if got := r.Frame(run.rets[tag]); got != "from "+exe {
				t.Errorf("%s: Frame = %q, want the module only", tag, got)
			}
		}
		if n := strings.Count(warn.String(), "\n"); n != 1 || !strings.Contains(warn.String(), bad) {
			t.Errorf("want one warning naming %s, got:\n%s", bad, warn.String())
		}
	})

	// A debug link whose file has another CRC (and no build id to tell)
	// is not followed.
	t.Run("debuglink mismatch", func(t *testing.T) {
		dir := t.TempDir()
		exe := filepath.Join(dir, "exe")
		oc("--only-keep-debug", "--remove-section=.note.gnu.build-id", run.exe, filepath.Join(dir, "exe.debug"))
		oc("--strip-all", "--remove-section=.note.gnu.build-id", "--add-gnu-debuglink="+filepath.Join(dir, "exe.debug"), run.exe, exe)
		r := run.resolver(Options{DebugDirs: []string{}}, map[string]string{run.exe: exe})
		if got := r.Frame(run.rets["mid"]); got != want["mid"] {
			t.Fatalf("matching link: Frame = %q, want %q", got, want["mid"])
		}
		b, _ := os.ReadFile(filepath.Join(dir, "exe.debug"))
		os.WriteFile(filepath.Join(dir, "exe.debug"), append(b, 0), 0o644)
		r = run.resolver(Options{DebugDirs: []string{}}, map[string]string{run.exe: exe})
		if got := r.Frame(run.rets["mid"]); got != "from "+exe {
			t.Errorf("CRC mismatch: Frame = %q, want the module only", got)
		}
	})
}
