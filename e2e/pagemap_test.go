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

// TestPagemap: `rtrace record --module pagemap` takes the page map of
// pages.c's memory at its end, and `rtrace pagemap` draws its block of
// 256 KiB (a mapping of its own, 65 pages from its header's): sixteen
// pages of ones (dirty, '#'), sixteen of zeros written ('0'), the rest
// never touched (' '); -d: the block takes 4,080 bytes of the first page
// ('9'), then 63 whole pages, then 16 bytes ('0'); -c: the pages written
// are mapped once. Every engine; the kernel's flags where the test may
// read them (as root), else rtrace's reading of /proc/PID/pagemap: the
// same pictures. Through a leak report piped from another directory too:
// the page map's files are named relative to where the report is read.
func TestPagemap(t *testing.T) {
	prog := testutil.BuildC(t, "pages.c", "-O2", "-g")
	lines := markerLines(t, "pages.c")
	kernel := false
	if f, err := os.Open("/proc/kpageflags"); err == nil {
		var b [8]byte
		_, err = f.ReadAt(b[:], 0)
		kernel = err == nil
		f.Close()
	}
	for _, m := range resModes {
		t.Run(m.name, func(t *testing.T) {
			dir, raw := recordOneRaw(t, m, []string{"--module", "memory", "--module", "pagemap"}, prog)
			checkPagemap(t, dir, raw, kernel, lines["block"])
		})
	}
	if kernel {
		// As root, also without CAP_SYS_ADMIN: pagemap's own bits.
		t.Run("unprivileged", func(t *testing.T) {
			dir := t.TempDir()
			testutil.KeepOnFailure(t, dir)
			r := runCmd(t, dir, testutil.RequireTool(t, "setpriv"), "--bounding-set", "-sys_admin", rtraceBin, "record", "-q", "--start", "-o", "D", "--module", "memory", "--module", "pagemap", prog)
			if r.code != 0 {
				t.Fatalf("record: exit %d\n%s", r.code, r.stderr)
			}
			raw := rawFiles(t, filepath.Join(dir, "D"), ".rtrace")
			if len(raw) != 1 {
				t.Fatalf("raw files %v", raw)
			}
			checkPagemap(t, dir, raw[0], false, lines["block"])
		})
	}
	// What is wrong is said.
	dir, raw := recordOneRaw(t, resModes[1], []string{"--module", "memory"}, prog)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-p", "-i", raw}, 1, "--module pagemap"},
		{[]string{"-p", "-d", "-i", raw}, 2, "give one"},
		{[]string{"-i", raw}, 2, "no report"},
		{[]string{"-p", "-P", "D", "-i", raw}, 2, "not supported"},
		{[]string{"-p", "-A", "xyz", "-i", raw}, 2, "not a hex address"},
		{[]string{"-p", "-i", filepath.Join(dir, "nothing")}, 1, "no such file"},
	} {
		r := runCmd(t, dir, rtraceBin, append([]string{"pagemap"}, c.args...)...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("pagemap %v: exit %d, %q; want %d, %q", c.args, r.code, r.stderr, c.code, c.want)
		}
	}
}

// TestWindowEnd: a toggle that closes a window takes what the process's
// end would: the page map of its memory then (sp-rtrace's pagemap module
// took it when its window closed) and the scan behind the leak kinds of
// the blocks the window leaves allocated, the roots being its threads'
// registers then. keeper.c's steps each keep a block of 104 bytes on a
// global list and drop the last pointer to one of 50: a window of three
// steps leaves three of each, still reachable and definitely lost; the
// next window of two, two of each (its list reaches blocks of the first
// window, not in its trace).
func TestWindowEnd(t *testing.T) {
	prog := testutil.BuildC(t, "keeper.c", "-O2", "-g")
	tmp := t.TempDir()
	testutil.KeepOnFailure(t, tmp)
	s, errs, pid := startStepped(t, tmp, nil, "sp-rtrace", "-e", "memory:pagemap", "-o", "D", "-q", "--", prog)
	if pid == 0 {
		t.Fatalf("the fixture did not start:\n%s", errs.String())
	}
	window := func(n int) { t.Helper(); toggleWindow(t, tmp, s, pid, n) }
	s.steps(1) // stdio's buffers, untraced
	window(3)
	s.steps(1)
	window(2)
	s.in.Close()
	s.out.drain()
	errs.drain()
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("sp-rtrace: %v\n%s", err, errs.String())
	}
	if strings.Contains(errs.String(), "warning") {
		t.Errorf("warnings:\n%s", errs.String())
	}
	raw := rawFiles(t, filepath.Join(tmp, "D"), ".rtrace")
	if len(raw) != 2 {
		t.Fatalf("raw files %v, want two", raw)
	}
	for i, n := range []int{3, 2} {
		r := runCmd(t, tmp, rtraceBin, "postproc", "-l", "-c", "-i", raw[i])
		if r.code != 0 {
			t.Fatalf("postproc -l %s: exit %d\n%s", raw[i], r.code, r.stderr)
		}
		for _, want := range []string{
			fmt.Sprintf("## definitely lost: %d bytes in %d blocks\n", 50*n, n),
			fmt.Sprintf("## still reachable: %d bytes in %d blocks\n", 104*n, n),
			fmt.Sprintf("& maps : %s\n", filepath.Join(tmp, "D", fmt.Sprintf("%d-pagemap-maps-%d", pid, i))), // on stdout: absolute
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("window %d: no %q in\n%s", i+1, want, r.stdout)
			}
		}
		// The window's live blocks on the heap's pages.
		pm := runCmd(t, tmp, rtraceBin, "pagemap", "-d", "-N", "heap", "-B", "1", "-i", raw[i])
		if pm.code != 0 || !strings.Contains(pm.stdout, "[heap]") || !strings.Contains(pm.stdout, "Bottom 1 allocations:\n") {
			t.Errorf("window %d: pagemap: exit %d\n%s%s", i+1, pm.code, pm.stdout, pm.stderr)
		}
	}
}

