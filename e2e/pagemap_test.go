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
			if want := fmt.Sprintf(" (main() at pages.c:%d)\n", lines["block"]); !strings.Contains(r.stdout, want) {
				t.Errorf("postproc -l -r | pagemap: no %q in\n%s", want, r.stdout)
			}
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
