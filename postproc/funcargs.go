package postproc

import (
	"fmt"
	"os"
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
	if o.Srcline {
		args = append(args, "--srcline")
	}
	return shellquote.Join(args...)
}

// ParseFuncOptionString reads what FuncOptions.String writes, with the
// parser and table of every post-processor option.
func ParseFuncOptionString(s string) (FuncOptions, error) {
	args, err := shellquote.Split(s)
	if err != nil {
		return FuncOptions{}, fmt.Errorf("options %q: %w", s, err)
	}
	o, err := parseOptions(args, inFunc, os.ReadFile)
	return o.Funcs, err
}

// set applies the uftrace filter long ("filter", "depth", ...) with val.
func (o *FuncOptions) set(long, val string) error {
	switch long {
	case "filter", "notrace":
		p, err := uftrace.ParsePattern(val, uftrace.PatternRegex)
		if err != nil {
			return err
		}
		if long == "filter" {
			o.Filters = append(o.Filters, p)
		} else {
			o.NoTrace = append(o.NoTrace, p)
		}
	case "depth", "max-stack":
		n, err := strconv.Atoi(val)
		if err != nil || n < 1 {
			return fmt.Errorf("%q: the depth must be a number, 1 or more", val)
		}
		if long == "depth" {
			o.Depth = n
		} else {
			o.MaxStack = n
		}
	case "time-filter":
		t, err := uftrace.ParseTime(val)
		if err != nil {
			return err
		}
		o.Threshold = t
	case "tid":
		for _, f := range strings.Split(val, ",") {
			tid, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || tid <= 0 {
				return fmt.Errorf("%q: want thread ids such as 1234,1235", val)
			}
			if o.Tids == nil {
				o.Tids = map[int]bool{}
			}
			o.Tids[tid] = true
		}
	case "srcline":
		o.Srcline = true
	default:
		return fmt.Errorf("unknown option --%s", long)
	}
	return nil
}
