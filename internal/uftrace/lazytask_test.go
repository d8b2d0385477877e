package uftrace_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"rtrace/internal/uftrace"
)

// A task's data file and its place in info come with its first flush (a
// traced fork waits for none of it); info never names a task whose file
// is missing, so the directory stays readable if the writer is killed;
// Close makes the files of tasks that recorded nothing.
func TestTaskFilesAtFirstFlush(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	w, err := uftrace.Create(dir, uftrace.Info{ExeName: "/bin/p"})
	must(t, err)
	maps := "555555554000-555555556000 r-xp 00000000 08:01 1 /bin/p\n7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0 [stack]\n"
	must(t, w.Session(uftrace.TaskEvent{Time: 1000, Pid: 10, SID: "0123456789abcdef", Exename: "/bin/p"}, []byte(maps)))
	must(t, w.Task(1001, 10, 10))
	must(t, w.Fork(1002, 11, 10))
	must(t, w.Fork(1003, 12, 10)) // records nothing
	state := func() (files, tids []int) {
		t.Helper()
		for _, tid := range []int{10, 11, 12} {
			if _, err := os.Stat(filepath.Join(dir, strconv.Itoa(tid)+".dat")); err == nil {
				files = append(files, tid)
			}
		}
		b, err := os.ReadFile(filepath.Join(dir, "info"))
		must(t, err)
		in, err := uftrace.ParseInfo(b)
		must(t, err)
		return files, in.TaskIDs
	}
	if files, tids := state(); len(files) > 0 || len(tids) > 0 {
		t.Fatalf("before any record: files of %v, info names %v; want none", files, tids)
	}
	must(t, w.Append(11, uftrace.Record{Time: 2000, Type: uftrace.Exit, Depth: 1, Addr: 0x555555555000}, nil))
	must(t, w.Flush())
	if files, tids := state(); !slices.Equal(files, []int{11}) || !slices.Equal(tids, []int{11}) {
		t.Fatalf("after 11's flush: files of %v, info names %v; want 11 alone", files, tids)
	}
	must(t, w.Close())
	if files, tids := state(); !slices.Equal(files, []int{10, 11, 12}) || !slices.Equal(tids, []int{10, 11, 12}) {
		t.Fatalf("after Close: files of %v, info names %v; want 10, 11, 12 (in the order they started)", files, tids)
	}
}