// checkPagemap checks the reports of pages.c's trace raw in dir: the
// kernel's flags were read (kernel) or not.
func checkPagemap(t *testing.T, dir, raw string, kernel bool, blockLine int) {
	t.Helper()
	for _, suffix := range []string{"maps-0", "pageflags-0"} {
		if _, err := os.Stat(filepath.Join(dir, "D", fmt.Sprintf("%s-pagemap-%s", strings.TrimSuffix(filepath.Base(raw), "-0.rtrace"), suffix))); err != nil {
			t.Errorf("the page map's file: %v", err)
		}
	}
	text := runCmd(t, dir, rtraceBin, "postproc", "-i", raw)
	am := regexp.MustCompile(`malloc\(262144\) = 0x([0-9a-f]+)`).FindStringSubmatch(text.stdout)
	if am == nil {
		t.Fatalf("no block in\n%s", text.stdout)
	}
	addr, _ := strconv.ParseUint(am[1], 16, 64)
	// pages draws report -A the block's mapping and returns the
	// block's 65 pages' characters.
	pages := func(report ...string) (string, string) {
		t.Helper()
		r := runCmd(t, dir, rtraceBin, append(append([]string{"pagemap"}, report...), "-A", am[1], "-i", raw)...)
		if r.code != 0 {
			t.Fatalf("pagemap %v: exit %d\n%s", report, r.code, r.stderr)
		}
		area := regexp.MustCompile(`(?m)^1\. ([0-9a-f]+)-[0-9a-f]+ rw-p `).FindStringSubmatch(r.stdout)
		if area == nil {
			t.Fatalf("pagemap %v: no mapping in\n%s", report, r.stdout)
		}
		from, _ := strconv.ParseUint(area[1], 16, 64)
		var all strings.Builder
		for _, l := range regexp.MustCompile(`(?m)^[0-9a-f]{8,} \|(.*)\|$`).FindAllStringSubmatch(r.stdout, -1) {
			all.WriteString(l[1])
		}
		first := int((addr - 16 - from) / 4096)
		if first+65 > all.Len() {
			t.Fatalf("pagemap %v: the block's pages (from %d) are not in\n%s", report, first, r.stdout)
		}
		return all.String()[first : first+65], r.stdout
	}
	if got, out := pages("-p", "-s", "-T", "1"); got != strings.Repeat("#", 16)+strings.Repeat("0", 16)+strings.Repeat(" ", 33) {
		t.Errorf("-p: the block's pages %q in\n%s", got, out)
	} else {
		for _, want := range []string{
			"Top 1 allocations:\n\t1. ",
			fmt.Sprintf("malloc(262144) = 0x%x\n", addr),
			"dirty RAM + Z ",
			"Memory page type summary\n",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("-p: no %q in\n%s", want, out)
			}
		}
		if kernel != !strings.Contains(out, "the kernel's page flags were not read") {
			t.Errorf("-p: the kernel's flags readable: %v, but\n%s", kernel, out)
		}
		if kernel && !strings.Contains(out, "\tb : swapbacked\n") {
			t.Errorf("-s: no swap-backed pages in\n%s", out)
		}
	}
	if got, out := pages("-d"); got != "9"+strings.Repeat("#", 63)+"0" {
		t.Errorf("-d: the block's pages %q in\n%s", got, out)
	}
	if got, out := pages("-c"); got != strings.Repeat("1", 32)+strings.Repeat("0", 33) {
		t.Errorf("-c: the block's pages %q in\n%s", got, out)
	}
	// A resolved leak report, read from elsewhere: the frames named.
	other := t.TempDir()
	r := runCmd(t, other, "sh", "-c", fmt.Sprintf("%s postproc -l -r -i %s | %s pagemap -d -T 1 -A %s", rtraceBin, raw, rtraceBin, am[1]))
	if r.code != 0 {
		t.Fatalf("postproc -l -r | pagemap: exit %d\n%s", r.code, r.stderr)
	}
	if want := fmt.Sprintf(" (main() at pages.c:%d)\n", blockLine); !strings.Contains(r.stdout, want) {
		t.Errorf("postproc -l -r | pagemap: no %q in\n%s", want, r.stdout)
	}
}

