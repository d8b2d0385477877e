package launcher

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// A state file is believed while the rtrace that wrote it runs, and is
// removed as stale once its owner is gone or its pid names another
// process (another start time).
func TestStateFileOwner(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	dir := FIFODir()
	if err := privateDir(dir); err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(dir, "1.ctl")
	if err := writeState(mine, "10"); err != nil {
		t.Fatal(err)
	}
	if f, ok := readState(mine); !ok || !slices.Equal(f, []string{"10"}) {
		t.Fatalf("readState of this process's file = %q, %v", f, ok)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	parent, err := startTime(os.Getppid())
	if err != nil {
		t.Fatal(err)
	}
	stale := map[string]string{
		"2.on":     strconv.Itoa(gone.Process.Pid) + " 1\n",                                            // its owner exited
		"3.ctl":    "10 " + strconv.Itoa(os.Getppid()) + " " + strconv.FormatUint(parent+1, 10) + "\n", // the pid is another process's now
		"4.target": "77\n",                                                                             // no stamp (an older rtrace's)
		"5.on":     "",
	}
	for name, text := range stale {
		os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600)
	}
	live := filepath.Join(dir, "6.on")
	os.WriteFile(live, []byte(strconv.Itoa(os.Getppid())+" "+strconv.FormatUint(parent, 10)+"\n"), 0o600)
	if _, ok := readState(filepath.Join(dir, "2.on")); ok {
		t.Error("a file whose owner exited was believed")
	}
	sweepStale(dir)
	for name := range stale {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Errorf("stale %s (%q) was kept: %v", name, stale[name], err)
		}
	}
	for _, f := range []string{mine, live} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("the live owner's %s was removed: %v", filepath.Base(f), err)
		}
	}
}

func TestStatStart(t *testing.T) {
	line := "4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100 18446744073709551615\n"
	if got, err := statStart([]byte(line)); err != nil || got != 987654 {
		t.Errorf("statStart = %d, %v; want 987654", got, err)
	}
	for _, bad := range []string{"", "12 (x S 1", "12 (x) S 1 2 3"} {
		if _, err := statStart([]byte(bad)); err == nil {
			t.Errorf("statStart(%q) took it", bad)
		}
	}
}

func FuzzStatStart(f *testing.F) {
	f.Add([]byte("4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100\n"))
	f.Add([]byte("1 (init) S 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 7 1 1\n"))
	f.Add([]byte(")"))
	f.Fuzz(func(t *testing.T, b []byte) {
		statStart(b) // never panics
	})
}
