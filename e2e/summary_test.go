package e2e_test

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"rtrace/internal/testutil"
)

// TestSummaryMatchesPeers: `rtrace postproc --summary` says what
// heaptrack_print's last lines and memcheck's "total heap usage" say of
// the same program (testdata/heapsum.c), with every engine, and a leak
// report of the raw trace opens with it. memcheck's allocations and
// bytes allocated are equal; its frees one more (it runs glibc's
// __libc_freeres at exit, which frees stdout's buffer). heaptrack's calls,
// temporary allocations and peak heap are within 1%: its preloaded library
// brings libstdc++, whose emergency pool (one call, 72,704 bytes) is in
// its numbers and not in the program.
func TestSummaryMatchesPeers(t *testing.T) {
	prog := testutil.BuildC(t, "heapsum.c", "-O2", "-g")
	valgrind := testutil.RequireTool(t, "valgrind")
	heaptrack := testutil.RequireTool(t, "heaptrack")
	heaptrackPrint := testutil.RequireTool(t, "heaptrack_print")

	tmp := t.TempDir()
	mc := runCmd(t, tmp, valgrind, prog)
	usage := regexp.MustCompile(`total heap usage: ([0-9,]+) allocs, ([0-9,]+) frees, ([0-9,]+) bytes allocated`)
	want := usage.FindStringSubmatch(mc.stderr)
	if mc.code != 0 || want == nil {
		t.Fatalf("valgrind: exit %d, no total heap usage:\n%s", mc.code, mc.stderr)
	}
	ht := runCmd(t, tmp, heaptrack, "-o", filepath.Join(tmp, "ht"), prog)
	files, _ := filepath.Glob(filepath.Join(tmp, "ht.*"))
	if ht.code != 0 || len(files) != 1 {
		t.Fatalf("heaptrack: exit %d, files %v:\n%s%s", ht.code, files, ht.stdout, ht.stderr)
	}
	hp := runCmd(t, tmp, heaptrackPrint, "-l", "-f", files[0])
	peer := summaryNumbers(t, "heaptrack_print", hp.stdout)

	for _, m := range resModes {
		t.Run(m.name, func(t *testing.T) {
			dir, raw := recordOneRaw(t, m, []string{"--module", "memory"}, prog)
			r := runCmd(t, dir, rtraceBin, "postproc", "--summary", "-i", raw)
			if r.code != 0 {
				t.Fatalf("postproc --summary: exit %d\n%s", r.code, r.stderr)
			}
			got := usage.FindStringSubmatch(r.stdout)
			if got == nil {
				t.Fatalf("no total heap usage line:\n%s", r.stdout)
			}
			if got[1] != want[1] || got[3] != want[3] {
				t.Errorf("rtrace: %q, memcheck: %q", got[0], want[0])
			}
			if f, wf := commaNumber(t, got[2]), commaNumber(t, want[2]); f != wf && f+1 != wf {
				t.Errorf("rtrace counts %d frees, memcheck %d", f, wf)
			}
			totals, _, _ := strings.Cut(r.stdout, "\n\n") // then the sections
			totals += "\n"
			mine := summaryNumbers(t, "rtrace", totals)
			for _, k := range []string{"calls", "temporary", "peak"} {
				if d := mine[k] - peer[k]; d > peer[k]/100 || -d > peer[k]/100 {
					t.Errorf("%s: rtrace %v, heaptrack_print %v (more than 1%% apart)\n%s", k, mine[k], peer[k], r.stdout)
				}
			}
			if mine["rss"] < mine["peak"] {
				t.Errorf("peak RSS %v below the peak heap %v:\n%s", mine["rss"], mine["peak"], r.stdout)
			}
			// The sections: the top backtrace of each, with file:line
			// (-r), as heaptrack_print names them (it merges backtraces by
			// their allocation site; rtrace keeps each whole, as -c does).
			full := runCmd(t, dir, rtraceBin, "postproc", "--summary", "-r", "-i", raw).stdout
			if !strings.HasPrefix(full, totals) {
				t.Errorf("--summary -r does not open with the summary:\n%s", clipLines(full, 12))
			}
			lines := markerLines(t, "heapsum.c")
			for _, sec := range []struct{ title, label, line string }{
				{"MEMORY LEAKS", heaptrackTop(t, hp.stdout, "MEMORY LEAKS") + " leaked in 50 blocks of 4000 calls from", "peak"},
				{"PEAK MEMORY CONSUMERS", heaptrackTop(t, hp.stdout, "PEAK MEMORY CONSUMERS") + " peak memory consumed over 4000 calls from", "peak"},
				{"MOST TEMPORARY ALLOCATIONS", "20000 temporary allocations of 20000 allocations in total (100.00%) from", "temporary"},
				{"MOST CALLS TO ALLOCATION FUNCTIONS", "20000 calls to allocation functions with 0B peak consumption from", "temporary"},
			} {
				_, after, ok := strings.Cut(full, "\n"+sec.title+"\n")
				first := strings.SplitN(after, "\n", 3)
				if !ok || len(first) < 2 || first[0] != sec.label || !strings.Contains(first[1], "heapsum.c:"+strconv.Itoa(lines[sec.line])) {
					t.Errorf("%s: want %q at heapsum.c:%d first, got %q", sec.title, sec.label, lines[sec.line], first)
				}
			}
			// A leak report of the raw trace opens with the same lines,
			// and keeps them through resolve.
			rep := runCmd(t, dir, rtraceBin, "postproc", "-l", "-c", "-i", raw).stdout
			os.WriteFile(filepath.Join(dir, "rep.txt"), []byte(rep), 0o644)
			resolved := runCmd(t, dir, rtraceBin, "resolve", "-i", "rep.txt").stdout
			for name, out := range map[string]string{"postproc -l -c": rep, "| rtrace resolve": resolved} {
				var head []string
				for _, l := range strings.Split(out, "\n") {
					if strings.HasPrefix(l, "## ") && len(head) < strings.Count(totals, "\n") {
						head = append(head, strings.TrimPrefix(l, "## "))
					}
				}
				if strings.Join(head, "\n")+"\n" != totals {
					t.Errorf("%s opens with\n%s\nnot the summary\n%s", name, strings.Join(head, "\n"), totals)
				}
			}
		})
	}
}

