package rtext

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"

	"rtrace/internal/trace"
)

// Line parsers. Each takes one line without its newline and reports whether
// the line has its form; a line no parser accepts is a comment. They follow
// sp-rtrace's parse_text.c, a little stricter where its sscanf calls accept
// trailing junk, so that what does not parse round-trips as a comment.

// parseHeader reads "key=value, " pairs. ok is false when no known key is
// present: the line is not a header.
func parseHeader(s string) (h *trace.Header, ok bool) {
	h = &trace.Header{Depth: -1}
	for _, part := range strings.Split(s, ",") {
		key, val, found := strings.Cut(strings.TrimLeft(part, " "), "=")
		if !found {
			continue
		}
		switch key {
		case "version":
			h.Version = val
		case "arch":
			h.Arch = val
		case "timestamp", "time": // "time" in sp-rtrace 1.0 traces
			h.Time, _ = parseTimestamp(val)
		case "process":
			h.Process = val
		case "pid":
			h.Pid, _ = strconv.Atoi(val)
		case "filter":
			h.Filter = nil
			for _, f := range strings.Split(val, "|") {
				if f != "" {
					h.Filter = append(h.Filter, f)
				}
			}
		case "backtrace depth":
			if d, err := strconv.Atoi(val); err == nil {
				h.Depth = d
			}
		case "origin":
			h.Origin = val
		default:
			continue
		}
		ok = true
	}
	return h, ok
}

// parseTimestamp reads "2011.6.16 15:49:48" as local time.
func parseTimestamp(s string) (time.Time, bool) {
	date, clock, ok := strings.Cut(s, " ")
	if !ok {
		return time.Time{}, false
	}
	d, ok1 := splitInts(date, ".", 3)
	c, ok2 := splitInts(clock, ":", 3)
	if !ok1 || !ok2 || d[1] < 1 || d[1] > 12 || d[2] < 1 || d[2] > 31 || c[0] > 23 || c[1] > 59 || c[2] > 60 {
		return time.Time{}, false
	}
	return time.Date(d[0], time.Month(d[1]), d[2], c[0], c[1], c[2], 0, time.Local), true
}

// splitInts splits s at sep into n small non-negative decimal numbers.
func splitInts(s, sep string, n int) ([]int, bool) {
	parts := strings.Split(s, sep)
	if len(parts) != n {
		return nil, false
	}
	out := make([]int, n)
	for i, p := range parts {
		v, ok := smallUint(p)
		if !ok {
			return nil, false
		}
		out[i] = v
	}
	return out, true
}

// smallUint parses 1 to 9 decimal digits, so that sums of a few of them
// cannot overflow.
func smallUint(s string) (int, bool) {
	if len(s) == 0 || len(s) > 9 {
		return 0, false
	}
	v := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		v = v*10 + int(s[i]-'0')
	}
	return v, true
}

// parseHex reads hex digits (no prefix, no sign) into at most bitSize bits.
func parseHex(s string, bitSize int) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(s, 16, bitSize)
	return v, err == nil
}

// parseTask reads the line Writer prints for a task event, "## task 42
// (pid 42) exited at 1234 ns", back into the event: the pprof encoder
// needs the process's end from a text trace too.
func parseTask(s string) (*trace.Task, bool) {
	if !strings.HasPrefix(s, "## task ") {
		return nil, false
	}
	var t trace.Task
	var what string
	if _, err := fmt.Sscanf(s, "## task %d (pid %d) forked by %d at %d ns", &t.Tid, &t.Pid, &t.PPid, &t.Time); err != nil {
		t = trace.Task{}
		if _, err := fmt.Sscanf(s, "## task %d (pid %d) %s at %d ns", &t.Tid, &t.Pid, &what, &t.Time); err != nil {
			return nil, false
		}
		t.Exit = what == "exited"
	}
	if taskLine(&t) != s {
		return nil, false
	}
	return &t, true
}

// taskLine is the text of a task event.
func taskLine(t *trace.Task) string {
	what := "started"
	switch {
	case t.Exit:
		what = "exited"
	case t.PPid != 0:
		what = fmt.Sprintf("forked by %d", t.PPid)
	}
	return fmt.Sprintf("## task %d (pid %d) %s at %d ns", t.Tid, t.Pid, what, t.Time)
}

// parseUsage reads the line Writer prints for a process's usage,
// "## process 42 peak RSS 4096000 bytes".
func parseUsage(s string) (*trace.Usage, bool) {
	if !strings.HasPrefix(s, "## process ") {
		return nil, false
	}
	var u trace.Usage
	if _, err := fmt.Sscanf(s, "## process %d peak RSS %d bytes", &u.Pid, &u.PeakRSS); err != nil || usageLine(&u) != s {
		return nil, false
	}
	return &u, true
}

