package uftrace_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rtrace/internal/uftrace"
)

// Two libraries with one basename: the second gets <name>-<4 hex of the
// build id on its map line>.sym, or without one <name>-<sum of its path>
// (rtrace's maps), and uftrace resolves functions in both.
func TestSameBasenameModules(t *testing.T) {
	for _, ids := range []bool{true, false} {
		t.Run(fmt.Sprintf("build-ids=%v", ids), func(t *testing.T) { sameBasename(t, ids) })
	}
}

func sameBasename(t *testing.T, ids bool) {
	dir := filepath.Join(t.TempDir(), "d")
	w, err := uftrace.Create(dir, uftrace.Info{ExeName: "/opt/p/prog"})
	must(t, err)
	maps := "555555554000-555555556000 r-xp 00000000 08:01 1 /opt/p/prog\n" +
		"7f0000000000-7f0000001000 r-xp 00000000 08:01 2 /opt/a/libx.so build-id:aaaa1111\n" +
		"7f1000000000-7f1000001000 r-xp 00000000 08:01 3 /opt/b/libx.so build-id:bbbb2222\n" +
		"7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0 [stack]\n"
	second := "libx.so-bbbb.sym"
	if !ids {
		maps = strings.NewReplacer(" build-id:aaaa1111", "", " build-id:bbbb2222", "").Replace(maps)
		second = "libx.so-" + uftrace.AltSymSuffix("/opt/b/libx.so", "") + ".sym"
	}
	must(t, w.Session(uftrace.TaskEvent{Time: 1000, Pid: 10, SID: "0123456789abcdef", Exename: "/opt/p/prog"}, []byte(maps)))
	must(t, w.Task(1001, 10, 10))
	for _, m := range []struct{ path, id, fn string }{
		{"/opt/p/prog", "", "main"}, {"/opt/a/libx.so", "aaaa1111", "in_a"}, {"/opt/b/libx.so", "bbbb2222", "in_b"},
	} {
		off := uint64(0x100)
		if m.fn == "main" {
			off = 0x1000
		}
		mapID := m.id
		if !ids {
			mapID = ""
		}
		must(t, w.Symbols(w.SymName(m.path, mapID), m.path, m.id, []uftrace.Symbol{{Addr: off, Type: 'T', Name: m.fn}}, off+0x100))
	}
	for i, a := range []uint64{0x555555555000, 0x7f0000000100, 0x7f1000000100} {
		must(t, w.Append(10, uftrace.Record{Time: uint64(2000 + i*10), Type: uftrace.Entry, Addr: a}, nil))
		must(t, w.Append(10, uftrace.Record{Time: uint64(2005 + i*10), Type: uftrace.Exit, Addr: a}, nil))
	}
	must(t, w.Close())
	if _, err := os.Stat(filepath.Join(dir, second)); err != nil {
		t.Fatalf("second libx.so not named %s: %v", second, err)
	}
	// rtrace's own reader resolves both too.
	r, err := uftrace.Open(dir)
	must(t, err)
	var names []string
	for it, err := r.Next(); err == nil; it, err = r.Next() {
		if it.Type == uftrace.Entry {
			names = append(names, it.Func)
		}
	}
	if got := strings.Join(names, ","); got != "main,in_a,in_b" {
		t.Errorf("reader resolved %s", got)
	}
	if got := uftraceCmd(t, dir, "replay", "-f", "none", "--no-pager"); got != "main();\nin_a();\nin_b();\n" {
		t.Errorf("uftrace replay:\n%s", got)
	}
}