// heaptrackTop is the cost of the first entry of heaptrack_print's
// section title ("102.40K").
func heaptrackTop(t *testing.T, out, title string) string {
	t.Helper()
	_, after, _ := strings.Cut(out, "\n"+title+"\n")
	if f := strings.Fields(after); len(f) > 0 {
		return f[0]
	}
	t.Fatalf("heaptrack_print has no %s section:\n%s", title, out)
	return ""
}

// summaryNumbers reads calls, temporary, peak (bytes) and rss (bytes) from
// a heaptrack_print-style summary.
func summaryNumbers(t *testing.T, who, out string) map[string]float64 {
	t.Helper()
	n := map[string]float64{}
	for k, re := range map[string]string{
		"calls":     `calls to allocation functions: (\d+)`,
		"temporary": `temporary memory allocations: (\d+)`,
		"peak":      `peak heap memory consumption: ([0-9.]+[BKMGT])`,
		"rss":       `peak RSS \(including \w+ overhead\): ([0-9.]+[BKMGT])`,
	} {
		m := regexp.MustCompile(re).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("%s: no %s in\n%s", who, re, out)
		}
		s := m[1]
		scale := 1.0
		if i := strings.IndexAny(s, "BKMGT"); i >= 0 {
			scale = map[byte]float64{'B': 1, 'K': 1e3, 'M': 1e6, 'G': 1e9, 'T': 1e12}[s[i]]
			s = s[:i]
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("%s: %s: %v", who, m[0], err)
		}
		n[k] = v * scale
	}
	return n
}

