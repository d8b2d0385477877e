package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"rtrace/internal/testutil"
)

// kindLine is one of memcheck's LEAK SUMMARY lines, and rtrace's "## "
// line of the same words.
var kindLine = regexp.MustCompile(`(definitely lost|indirectly lost|possibly lost|still reachable): ([\d,]+) bytes in ([\d,]+) blocks`)

// leakKinds reads the four kinds' lines of a report: kind ->
// "bytes/blocks". With prefix, only lines that start with it count.
func leakKinds(report, prefix string) map[string]string {
	out := map[string]string{}
	for _, l := range strings.Split(report, "\n") {
		if m := kindLine.FindStringSubmatchIndex(l); m != nil && (prefix == "" || m[0] == len(prefix) && strings.HasPrefix(l, prefix)) {
			out[l[m[2]:m[3]]] = strings.ReplaceAll(l[m[4]:m[5]], ",", "") + "/" + strings.ReplaceAll(l[m[6]:m[7]], ",", "")
		}
	}
	return out
}

// TestLeakKinds: the leak report of a raw trace splits the blocks not
// freed at exit into memcheck's kinds, from rtrace's scan of the program's
// memory at its end, and its counts and bytes equal memcheck's on each
// leak fixture, with every engine: testdata/leakkinds.c (a leaked list:
// 1 definitely lost, 3 indirectly; a cycle; an interior pointer: possibly
// lost; globals: still reachable), heapsum.c (50 lost), glibcleaks.c
// (glibc's own left out as memcheck's __libc_freeres frees them, the
// program's 2 definitely lost), leaky.c (17 still reachable from a
// global array; leakymain.c the same from a library), prodcons.cc
// (threads: none left) and Debian's sqlite3 shell (none left). Each leak says its
// kind ($leak = ...), through rtrace resolve too, and --leak-kinds
// shows only the kinds it names, as memcheck's --show-leak-kinds.
func TestLeakKinds(t *testing.T) {
	valgrind := testutil.RequireTool(t, "valgrind")
	type fixture struct {
		src   string
		flags []string
	}
	// sqlite3 (Debian's): a shell that frees all it allocates, but for
	// what glibc keeps (NSS, stdio), which the built-in suppressions leave
	// out as memcheck's __libc_freeres frees it.
	sql := filepath.Join(t.TempDir(), "work.sql")
	var b strings.Builder
	b.WriteString("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v INTEGER);\nBEGIN;\n")
	for i := range 300 {
		fmt.Fprintf(&b, "INSERT INTO t(name, v) VALUES('n%05d', %d);\n", i*7919%100000, i%997)
	}
	b.WriteString("COMMIT;\nCREATE INDEX tv ON t(v);\nSELECT count(*), sum(v) FROM t WHERE v > 500;\nSELECT name FROM t ORDER BY v DESC LIMIT 3;\n")
	if err := os.WriteFile(sql, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []fixture{
		{"leakkinds.c", nil}, {"heapsum.c", nil}, {"glibcleaks.c", nil}, {"leaky.c", nil}, {"prodcons.cc", []string{"-pthread"}},
		{"leakymain.c", nil}, {"sqlite3", nil},
	} {
		var prog string
		var args []string
		switch f.src {
		case "sqlite3":
			prog, args = testutil.RequireTool(t, "sqlite3"), []string{":memory:", ".read " + sql}
		case "leakymain.c":
			// leaky's array in a library's bss, past its file's last page:
			// an anonymous mapping, which may be one with rtrace's own.
			lib := testutil.BuildC(t, "leaky.c", "-DLEAKY_LIB", "-shared", "-fPIC", "-O2", "-g")
			prog = testutil.BuildC(t, "leakymain.c", "-O2", lib)
		default:
			prog = testutil.BuildC(t, f.src, append([]string{"-O2", "-g"}, f.flags...)...)
		}
		mc := runCmd(t, t.TempDir(), valgrind, append([]string{"--leak-check=full", "--show-leak-kinds=all", prog}, args...)...)
		want := leakKinds(mc.stderr, "")
		if strings.Contains(mc.stderr, "All heap blocks were freed") {
			want = map[string]string{"definitely lost": "0/0", "indirectly lost": "0/0", "possibly lost": "0/0", "still reachable": "0/0"}
		}
		if len(want) != 4 {
			t.Fatalf("%s: memcheck's leak summary not found:\n%s", f.src, mc.stderr)
		}
		for _, m := range resModes {
			t.Run(f.src+"/"+m.name, func(t *testing.T) {
				_, raw := recordOneRaw(t, m, []string{"--module", "memory"}, prog, args...)
				rep := runCmd(t, t.TempDir(), rtraceBin, "postproc", "-l", "-i", raw)
				if rep.code != 0 {
					t.Fatalf("postproc: exit %d\n%s", rep.code, rep.stderr)
				}
				got := leakKinds(rep.stdout, "## ")
				for k, w := range want {
					if got[k] != w {
						t.Errorf("%s: rtrace %q, memcheck %q (bytes/blocks)", k, got[k], w)
					}
				}
				// Each leak listed says its kind, and the counts add up.
				n := map[string]int{}
				for _, l := range strings.Split(rep.stdout, "\n") {
					if k, ok := strings.CutPrefix(l, "\t$leak = "); ok {
						n[k]++
					}
				}
				for k, w := range want {
					if blocks := w[strings.Index(w, "/")+1:]; strconv.Itoa(n[k]) != blocks {
						t.Errorf("%s: %d leaks listed with the kind, want %s", k, n[k], blocks)
					}
				}
				if t.Failed() {
					t.Log(clipLines(rep.stdout, 60))
				}
			})
		}
	}
}

// TestLeakKindsReport: the kinds of testdata/leakkinds.c's leaks by the
// line that allocated them, through the README's chain (postproc -l -c
// -r | resolve): the list's head definitely lost, its nodes indirectly,
// the block behind an interior pointer possibly lost; --leak-kinds picks
// kinds; a bad set is refused naming it.
func TestLeakKindsReport(t *testing.T) {
	prog := testutil.BuildC(t, "leakkinds.c", "-O2", "-g")
	lines := markerLines(t, "leakkinds.c")
	dir, raw := recordOneRaw(t, resModes[1], []string{"--module", "memory"}, prog)
	rep := runCmd(t, dir, "sh", "-c", rtraceBin+" postproc -l -c -r -i "+raw+" | "+rtraceBin+" resolve")
	if rep.code != 0 {
		t.Fatalf("exit %d\n%s", rep.code, rep.stderr)
	}
	// The kind of each group, by the first source line of leakkinds.c in
	// its backtrace.
	kinds := map[int][]string{}
	kind := ""
	for _, l := range strings.Split(rep.stdout, "\n") {
		if k, ok := strings.CutPrefix(l, "\t$leak = "); ok {
			kind = k
		}
		if i := strings.Index(l, "leakkinds.c:"); i >= 0 && kind != "" {
			n, _ := strconv.Atoi(l[i+len("leakkinds.c:"):])
			kinds[n] = append(kinds[n], kind)
			kind = ""
		}
	}
	for line, want := range map[string][]string{
		"list":     {"indirectly lost", "definitely lost"}, // 3 nodes in one group, the head
		"plain":    {"definitely lost"},
		"possible": {"possibly lost"},
		"reach":    {"still reachable"},
	} {
		got := kinds[lines[line]]
		if strings.Join(got, ",") != strings.Join(want, ",") && strings.Join(got, ",") != want[len(want)-1]+","+want[0] {
			t.Errorf("leaks at leakkinds.c:%d (%s): kinds %q, want %q", lines[line], line, got, want)
		}
	}
	for _, c := range []struct {
		kinds string
		calls int
	}{{"definite", 4}, {"definite,possible", 5}, {"reachable", 2}, {"none", 0}, {"all", 12}} {
		r := runCmd(t, dir, rtraceBin, "postproc", "-l", "--leak-kinds="+c.kinds, "-i", raw)
		if n := countCalls(r.stdout, `malloc(<memory>)?\(`); r.code != 0 || n != c.calls {
			t.Errorf("--leak-kinds=%s: %d leaks (exit %d), want %d\n%s", c.kinds, n, r.code, c.calls, clipLines(r.stdout, 30))
		}
	}
	bad := runCmd(t, dir, rtraceBin, "postproc", "-l", "--leak-kinds=lost", "-i", raw)
	if bad.code != 2 || !strings.Contains(bad.stderr, `"lost"`) {
		t.Errorf("--leak-kinds=lost: exit %d, %q; want 2 naming it", bad.code, bad.stderr)
	}
	if t.Failed() {
		t.Log(clipLines(rep.stdout, 80))
	}
}