// TestBigMappings: memory reserved but not there is not read whole:
// bigmap.c's 8 GiB reservation holds the only pointer to a block 4 GiB
// in, which the leak scan finds where /proc/PID/pagemap says a page is
// (still reachable, as memcheck would say); its untouched 100 GiB one is
// not scanned, and rtrace says so; the page map names both and draws
// neither (more than 4 GiB). Both engines.
func TestBigMappings(t *testing.T) {
	prog := testutil.BuildC(t, "bigmap.c", "-O2", "-g")
	for _, m := range resModes[:2] {
		t.Run(m.name, func(t *testing.T) {
			dir, r := recordRes(t, m, []string{"--module", "memory", "--module", "pagemap"}, prog)
			if !strings.Contains(r.stderr, "mappings of more than 64 GiB not scanned") {
				t.Errorf("no word of the mapping not scanned:\n%s", r.stderr)
			}
			raw := rawFiles(t, filepath.Join(dir, "D"), ".rtrace")
			if len(raw) != 1 {
				t.Fatalf("raw files %v", raw)
			}
			l := runCmd(t, dir, rtraceBin, "postproc", "-l", "-i", raw[0])
			for _, want := range []string{"## definitely lost: 0 bytes in 0 blocks\n", "## still reachable: 100 bytes in 1 blocks\n"} {
				if !strings.Contains(l.stdout, want) {
					t.Errorf("no %q in\n%s", want, clipLines(l.stdout, 20))
				}
			}
			p := runCmd(t, dir, rtraceBin, "pagemap", "-p", "-i", raw[0])
			if p.code != 0 || strings.Count(p.stdout, "a mapping of more than 4 GiB is not drawn") != 2 {
				t.Errorf("pagemap: exit %d\n%s%s", p.code, p.stdout, p.stderr)
			}
		})
	}
}

// TestWindowEndThreads: the window a toggle closes ends at its scan.
// winthreads.c's four threads allocate without pause, every block kept
// in a global array, when the program sends itself the toggle signal:
// all the window's blocks are reachable. Threads that went on allocating
// between the scan and the window's close once put thousands of blocks
// into the window after its scan, all "definitely lost". A thread the
// fast engine's exit stub holds at the park may have its last result
// only in rtrace's own state (not scanned): at most a block a thread.
func TestWindowEndThreads(t *testing.T) {
	prog := testutil.BuildC(t, "winthreads.c", "-O2", "-g", "-pthread")
	tmp := t.TempDir()
	testutil.KeepOnFailure(t, tmp)
	r := runCmd(t, tmp, rtraceBin, "sp-rtrace", "-e", "memory", "-s", "-o", "D", "-q", "-x", prog)
	if r.code != 0 || !strings.Contains(r.stdout, "winthreads done") {
		t.Fatalf("sp-rtrace: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	raw := rawFiles(t, filepath.Join(tmp, "D"), ".rtrace")
	if len(raw) != 1 {
		t.Fatalf("raw files %v", raw)
	}
	l := runCmd(t, tmp, rtraceBin, "postproc", "-l", "-i", raw[0])
	kinds := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^## (definitely|indirectly|possibly) lost: [\d,]+ bytes in (\d+) blocks$|^## (still reachable): [\d,]+ bytes in ([\d,]+) blocks$`).FindAllStringSubmatch(l.stdout, -1) {
		k, n := m[1]+m[3], m[2]+m[4]
		kinds[k], _ = strconv.Atoi(strings.ReplaceAll(n, ",", ""))
	}
	lost := kinds["definitely"] + kinds["indirectly"] + kinds["possibly"]
	if kinds["still reachable"] < 8000 || lost > 4 {
		t.Errorf("kinds %v: want every block of the window reachable (at most one lost a thread)\n%s", kinds, clipLines(l.stdout, 20))
	}
}
