package tracer

import (
	"os"

	"golang.org/x/sys/unix"

	"rtrace/internal/elfx"
	"rtrace/internal/uftrace"
	"rtrace/tracer/fast"
	"rtrace/tracer/fast/drain"
)

// Arguments and return values recorded in the process (docs/FAST-PATH.md,
// "Arguments and return values"): a function whose -A/-R specs need only
// its integer argument registers and its return value gets a stub that
// writes them into the ring beside its ENTRY and EXIT (args.S); the
// drain makes the payloads the tracer makes at a stop (values).

// argsDesc decides, for the planner, whether function c at addr, which
// has specs, gets a stub that records their values in the process, and
// returns its descriptor (argsDescFor).
func (t *Tracer) argsDesc(f *elfx.File, c cand, addr uint64) (fast.Desc, bool) {
	if c.res != nil || t.cfg.Reads != nil && t.cfg.Reads(c.name) != 0 || t.cfg.Specs == nil {
		return fast.Desc{}, false
	}
	args, rets := t.cfg.Specs(f, c.name, c.specValue())
	return t.argsDescFor(args, rets, addr)
}

// argsDescFor returns the descriptor of the stub of the function at addr
// that records its values in the process, when it has specs (args, rets)
// and every one is an integer register's (argN for N up to 6, retval)
// shown as a number, a character, a pointer or an enum. Strings, floats,
// structs, stack words and explicit locations are read at stops, as are
// the counters of -T FUNC@read= and a resource function's calls.
func (t *Tracer) argsDescFor(args, rets []uftrace.ArgSpec, addr uint64) (fast.Desc, bool) {
	if t.drain == nil || argsAtStops {
		return fast.Desc{}, false
	}
	if len(args) == 0 && len(rets) == 0 {
		return fast.Desc{}, false
	}
	n := 0
	for _, a := range args {
		if !regSpec(a) || a.Kind != uftrace.IntArg {
			return fast.Desc{}, false
		}
		n = max(n, a.Index)
	}
	for _, a := range rets {
		if !regSpec(a) || a.Kind != uftrace.RetVal {
			return fast.Desc{}, false
		}
	}
	d := fast.Desc{Fn: addr, Args: uint8(n)}
	if len(rets) > 0 {
		d.Flags |= fast.DescRet
	}
	d.ID = t.drain.AddArgFn(drain.ArgFn{Addr: addr, Args: args, Rets: rets, Payload: func(specs []uftrace.ArgSpec, regs *unix.PtraceRegs) []byte {
		return t.values(nil, specs, regs) // registers only: no thread to read
	}})
	return d, true
}

// argsAtStops (RTRACE_ARGS=stops) keeps every function with specs on
// stops: the reference the stubs' values equal (the e2e tests compare).
var argsAtStops = os.Getenv("RTRACE_ARGS") == "stops"

// regSpec reports whether a's value is an integer register's that values
// shows without reading the process: argN (N up to 6) or retval, no
// location, not a string, a float or a struct.
func regSpec(a uftrace.ArgSpec) bool {
	if a.Loc != "" || a.Size > 8 {
		return false
	}
	switch a.Fmt {
	case 's', 'S', 't', 'f':
		return false
	}
	switch a.Kind {
	case uftrace.IntArg:
		return a.Index >= 1 && a.Index <= 6
	case uftrace.RetVal:
		return true
	}
	return false
}
