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
	order := o.FilterOrder
	if len(order) != len(o.Filters)+len(o.NoTrace) {
		order = append(make([]bool, len(o.Filters)), slices.Repeat([]bool{true}, len(o.NoTrace))...)
	}
	i, j := 0, 0
	for _, out := range order {
		if out {
			args = append(args, "-N", o.NoTrace[j].String())
			j++
		} else {
			args = append(args, "-F", o.Filters[i].String())
			i++
		}
	}
	for _, p := range o.Hide {
		args = append(args, "-H", p.String())
	}
	for _, p := range o.Callers {
		args = append(args, "--caller-filter", p.String())
	}
	for _, tr := range o.Triggers {
		args = append(args, "-T", tr.Text)
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
	if o.WithSyms != "" {
		args = append(args, "--with-syms", o.WithSyms)
	}
	if o.Disabled {
		args = append(args, "--disable")
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
	case "filter", "notrace", "hide", "caller-filter":
		p, err := uftrace.ParseFuncPattern(val, uftrace.PatternRegex)
		if err != nil {
			return err
		}
		switch long {
		case "filter":
			o.Filters, o.FilterOrder = append(o.Filters, p), append(o.FilterOrder, false)
		case "notrace":
			o.NoTrace, o.FilterOrder = append(o.NoTrace, p), append(o.FilterOrder, true)
		case "hide":
			o.Hide = append(o.Hide, p)
		default:
			o.Callers = append(o.Callers, p)
		}
	case "trigger":
		tr, err := uftrace.ParseTrigger(val, uftrace.PatternRegex)
		if err != nil {
			return err
		}
		if why := StageTrigger(tr); why != "" {
			return fmt.Errorf("trigger %q: %s", val, why)
		}
		o.Triggers = append(o.Triggers, tr)
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
	case "with-syms":
		o.WithSyms = val
	case "disable":
		o.Disabled = true
	default:
		return fmt.Errorf("unknown option --%s", long)
	}
	return nil
}

// StageTrigger says why the function stage cannot apply tr ("" when it
// can): it acts on what is kept of a trace (depth=, time=, size=, filter,
// notrace, hide, caller, trace, trace_on, trace_off, finish), not on how it
// is recorded (arguments, read=, recover) nor shown (backtrace, color=).
func StageTrigger(tr uftrace.Trigger) string {
	switch {
	case strings.EqualFold(tr.Module, "kernel"):
		return "rtrace traces no kernel functions"
	case len(tr.Args) > 0 || len(tr.Rets) > 0 || tr.AutoArgs:
		return "arguments are recorded with -A/-R, not filtered"
	case tr.Read != "":
		return "read= needs the counters read while recording"
	case tr.Recover:
		return "recover acts while recording"
	case tr.Backtrace || tr.Color != "":
		return "backtrace and color= are uftrace replay's: give them to uftrace replay"
	}
	return ""
}
