package suite

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"rtrace/internal/elfx"
)

// Tree turns `uftrace replay -f tid` output into one call tree per thread
// (its calls, indented by depth, without times), sorted: threads are told
// apart by what they ran, not by their ids, which differ run to run.
func Tree(replay string) []string { return OwnTree(replay, nil) }

// OwnTree is Tree with only the calls of the functions keep accepts (the
// program's own: the library functions a tracer sees depend on how it
// hooks them; uftrace -pg misses a call through a pointer read from the
// GOT, rtrace records it).
func OwnTree(replay string, keep func(name string) bool) []string {
	// thread is one thread's tree so far, with the indents of the calls
	// open above the next line.
	type thread struct {
		text strings.Builder
		open []int
	}
	blocks := map[string]*thread{}
	for _, line := range strings.Split(replay, "\n") {
		head, body, ok := strings.Cut(line, "] | ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		// The tid column ("[  1234"), after a duration column if any.
		tid := strings.TrimSpace(head[strings.LastIndexByte(head, '[')+1:])
		fn := strings.TrimSpace(body)
		if fn == "" || strings.HasPrefix(fn, "}") || strings.HasPrefix(fn, "/*") {
			continue
		}
		indent := len(body) - len(strings.TrimLeft(body, " "))
		fn = strings.TrimSuffix(strings.TrimSuffix(fn, " {"), ";")
		if keep != nil && !keep(strings.TrimSuffix(fn, "()")) {
			continue
		}
		b := blocks[tid]
		if b == nil {
			b = &thread{}
			blocks[tid] = b
		}
		// The depth among the kept calls: a call is under the last kept
		// one that is less indented (a dropped library call between them
		// does not count).
		for len(b.open) > 0 && b.open[len(b.open)-1] >= indent {
			b.open = b.open[:len(b.open)-1]
		}
		fmt.Fprintf(&b.text, "%s%s\n", strings.Repeat("  ", len(b.open)), fn)
		b.open = append(b.open, indent)
	}
	out := make([]string, 0, len(blocks))
	for _, b := range blocks {
		out = append(out, b.text.String())
	}
	sort.Strings(out)
	return out
}

// WithoutPgStartup drops from the trees of a -pg build what -pg itself
// adds before main: gmon's __monstartup() and the __cxa_atexit() that
// registers _mcleanup.
func WithoutPgStartup(trees []string) []string {
	out := make([]string, len(trees))
	for i, tr := range trees {
		out[i] = strings.Replace(tr, "__monstartup()\n__cxa_atexit()\n", "", 1)
	}
	sort.Strings(out)
	return out
}

// CompareTrees says whether two sets of thread trees are the same and,
// when not, where they first part: "" when equal.
func CompareTrees(got, want []string) string {
	if len(want) == 0 {
		return "the reference has no calls of the program's functions"
	}
	if len(got) != len(want) {
		return fmt.Sprintf("%d threads, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := strings.Split(got[i], "\n"), strings.Split(want[i], "\n")
		for j := 0; j < len(g) || j < len(w); j++ {
			var gl, wl string
			if j < len(g) {
				gl = g[j]
			}
			if j < len(w) {
				wl = w[j]
			}
			if gl != wl {
				return fmt.Sprintf("thread %d, call %d: %q, want %q", i+1, j+1, strings.TrimSpace(gl), strings.TrimSpace(wl))
			}
		}
	}
	return ""
}

// OwnFuncs is the set of function names of the program at path.
func OwnFuncs(path string) (func(string) bool, error) {
	f, err := elfx.Open(path)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, fn := range f.Funcs {
		set[fn.Name] = true
		for _, a := range fn.Aliases {
			set[a] = true
		}
	}
	return func(name string) bool { return set[name] }, nil
}

// Replay runs `uftrace replay -f tid` on a uftrace.data directory.
func Replay(uftrace, dir string) (string, error) {
	out, err := exec.Command(uftrace, "replay", "--no-pager", "-f", "tid", "-d", dir).Output()
	if err != nil {
		return "", fmt.Errorf("uftrace replay -d %s: %w", dir, err)
	}
	return string(out), nil
}

// lostRe matches memcheck's leak summary lines (valgrind's
// memcheck/mc_leakcheck.c prints them): "definitely lost: 1,000 bytes in
// 10 blocks".
var lostRe = regexp.MustCompile(`==\d+==\s+(definitely|indirectly) lost: [\d,]+ bytes in ([\d,]+) blocks`)

// inUseRe matches memcheck's heap summary: "in use at exit: 1,600 bytes
// in 20 blocks", every block never freed, lost or still reachable.
var inUseRe = regexp.MustCompile(`==\d+==\s+in use at exit: [\d,]+ bytes in ([\d,]+) blocks`)

// Memcheck is what memcheck's log says of the heap at exit.
type Memcheck struct {
	Lost  int // definitely and indirectly lost blocks
	InUse int // blocks never freed, reachable or not
}

// MemcheckLeaks reads memcheck's log; ok is false when it holds no heap
// summary.
func MemcheckLeaks(r io.Reader) (m Memcheck, ok bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	count := func(s string) (int, bool) {
		n, err := strconv.Atoi(strings.ReplaceAll(s, ",", ""))
		return n, err == nil
	}
	for sc.Scan() {
		line := sc.Text()
		if g := inUseRe.FindStringSubmatch(line); g != nil {
			n, good := count(g[1])
			if !good {
				return m, false
			}
			m.InUse, ok = n, true
		}
		if g := lostRe.FindStringSubmatch(line); g != nil {
			n, good := count(g[2])
			if !good {
				return m, false
			}
			m.Lost += n
		}
	}
	return m, ok
}
