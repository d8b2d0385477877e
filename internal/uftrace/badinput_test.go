package uftrace_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"rtrace/internal/uftrace"
)

// readAll opens dir and reads every record, returning the first error.
func readAll(dir string) error {
	r, err := uftrace.Open(dir)
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		if _, err := r.Next(); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

func TestReaderBadInput(t *testing.T) {
	good := filepath.Join(t.TempDir(), "good")
	writeSynthetic(t, good)
	if err := readAll(good); err != nil {
		t.Fatalf("good directory: %v", err)
	}
	cases := []struct {
		name   string
		break_ func(t *testing.T, dir string)
		want   []string // substrings of the error
	}{
		{"truncated record", func(t *testing.T, dir string) {
			truncateBy(t, filepath.Join(dir, "101.dat"), 5)
		}, []string{"101.dat at offset", "partial record: 11 of 16 bytes"}},
		{"truncated payload", func(t *testing.T, dir string) {
			// The last record of task 100 is main's exit; cut into args_misc instead.
			cutAtArgs(t, filepath.Join(dir, "100.dat"))
		}, []string{"100.dat at offset", "args_misc", "truncated"}},
		{"bad record magic", func(t *testing.T, dir string) {
			patch(t, filepath.Join(dir, "101.dat"), 16+8, 0x00)
		}, []string{"101.dat at offset 16", "bad record magic 0"}},
		{"bad info magic", func(t *testing.T, dir string) {
			patch(t, filepath.Join(dir, "info"), 0, 'X')
		}, []string{"info", "bad magic"}},
		{"info line of wrong shape", func(t *testing.T, dir string) {
			replaceIn(t, filepath.Join(dir, "info"), "taskinfo:nr_tid=4", "taskinfo:nr_tid=x")
		}, []string{"info", "taskinfo:nr_tid="}},
		{"info tid count mismatch", func(t *testing.T, dir string) {
			replaceIn(t, filepath.Join(dir, "info"), "taskinfo:nr_tid=4", "taskinfo:nr_tid=5")
		}, []string{"info", "nr_tid=5 but 4 tids"}},
		{"missing map", func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, "sid-fedcba9876543210.map")))
		}, []string{"sid-fedcba9876543210.map", "no such file"}},
		{"missing task file", func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, "task.txt")))
		}, []string{"task.txt", "no such file"}},
		{"missing data file", func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, "102.dat")))
		}, []string{"102.dat", "no such file"}},
		{"bad task line", func(t *testing.T, dir string) {
			path := filepath.Join(dir, "task.txt")
			data, err := os.ReadFile(path)
			must(t, err)
			bad := regexp.MustCompile(`TASK timestamp=(\d+)\.(\d+) tid=101`).ReplaceAll(data, []byte("TASK timestamp=${1}x${2} tid=101"))
			if bytes.Equal(bad, data) {
				t.Fatal("no TASK line for tid 101")
			}
			must(t, os.WriteFile(path, bad, 0o644))
		}, []string{"task.txt", "line 4", "bad timestamp"}},
		{"bad map line", func(t *testing.T, dir string) {
			replaceIn(t, filepath.Join(dir, "sid-0123456789abcdef.map"), "7ffff7800000-", "zz-")
		}, []string{"sid-0123456789abcdef.map", "line 3"}},
		{"bad sym line", func(t *testing.T, dir string) {
			replaceIn(t, filepath.Join(dir, "synth.sym"), "0000000000001000 T main", "00000000000010zz T main")
		}, []string{"synth.sym", "bad address"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			copyDir(t, good, dir)
			c.break_(t, dir)
			err := readAll(dir)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(w)) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			var fe *uftrace.FileError
			if !errors.As(err, &fe) {
				t.Errorf("error %T is not a *FileError naming the file", err)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	must(t, os.MkdirAll(dst, 0o755))
	ents, err := os.ReadDir(src)
	must(t, err)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		must(t, err)
		must(t, os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644))
	}
}

func truncateBy(t *testing.T, path string, n int64) {
	t.Helper()
	st, err := os.Stat(path)
	must(t, err)
	must(t, os.Truncate(path, st.Size()-n))
}

func patch(t *testing.T, path string, off int, b byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	must(t, err)
	data[off] = b
	must(t, os.WriteFile(path, data, 0o644))
}

func replaceIn(t *testing.T, path, old, new string) {
	t.Helper()
	data, err := os.ReadFile(path)
	must(t, err)
	if !strings.Contains(string(data), old) {
		t.Fatalf("%s lacks %q", path, old)
	}
	must(t, os.WriteFile(path, []byte(strings.Replace(string(data), old, new, 1)), 0o644))
}

// cutAtArgs truncates a data file in the middle of the args_misc payload.
func cutAtArgs(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	must(t, err)
	i := strings.Index(string(data), "hello")
	if i < 0 {
		t.Fatal("no args_misc payload found")
	}
	must(t, os.WriteFile(path, data[:i+3], 0o644))
}
