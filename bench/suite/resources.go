package suite

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"rtrace/internal/trace"
	"rtrace/internal/wire"
)

// walkRe matches rtrace's -v line on its resource backtraces
// (launcher/finish.go): found in the process by the stubs, or at a stop.
var walkRe = regexp.MustCompile(`fast engine: (\d+) of (\d+) backtraces found in the process without a stop`)

// noFastFunc matches rtrace's -v line when every function it traces has
// an int3 entry: every call is recorded at a stop.
var noFastFunc = regexp.MustCompile(`fast engine: 0 of \d+ instrumented functions recorded without a stop`)

// walkLine reads rtrace's -v lines on its backtraces, summed over the
// sessions that printed one; ok is false when there is none.
func walkLine(stderr string) (found, all int64, ok bool) {
	for _, m := range walkRe.FindAllStringSubmatch(stderr, -1) {
		f, err1 := strconv.ParseInt(m[1], 10, 64)
		a, err2 := strconv.ParseInt(m[2], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		found, all, ok = found+f, all+a, true
	}
	return found, all, ok
}

// rawTraces lists rtrace's raw resource traces in dir: one per process.
func rawTraces(dir string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, "*.rtrace"))
	return m
}

// processes counts the processes of raw traces named <pid>-<n>.rtrace.
func processes(files []string) int {
	pids := map[string]bool{}
	for _, f := range files {
		pid, _, _ := strings.Cut(filepath.Base(f), "-")
		pids[pid] = true
	}
	return len(pids)
}

// callSet reads the raw resource traces in dir. With keys, it returns
// their calls as a multiset: each call's function, size and backtrace
// addresses, with how many times it occurs. Threads interleave as they
// will, so two runs' traces are compared as multisets; with a fixed
// address layout, the multiset is the same from run to run. calls is
// how many calls there are.
func callSet(dir string, keys bool) (set map[string]int, calls int64, err error) {
	files := rawTraces(dir)
	if len(files) == 0 {
		return nil, 0, errors.New("rtrace wrote no raw trace")
	}
	if keys {
		set = map[string]int{}
	}
	// A 3.3 stream's calls share their backtrace's frames: each one is
	// formatted once.
	stacks := map[*trace.Frame]string{}
	for _, path := range files {
		n, err := eachCall(path, func(c *trace.Call) {
			if keys {
				set[callKey(c, stacks)]++
			}
		})
		calls += n
		if err != nil {
			return nil, calls, fmt.Errorf("%s: %w", filepath.Base(path), err)
		}
	}
	return set, calls, nil
}

// eachCall reads a raw trace with rtrace's reader, and calls f on each of
// its calls.
func eachCall(path string, f func(*trace.Call)) (int64, error) {
	file, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer file.Close()
	rd, err := wire.NewReader(file)
	if err != nil {
		return 0, err
	}
	var n int64
	for {
		it, err := rd.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if c, ok := it.(*trace.Call); ok {
			n++
			f(c)
		}
	}
}

// callKey is what two unwinders must agree on for a call: its function,
// its size and its backtrace's addresses.
func callKey(c *trace.Call, stacks map[*trace.Frame]string) string {
	var bt string
	if len(c.Frames) > 0 {
		var ok bool
		if bt, ok = stacks[&c.Frames[0]]; !ok {
			var b strings.Builder
			for _, fr := range c.Frames {
				fmt.Fprintf(&b, " %#x", fr.Addr)
			}
			bt = b.String()
			stacks[&c.Frames[0]] = bt
		}
	}
	return fmt.Sprintf("%s(%d)%s", c.Name, c.Size, bt)
}

// compareCalls says where two multisets of calls first part, in the
// order of their keys; "" when equal.
func compareCalls(got, want map[string]int) string {
	if len(want) == 0 {
		return "the reference has no calls"
	}
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	for k := range want {
		if _, ok := got[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if got[k] != want[k] {
			return fmt.Sprintf("%d calls, want %d; the first that differs: %s, %d times, want %d", total(got), total(want), k, got[k], want[k])
		}
	}
	return ""
}

func total(set map[string]int) int {
	n := 0
	for _, c := range set {
		n += c
	}
	return n
}

// remoteCheck compares the calls rtrace recorded in dir, their backtraces
// found in the process, with those of the same run under rtrace remote in
// ref, every backtrace taken at a stop: the check column's word, and what
// differs.
func remoteCheck(dir, ref string) (check, note string) {
	got, _, err := callSet(dir, true)
	if err != nil {
		return "error", err.Error()
	}
	want, _, err := callSet(ref, true)
	if err != nil {
		return "error", "rtrace remote: " + err.Error()
	}
	if d := compareCalls(got, want); d != "" {
		return "backtraces ≠ remote", d
	}
	return "backtraces = remote", ""
}
