package e2e_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"rtrace/internal/testutil"
)

// TestTimeline: rtrace timeline draws heapsum's trace as
// sp-rtrace-timeline's five reports, SVG with -g (PNG by default), each
// titled with its numbers, which equal what the summary counts of the
// same trace: the peak and when, what is held at the end, the allocations
// and how many were never released; the size histogram's most common
// size is one of temporaries()' (100-149 bytes, 402 calls each, one
// more of 128 from grow()'s reallocs);
// --filter-size keeps the allocations in the range (counted here from
// the text of the trace).
func TestTimeline(t *testing.T) {
	prog := testutil.BuildC(t, "heapsum.c", "-O2", "-g")
	dir, raw := recordOneRaw(t, resModes[1], []string{"--module", "memory"}, prog)
	r := runCmd(t, dir, rtraceBin, "timeline", "-t", "-a", "-l", "-c", "-s", "-g", "-i", raw, "-o", "hs")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	sum := runCmd(t, dir, rtraceBin, "postproc", "--summary", "-i", raw).stdout
	peak := regexp.MustCompile(`peak heap memory consumption: (\S+) after (\S+)s`).FindStringSubmatch(sum)
	usage := regexp.MustCompile(`total heap usage: ([\d,]+) allocs, ([\d,]+) frees`).FindStringSubmatch(sum)
	if peak == nil || usage == nil {
		t.Fatalf("summary:\n%s", sum)
	}
	num := func(s string) int { n, _ := strconv.Atoi(strings.ReplaceAll(s, ",", "")); return n }
	allocs, frees := num(usage[1]), num(usage[2])
	for _, c := range []struct{ file, want string }{
		{"hs-totals.svg", fmt.Sprintf("memory: peak %s after %ss, ", peak[1], peak[2])},
		{"hs-totals.svg", ">time (s)</text>"},
		{"hs-lifetime.svg", fmt.Sprintf("%d allocations: %d released, %d never", allocs, frees, allocs-frees)},
		{"hs-activity.svg", "busiest slice: "},
		{"hs-histogram-size.svg", "by size"},
	} {
		if s := read(c.file); !strings.Contains(s, c.want) {
			t.Errorf("%s: no %q", c.file, c.want)
		}
	}
	if m := regexp.MustCompile(`most: (\d+)-byte allocations, 40[23];`).FindStringSubmatch(read("hs-histogram-count.svg")); m == nil || num(m[1]) < 100 || num(m[1]) > 149 {
		t.Errorf("histogram: the most common size %v, want one of 100-149", m)
	}
	// PNG by default; --filter-size keeps what the text shows in the range.
	r = runCmd(t, dir, rtraceBin, "timeline", "-l", "--filter-size", "10k-", "-i", raw, "-o", "big")
	png := read("big-lifetime.png")
	if r.code != 0 || !bytes.HasPrefix([]byte(png), []byte("\x89PNG")) {
		t.Errorf("PNG: exit %d, %q", r.code, r.stderr)
	}
	text := runCmd(t, dir, rtraceBin, "postproc", "-i", raw).stdout
	big := 0
	for _, m := range regexp.MustCompile(`(?m)^\d+\. \[[^]]+\] \w+(?:<memory>)?\((\d+)\) = `).FindAllStringSubmatch(text, -1) {
		if num(m[1]) >= 10240 {
			big++
		}
	}
	r = runCmd(t, dir, rtraceBin, "timeline", "-l", "-g", "--filter-size", "10k-", "-i", raw, "-o", "big")
	if s := read("big-lifetime.svg"); big == 0 || !strings.Contains(s, fmt.Sprintf(">%d allocations: ", big)) {
		t.Errorf("--filter-size 10k-: want %d allocations in the title", big)
	}
	for _, bad := range [][]string{{"-i", raw}, {"-t", "--filter-size", "big", "-i", raw}} {
		if r := runCmd(t, dir, rtraceBin, append([]string{"timeline"}, bad...)...); r.code != 2 || !strings.HasPrefix(r.stderr, "rtrace: timeline: ") {
			t.Errorf("%v: exit %d, %q; want 2 and a line saying why", bad, r.code, r.stderr)
		}
	}
}