// commaNumber reads memcheck's 1,234.
func commaNumber(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.ReplaceAll(s, ",", ""))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLeakSuppressions: a leak report leaves out what glibc keeps for
// itself until the process ends (getpwuid's buffer and NSS modules,
// stdout's buffer), which memcheck has glibc free at exit, and says so in
// a line; its leaks are then memcheck's (testdata/glibcleaks.c: 64 bytes
// in 2 blocks). A LeakSanitizer-format file (--suppressions) leaves out
// what it names; --disable-builtin-suppressions shows glibc's again.
func TestLeakSuppressions(t *testing.T) {
	prog := testutil.BuildC(t, "glibcleaks.c", "-O2", "-g")
	valgrind := testutil.RequireTool(t, "valgrind")
	mc := runCmd(t, t.TempDir(), valgrind, "--leak-check=full", prog)
	want := regexp.MustCompile(`definitely lost: (\d+) bytes in (\d+) blocks`).FindStringSubmatch(mc.stderr)
	if want == nil || want[1] != "64" || want[2] != "2" {
		t.Fatalf("memcheck: %q\n%s", want, mc.stderr)
	}
	lines := markerLines(t, "glibcleaks.c")
	for _, m := range resModes {
		t.Run(m.name, func(t *testing.T) {
			dir, raw := recordOneRaw(t, m, []string{"--module", "memory"}, prog)
			os.WriteFile(filepath.Join(dir, "sup.txt"), []byte("# ours\nleak:suppress_me\n"), 0o644)
			leakAt := func(rep string) []int {
				var at []int
				for _, l := range strings.Split(rep, "\n") {
					if i := strings.Index(l, "glibcleaks.c:"); i >= 0 && strings.HasPrefix(strings.TrimSpace(l), "0x") {
						n, _ := strconv.Atoi(l[i+len("glibcleaks.c:"):])
						if n == lines["lost"] || n == lines["suppressed"] {
							at = append(at, n)
						}
					}
				}
				return at
			}
			for _, c := range []struct {
				name   string
				args   []string
				total  string // the summary's line
				leaks  int    // calls listed
				sup    bool   // a suppressed leaks line
				places []int  // the program's own leaks, by line
			}{
				{"built-in", nil, "total memory leaked: 64B in 2 blocks", 2, true, []int{lines["suppressed"], lines["lost"]}},
				{"file", []string{"--suppressions", "sup.txt"}, "total memory leaked: 40B in 1 blocks", 1, true, []int{lines["lost"]}},
				{"none", []string{"--disable-builtin-suppressions"}, "", 3, false, []int{lines["suppressed"], lines["lost"]}},
			} {
				rep := runCmd(t, dir, rtraceBin, append(append([]string{"postproc", "-l", "-c", "-r"}, c.args...), "-i", raw)...)
				if rep.code != 0 {
					t.Fatalf("%s: exit %d\n%s", c.name, rep.code, rep.stderr)
				}
				n := countCalls(rep.stdout, `(malloc|calloc|realloc)(<memory>)?\(`)
				if c.total != "" && (!strings.Contains(rep.stdout, "## "+c.total+"\n") || n != c.leaks) ||
					c.total == "" && n < c.leaks ||
					strings.Contains(rep.stdout, "## suppressed leaks: ") != c.sup ||
					!slices.Equal(leakAt(rep.stdout), c.places) {
					t.Errorf("%s: %d leaks at %v, want %q, %d at %v, suppressed line %v:\n%s", c.name, n, leakAt(rep.stdout), c.total, c.leaks, c.places, c.sup, clipLines(rep.stdout, 40))
				}
			}
		})
	}
}

