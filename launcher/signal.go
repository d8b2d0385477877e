package launcher

import (
	"fmt"
	"rtrace/tracer"
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
			n := f.Name
			if n == "" {
				n = f.Sym
			}
			fns = append(fns, n)
		}
		fmt.Fprintf(w, "  functions: %s\n", strings.Join(fns, ", "))
	}
}
