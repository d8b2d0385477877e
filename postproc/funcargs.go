package postproc

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kballard/go-shellquote"

	"rtrace/internal/uftrace"
)

// String is o in uftrace's option syntax, quoted as a shell would
// ("-F '^parse' -D 3 -t 1000"): what a function trace's stream header
// carries, read back by ParseFuncOptionString.
func (o FuncOptions) String() string {
	var args []string
	for _, p := range o.Filters {
		args = append(args, "-F", p.String())
	}
	for _, p := range o.NoTrace {
		args = append(args, "-N", p.String())
	}
	if o.Depth > 0 {
		args = append(args, "-D", strconv.Itoa(o.Depth))
	}
	if o.Threshold > 0 {
		args = append(args, "-t", strconv.FormatUint(o.Threshold, 10))
	}
	if o.MaxStack > 0 {
		args = append(args, "--max-stack", strconv.Itoa(o.MaxStack))
	}
	if len(o.Tids) > 0 {
		tids := make([]string, 0, len(o.Tids))
		for t := range o.Tids {
			tids = append(tids, strconv.Itoa(t))
		}
		slices.Sort(tids)
		args = append(args, "--tid", strings.Join(tids, ","))
	}
	return shellquote.Join(args...)
}

// ParseFuncOptionString reads what FuncOptions.String writes.
func ParseFuncOptionString(s string) (FuncOptions, error) {
	var o FuncOptions
	args, err := shellquote.Split(s)
	if err != nil {
		return o, fmt.Errorf("options %q: %w", s, err)
	}
	for i := 0; i < len(args); i++ {
		if i+1 >= len(args) {
			return o, fmt.Errorf("option %s needs a value", args[i])
		}
		name, v := args[i], args[i+1]
		i++
		switch name {
		case "-F", "-N":
			p, err := uftrace.ParsePattern(v, uftrace.PatternRegex)
			if err != nil {
				return o, fmt.Errorf("%s: %w", name, err)
			}
			if name == "-F" {
				o.Filters = append(o.Filters, p)
			} else {
				o.NoTrace = append(o.NoTrace, p)
			}
		case "-D", "--max-stack":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return o, fmt.Errorf("%s %q: want a depth", name, v)
			}
			if name == "-D" {
				o.Depth = n
			} else {
				o.MaxStack = n
			}
		case "-t":
			if o.Threshold, err = uftrace.ParseTime(v); err != nil {
				return o, fmt.Errorf("-t: %w", err)
			}
		case "--tid":
			for _, f := range strings.Split(v, ",") {
				tid, err := strconv.Atoi(f)
				if err != nil || tid <= 0 {
					return o, fmt.Errorf("--tid %q: want thread ids", v)
				}
				if o.Tids == nil {
					o.Tids = map[int]bool{}
				}
				o.Tids[tid] = true
			}
		default:
			return o, fmt.Errorf("unknown option %s", name)
		}
	}
	return o, nil
}