// TestFlameGraph: --flamegraph draws heapsum's allocation sites as SVG
// for each of heaptrack's cost types, each frame titled with its function
// and its cost: peak() held the whole 15.90M at the heap's peak (its
// blocks and their array), leaked 102.40K; temporaries() made 20,100
// temporary allocations, from two calls in main() merged by name.
func TestFlameGraph(t *testing.T) {
	prog := testutil.BuildC(t, "heapsum.c", "-O2", "-g")
	dir, raw := recordOneRaw(t, resModes[1], []string{"--module", "memory"}, prog)
	for _, c := range []struct{ cost, want string }{
		{"peak", "peak (15.90M, "},
		{"leaked", "peak (102.40K, "},
		{"temporary", "temporaries (20100 temporary, "},
		{"allocations", "temporaries (20100 calls, "},
	} {
		r := runCmd(t, dir, rtraceBin, "postproc", "--flamegraph", c.cost, "-i", raw)
		if r.code != 0 {
			t.Fatalf("%s: exit %d\n%s", c.cost, r.code, r.stderr)
		}
		var doc struct {
			Titles []string `xml:"g>title"`
		}
		if err := xml.Unmarshal([]byte(r.stdout), &doc); err != nil {
			t.Fatalf("%s: not XML: %v", c.cost, err)
		}
		found := false
		for _, ti := range doc.Titles {
			found = found || strings.HasPrefix(ti, c.want)
		}
		if !found || !strings.HasPrefix(doc.Titles[0], "all (") || !slices.ContainsFunc(doc.Titles, func(s string) bool { return strings.HasPrefix(s, "main (") }) {
			t.Errorf("%s: no frame %q among %q", c.cost, c.want, doc.Titles)
		}
	}
	// A batch names each graph after its input and cost.
	if r := runCmd(t, dir, rtraceBin, "postproc", "--flamegraph", "peak", "-o", "graphs", raw); r.code != 0 {
		t.Errorf("batch: exit %d\n%s", r.code, r.stderr)
	} else if _, err := os.Stat(filepath.Join(dir, "graphs", filepath.Base(raw)+".peak.svg")); err != nil {
		t.Errorf("batch: %v", err)
	}
	if r := runCmd(t, dir, rtraceBin, "postproc", "--flamegraph", "bytes", "-i", raw); r.code != 2 || !strings.Contains(r.stderr, "allocations, temporary, leaked, peak") {
		t.Errorf("an unknown cost: exit %d, %s", r.code, r.stderr)
	}
}

// TestSummaryDiff: --summary --diff BASE says what changed from one
// build of heapsum to another that keeps twice the blocks (-DKEEP_EVERY=40):
// the leak total grew by 204.80K, all of it, 50 blocks more, at peak()'s
// allocating line, matched across the two binaries by function, file and
// line; the peak, the temporary allocations and the calls did not change.
func TestSummaryDiff(t *testing.T) {
	base := testutil.BuildC(t, "heapsum.c", "-O2", "-g")
	more := testutil.BuildC(t, "heapsum.c", "-O2", "-g", "-DKEEP_EVERY=40")
	lines := markerLines(t, "heapsum.c")
	_, rawBase := recordOneRaw(t, resModes[1], []string{"--module", "memory"}, base)
	dir, raw := recordOneRaw(t, resModes[1], []string{"--module", "memory"}, more)
	r := runCmd(t, dir, rtraceBin, "postproc", "--summary", "--diff", rawBase, "-i", raw)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{
		"calls to allocation functions: 25102 (+0)\n",
		"total memory leaked: 307.20K (+204.80K)\n",
		fmt.Sprintf("MEMORY LEAKS\n+204.80K leaked (307.20K now, +50 blocks) from\n\tpeak() at heapsum.c:%d\n", lines["peak"]),
		"PEAK MEMORY CONSUMERS\nno change\n",
		"MOST TEMPORARY ALLOCATIONS\nno change\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no %q in\n%s", want, r.stdout)
		}
	}
	if bad := runCmd(t, dir, rtraceBin, "postproc", "--diff", rawBase, "-i", raw); bad.code != 2 || !strings.Contains(bad.stderr, "needs --summary") {
		t.Errorf("--diff without --summary: exit %d, %q", bad.code, bad.stderr)
	}
}

