package rtext

import (
	"math"
	"strconv"
	"strings"
	"time"

	"rtrace/internal/trace"
)

// parseCall reads a call line:
//
//	<index>. [@<ctx hex> ][[HH:MM:SS.mmm] ]<name>[<restype>](<size>) = 0x<id>
//	<index>. [@<ctx hex> ][[HH:MM:SS.mmm] ]<name>[<restype>](0x<id>)
//
// Names may hold "::", "<" and "(": the argument list starts at the last
// "(". A trailing "<...>" is the resource type only when it names one of
// types (otherwise it belongs to the name, as in "std::allocator<int>");
// a call without one is of the first type, as sp-rtrace writes the type
// only when there are several.
func parseCall(s string, types []*trace.Resource) (*trace.Call, bool) {
	idx, rest, ok := strings.Cut(s, ". ")
	if !ok {
		return nil, false
	}
	index, err := strconv.Atoi(idx)
	if err != nil {
		return nil, false
	}
	c := &trace.Call{Index: index, Time: -1}

	// "@0 " is not taken for a context: the writer leaves a zero context
	// out, so the text would not read back the same.
	if ctx, after, ok := strings.Cut(rest, " "); ok && strings.HasPrefix(ctx, "@") {
		if v, ok := parseHex(ctx[1:], 32); ok && v != 0 {
			c.Context, rest = uint32(v), after
		}
	}
	if stamp, after, ok := strings.Cut(rest, " "); ok && strings.HasPrefix(stamp, "[") {
		if d, ok := parseClock(stamp); ok {
			c.Time, rest = d, after
		}
	}

	lp := strings.LastIndexByte(rest, '(')
	if lp < 0 {
		return nil, false
	}
	name, args := rest[:lp], rest[lp:]
	name, c.Res = splitType(name, types)
	if name == "" {
		return nil, false
	}
	c.Name = name

	if id, ok := strings.CutPrefix(args, "(0x"); ok && strings.HasSuffix(id, ")") {
		c.ID, ok = parseHex(id[:len(id)-1], 64)
		return c, ok
	}
	size, id, ok := strings.Cut(args[1:], ") = 0x")
	if !ok {
		return nil, false
	}
	c.Alloc = true
	var ok1, ok2 bool
	c.Size, ok1 = parseSize(size)
	c.ID, ok2 = parseHex(id, 64)
	return c, ok1 && ok2
}

// splitType splits "name<type>" when type is one of types (the shortest,
// thus the last "<", when several fit). Checking the known names, rather
// than every "<" of the name, bounds the work on hostile lines.
func splitType(name string, types []*trace.Resource) (string, int) {
	id, best := 0, -1
	if len(types) > 0 {
		id = types[0].ID
	}
	if !strings.HasSuffix(name, ">") {
		return name, id
	}
	for _, t := range types {
		n := len(t.Name)
		if n == 0 || n+2 > len(name) || name[len(name)-n-2] != '<' || name[len(name)-n-1:len(name)-1] != t.Name {
			continue
		}
		if best < 0 || n < best {
			best, id = n, t.ID
		}
	}
	if best < 0 {
		return name, id
	}
	return name[:len(name)-best-2], id
}

// parseSize reads a decimal size. sp-rtrace printed it with %d, so a
// negative number means a huge unsigned one.
func parseSize(s string) (uint64, bool) {
	if s == "" || s[0] == '+' {
		return 0, false
	}
	if v, err := strconv.ParseUint(s, 10, 64); err == nil {
		return v, true
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return uint64(v), err == nil && s[0] == '-'
}

// parseClock reads "[14:54:26.319]" into the time since midnight.
func parseClock(s string) (time.Duration, bool) {
	if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' {
		return 0, false
	}
	hms, msec, ok := strings.Cut(s[1:len(s)-1], ".")
	if !ok {
		return 0, false
	}
	f, ok1 := splitInts(hms, ":", 3)
	ms, ok2 := smallUint(msec)
	if !ok1 || !ok2 {
		return 0, false
	}
	total := ((int64(f[0])*60+int64(f[1]))*60+int64(f[2]))*1000 + int64(ms)
	if total > math.MaxInt64/int64(time.Millisecond) {
		return 0, false
	}
	return time.Duration(total) * time.Millisecond, true
}

// formatClock prints a time since midnight as "14:54:26.319".
func formatClock(d time.Duration) string {
	ms := int64(d / time.Millisecond)
	return pad(ms/3600000, 2) + ":" + pad(ms/60000%60, 2) + ":" + pad(ms/1000%60, 2) + "." + pad(ms%1000, 3)
}

// pad prints v in decimal with at least n digits.
func pad(v int64, n int) string {
	s := strconv.FormatInt(v, 10)
	for len(s) < n {
		s = "0" + s
	}
	return s
}
