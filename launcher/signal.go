package launcher

import (
	"fmt"
	"rtrace/tracer"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ParseSignal reads a signal as SIGUSR2, USR2 or 12.
func ParseSignal(s string) (unix.Signal, error) {
	if n, err := strconv.Atoi(s); err == nil {
		if n <= 0 || n > 64 {
			return 0, fmt.Errorf("%q is not a signal number", s)
		}
		return unix.Signal(n), nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		switch sig {
		case unix.SIGKILL, unix.SIGSTOP:
			return 0, fmt.Errorf("%s cannot be intercepted", name)
		}
		return sig, nil
	}
	return 0, fmt.Errorf("unknown signal %q (e.g. SIGUSR1, USR2, 12)", s)
}

// signalTriggers reads uftrace's --signal SIG@ACTION[,ACTION...] triggers:
// the actions are trace_on (trace-on, traceon), trace_off and finish, as
// uftrace's --signal takes them. As uftrace applies a signal's actions
// (on, then off, then finish), finish beats trace_off, which beats
// trace_on; a later --signal for the same signal replaces an earlier one.
func signalTriggers(specs []string) (map[unix.Signal]tracer.SignalAction, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	out := map[unix.Signal]tracer.SignalAction{}
	for _, spec := range specs {
		name, acts, ok := strings.Cut(spec, "@")
		if !ok || acts == "" {
			return nil, &UsageError{fmt.Sprintf("--signal %q: want SIGNAL@ACTION (trace_on, trace_off or finish)", spec)}
		}
		sig, err := ParseSignal(name)
		if err != nil {
			return nil, &UsageError{fmt.Sprintf("--signal %q: %v", spec, err)}
		}
		var act tracer.SignalAction // TraceOn < TraceOff < Finish
		for _, a := range strings.Split(acts, ",") {
			var this tracer.SignalAction
			switch strings.ToLower(strings.NewReplacer("-", "_").Replace(a)) {
			case "trace_on", "traceon":
				this = tracer.TraceOn
			case "trace_off", "traceoff":
				this = tracer.TraceOff
			case "finish":
				this = tracer.Finish
			default:
				return nil, &UsageError{fmt.Sprintf("--signal %q: %q: the actions of a signal are trace_on, trace_off and finish", spec, a)}
			}
			act = max(act, this)
		}
		out[sig] = act
	}
	return out, nil
}

// ListModules prints the resource modules: name, resource types and
// functions.
func ListModules(w interface{ Write([]byte) (int, error) }) {
	for _, m := range tracer.ResModules() {
		fmt.Fprintf(w, "%s: %s\n", m.Name, m.Desc)
		var res []string
		for _, r := range m.Resources {
			s := r.Name + " (" + r.Desc + ")"
			if r.Refcount {
				s += " [refcount]"
			}
			res = append(res, s)
		}
		fmt.Fprintf(w, "  resources: %s\n", strings.Join(res, ", "))
		var fns []string
		for _, f := range m.Funcs {
			if n := f.Display(); !slices.Contains(fns, n) {
				fns = append(fns, n)
			}
		}
		if len(fns) == 0 {
			fns = []string{"those --audit (sp-rtrace: -a) names"}
		}
		fmt.Fprintf(w, "  functions: %s\n", strings.Join(fns, ", "))
	}
}