// TestSummaryAt: --summary --at T reads the trace up to a moment, and
// --at T,T2 says what grew between two moments of one trace. phases.c
// keeps 10 blocks of 1,000 bytes, pauses 300 ms, then keeps 20 of 2,000
// and frees 5 of the first. The moment is taken from the trace itself:
// 150 ms after phase one's last call (a time of day, and the same moment
// from the first call, +S), in the pause whatever the machine's load.
func TestSummaryAt(t *testing.T) {
	prog := testutil.BuildC(t, "phases.c", "-O2", "-g")
	lines := markerLines(t, "phases.c")
	dir, raw := recordOneRaw(t, resModes[1], []string{"--module", "memory"}, prog)
	text := runCmd(t, dir, rtraceBin, "postproc", "-i", raw)
	if text.code != 0 {
		t.Fatalf("postproc: exit %d\n%s", text.code, text.stderr)
	}
	// The calls' times of day, in call order: "N. [HH:MM:SS.mmm] malloc(1000) = 0x...".
	var times []time.Duration
	var lastOne time.Duration
	for _, m := range regexp.MustCompile(`(?m)^\d+\. \[(\d+):(\d+):(\d+)\.(\d+)\] (\w+)\((\d*)`).FindAllStringSubmatch(text.stdout, -1) {
		var n [4]int
		for i := range n {
			n[i], _ = strconv.Atoi(m[i+1])
		}
		at := time.Duration(n[0])*time.Hour + time.Duration(n[1])*time.Minute + time.Duration(n[2])*time.Second + time.Duration(n[3])*time.Millisecond
		times = append(times, at)
		if m[5] == "malloc" && m[6] == "1000" {
			lastOne = at
		}
	}
	if len(times) == 0 || lastOne == 0 {
		t.Fatalf("no phase one in\n%s", text.stdout)
	}
	mid := lastOne + 150*time.Millisecond
	if mid >= 24*time.Hour {
		mid -= 24 * time.Hour // the test ran at midnight: the moment is after it
	}
	ofDay := fmt.Sprintf("%02d:%02d:%06.3f", int(mid.Hours()), int(mid.Minutes())%60, (mid % time.Minute).Seconds())
	rel := fmt.Sprintf("+%.3f", (lastOne + 150*time.Millisecond - times[0]).Seconds())
	for _, at := range []string{ofDay, rel} {
		r := runCmd(t, dir, rtraceBin, "postproc", "--summary", "-r", "--at", at, "-i", raw)
		if r.code != 0 {
			t.Fatalf("--at %s: exit %d\n%s", at, r.code, r.stderr)
		}
		for _, want := range []string{
			"calls to allocation functions: 10 (",
			fmt.Sprintf("memory allocated at %s: 10.00K in 10 blocks\n", at),
			fmt.Sprintf("MEMORY ALLOCATED AT %s\n10.00K allocated in 10 blocks of 10 calls from\n", at),
			fmt.Sprintf(" phase1() at phases.c:%d\n", lines["phase1"]),
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("--at %s: no %q in\n%s", at, want, r.stdout)
			}
		}
		if strings.Contains(r.stdout, "phase2") || strings.Contains(r.stdout, "peak RSS") {
			t.Errorf("--at %s: phase two or the RSS at the end in\n%s", at, r.stdout)
		}
	}
	// From the pause to the end: phase two's blocks grew, phase one's shrank.
	r := runCmd(t, dir, rtraceBin, "postproc", "--summary", "--at", rel+",+1:00", "-i", raw)
	if r.code != 0 {
		t.Fatalf("--at T,T2: exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{
		fmt.Sprintf("from %s to +1:00\n", rel),
		"memory allocated at +1:00: 45.00K (+35.00K)\n",
		fmt.Sprintf("+40.00K allocated (40.00K now, +20 blocks) from\n\tphase2() at phases.c:%d\n", lines["phase2"]),
		fmt.Sprintf("-5.00K allocated (5.00K now, -5 blocks) from\n\tphase1() at phases.c:%d\n", lines["phase1"]),
		"MOST TEMPORARY ALLOCATIONS\nno change\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("--at T,T2: no %q in\n%s", want, r.stdout)
		}
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--at", rel}, "needs --summary"},
		{[]string{"--summary", "--at", "+2,+1"}, "before the first"},
		{[]string{"--summary", "--at", "soon"}, `"soon"`},
		{[]string{"--summary", "--at", "+1", "--diff", raw}, "give one"},
	} {
		b := runCmd(t, dir, rtraceBin, append(append([]string{"postproc"}, bad.args...), "-i", raw)...)
		if b.code != 2 || !strings.Contains(b.stderr, bad.want) {
			t.Errorf("%v: exit %d, %q, want %q", bad.args, b.code, b.stderr, bad.want)
		}
	}
}
