package suite

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"

	"rtrace/internal/elfx"
)

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