// usageLine is the text of a process's usage.
func usageLine(u *trace.Usage) string {
	return fmt.Sprintf("## process %d peak RSS %d bytes", u.Pid, u.PeakRSS)
}

// parseModule reads "## tracing module: [1] shmsysv (1.0)".
func parseModule(s string) (*trace.Module, bool) {
	rest, ok := strings.CutPrefix(s, "## tracing module: [")
	if !ok {
		return nil, false
	}
	id, rest, ok := strings.Cut(rest, "] ")
	if !ok {
		return nil, false
	}
	i := strings.LastIndex(rest, " (")
	if i < 0 || !strings.HasSuffix(rest, ")") {
		return nil, false
	}
	maj, min, ok := strings.Cut(rest[i+2:len(rest)-1], ".")
	if !ok {
		return nil, false
	}
	m := &trace.Module{Name: rest[:i]}
	v, ok1 := parseHex(id, 32)
	a, err1 := strconv.ParseUint(maj, 10, 16)
	b, err2 := strconv.ParseUint(min, 10, 16)
	if !ok1 || err1 != nil || err2 != nil {
		return nil, false
	}
	m.ID, m.Major, m.Minor = uint32(v), uint16(a), uint16(b)
	return m, true
}

// parseResource reads "<1> : segment (shared memory segment) [refcount]".
// The ID is the position of the mask's lowest set bit, counted from 1.
func parseResource(s string) (*trace.Resource, bool) {
	if !strings.HasPrefix(s, "<") {
		return nil, false
	}
	mask, rest, ok := strings.Cut(s[1:], "> : ")
	if !ok {
		return nil, false
	}
	m, ok := parseHex(mask, 32)
	if !ok || m == 0 {
		return nil, false
	}
	r := &trace.Resource{ID: bits.TrailingZeros32(uint32(m)) + 1}
	if strings.HasSuffix(rest, "]") {
		if i := strings.LastIndex(rest, ") ["); i >= 0 {
			r.Refcount = strings.Contains(rest[i+3:], "refcount")
			rest = rest[:i+1]
		}
	}
	name, desc, ok := strings.Cut(rest, " (")
	if !ok || name == "" || !strings.HasSuffix(desc, ")") {
		return nil, false
	}
	r.Name, r.Desc = name, desc[:len(desc)-1]
	return r, true
}

// parseContext reads "@ 3 : context name".
func parseContext(s string) (*trace.Context, bool) {
	rest, ok := strings.CutPrefix(s, "@ ")
	if !ok {
		return nil, false
	}
	id, name, ok := strings.Cut(rest, " : ")
	v, ok2 := parseHex(id, 32)
	if !ok || !ok2 {
		return nil, false
	}
	return &trace.Context{ID: uint32(v), Name: name}, true
}

// parseMapping reads ": /lib/libc-2.12.1.so => 0x136000-0x28d000".
func parseMapping(s string) (*trace.Mapping, bool) {
	rest, ok := strings.CutPrefix(s, ": ")
	if !ok {
		return nil, false
	}
	i := strings.LastIndex(rest, " => 0x")
	if i < 0 {
		return nil, false
	}
	from, to, ok := strings.Cut(rest[i+len(" => 0x"):], "-0x")
	f, ok1 := parseHex(from, 64)
	t, ok2 := parseHex(to, 64)
	if !ok || !ok1 || !ok2 {
		return nil, false
	}
	return &trace.Mapping{From: f, To: t, Path: rest[:i]}, true
}

// parseFile reads "& name : path", a file a module attached.
func parseFile(s string) (*trace.File, bool) {
	rest, ok := strings.CutPrefix(s, "& ")
	if !ok {
		return nil, false
	}
	name, path, ok := strings.Cut(rest, " : ")
	if !ok {
		return nil, false
	}
	return &trace.File{Name: name, Path: path}, true
}

// parseArg reads "\t$shmid = 0x1088018".
func parseArg(s string) (trace.Arg, bool) {
	rest, ok := strings.CutPrefix(s, "\t$")
	if !ok {
		return trace.Arg{}, false
	}
	name, val, ok := strings.Cut(rest, " = ")
	return trace.Arg{Name: name, Value: val}, ok
}

// parseFrame reads "\t0x804854a" or "\t0x804854a main() at x.c:3".
func parseFrame(s string) (trace.Frame, bool) {
	rest, ok := strings.CutPrefix(s, "\t0x")
	if !ok {
		return trace.Frame{}, false
	}
	addr, text, _ := strings.Cut(rest, " ")
	a, ok := parseHex(addr, 64)
	if !ok {
		return trace.Frame{}, false
	}
	return trace.Frame{Addr: a, Text: text}, true
}
