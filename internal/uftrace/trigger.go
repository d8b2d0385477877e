package uftrace

import (
	"fmt"
	"strconv"
	"strings"
)

// Trigger is one -T FUNC@ACTION[,ACTION...] of uftrace (uftrace-replay(1),
// TRIGGERS; the actions as utils/filter.c's setup_trigger_action reads
// them: a prefix, compared without case, and a word that is no action names
// a module).
type Trigger struct {
	Text   string // as given
	Func   Pattern
	Module string // FUNC@MODULE,...: only that module's functions ("": any)

	Depth    int // depth=N: N levels from FUNC (HasDepth)
	HasDepth bool
	Time     uint64 // time=T: calls shorter than T left out, from FUNC down (HasTime)
	HasTime  bool
	Size     uint64 // size=N (HasSize)
	HasSize  bool

	Filter   bool // as -F FUNC
	NoTrace  bool // as -N FUNC
	Caller   bool // as -C FUNC
	Hide     bool // as -H FUNC
	Trace    bool // "trace": shown whatever the time filter says
	TraceOn  bool // "trace_on" (trace-on, traceon): tracing resumes at FUNC
	TraceOff bool // "trace_off": tracing stops at FUNC
	Finish   bool // tracing ends for good at FUNC

	Backtrace bool   // the callers of FUNC are shown (by uftrace replay)
	Recover   bool   // the return addresses are put back at FUNC
	Color     string // color=C (a display matter)
	Read      string // read=WHAT: counters read at FUNC's entry and exit
	AutoArgs  bool   // auto-args: the arguments uftrace knows for FUNC
	// Args are the argument and return value specs among the actions
	// (arg1/s, fparg1, retval/i32), as -A and -R take them after FUNC@.
	Args, Rets []string
}

// ParseTrigger reads s, one -T argument, with FUNC a pattern of kind
// (PatternRegex when ""). Every action must be one uftrace knows; a word
// that is none names a module, and a second module is an error, as are a
// missing FUNC or actions, a bad depth=, time= or size=, and a trace_
// action uftrace does not know (uftrace only warns of those).
func ParseTrigger(s, kind string) (Trigger, error) {
	fn, acts, ok := strings.Cut(s, "@")
	if !ok || fn == "" || acts == "" {
		return Trigger{}, fmt.Errorf("trigger %q: want FUNC@ACTION[,ACTION...]", s)
	}
	p, err := ParsePattern(fn, kind)
	if err != nil {
		return Trigger{}, fmt.Errorf("trigger %q: %w", s, err)
	}
	tr := Trigger{Text: s, Func: p}
	for _, a := range strings.Split(acts, ",") {
		if err := tr.action(a); err != nil {
			return Trigger{}, fmt.Errorf("trigger %q: %w", s, err)
		}
	}
	return tr, nil
}

// action reads one action of a trigger into tr.
func (tr *Trigger) action(a string) error {
	has := func(prefix string) bool { return len(a) >= len(prefix) && strings.EqualFold(a[:len(prefix)], prefix) }
	value := func(prefix string) string { return a[len(prefix):] }
	switch {
	case a == "":
		return fmt.Errorf("an empty action")
	case has("arg"), has("fparg"):
		tr.Args = append(tr.Args, a)
	case has("retval"):
		tr.Rets = append(tr.Rets, a)
	case has("filter"):
		tr.Filter = true
	case has("notrace"):
		tr.NoTrace = true
	case has("depth="):
		n, err := strconv.Atoi(value("depth="))
		if err != nil || n < 0 {
			return fmt.Errorf("%s: want a depth from 0 up", a)
		}
		tr.Depth, tr.HasDepth = n, true
	case has("time="):
		t, err := ParseTime(value("time="))
		if err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
		tr.Time, tr.HasTime = t, true
	case has("size="):
		n, err := strconv.ParseUint(value("size="), 10, 64)
		if err != nil {
			return fmt.Errorf("%s: want a size in bytes", a)
		}
		tr.Size, tr.HasSize = n, true
	case has("caller"):
		tr.Caller = true
	case has("hide"):
		tr.Hide = true
	case has("trace"):
		rest := value("trace")
		if rest != "" && (rest[0] == '_' || rest[0] == '-') {
			rest = rest[1:]
		}
		switch {
		case rest == "":
			tr.Trace = true
		case strings.EqualFold(rest, "on"):
			tr.TraceOn = true
		case strings.EqualFold(rest, "off"):
			tr.TraceOff = true
		default:
			return fmt.Errorf("%s: want trace, trace_on or trace_off", a)
		}
	case has("finish"):
		tr.Finish = true
	case has("read="):
		tr.Read = value("read=")
	case has("color="):
		tr.Color = value("color=")
	case has("backtrace"):
		tr.Backtrace = true
	case has("recover"):
		tr.Recover = true
	case has("auto-args"):
		tr.AutoArgs = true
	case tr.Module != "":
		return fmt.Errorf("%s: no such action, and the trigger names a module already (%s)", a, tr.Module)
	default:
		tr.Module = a
	}
	return nil
}
