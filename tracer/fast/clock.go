package fast

import (
	"bytes"
	"errors"
	"math"
	"math/bits"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
	_ "unsafe" // for go:linkname
)

//go:linkname nanotime runtime.nanotime
func nanotime() int64

func rdtsc() uint64

// Nanotime is CLOCK_MONOTONIC in nanoseconds, as the Go runtime reads it
// (the clock the conversions give).
func Nanotime() int64 { return nanotime() }

// ReadTSC reads the TSC once every instruction before it has completed,
// and before any after it starts (lfence, Intel SDM vol. 2, RDTSC): what
// the program wrote to memory before a stub read the TSC at an earlier
// value is visible to the loads that follow.
func ReadTSC() uint64

// Clock converts the TSC readings the stubs write to CLOCK_MONOTONIC
// nanoseconds, the clock of uftrace and of rtrace's other records. The
// conversion is piecewise linear and continuous: the first piece's ratio
// is measured from NewClock to the first conversion (at least
// firstInterval later); then, each time the run has lasted four times
// longer, the ratio is measured again from NewClock, for a piece that
// starts where the previous one ends. Each piece is more precise than
// the last, and converted times never jump.
type Clock struct {
	mu   sync.Mutex
	tsc0 uint64 // the pair every ratio is measured from
	ns0  int64
	cur  Scale // the piece in use
	next int64 // nanotime at which the next piece starts (0: not calibrated)
}

// firstInterval bounds the first piece's error: two readings of a pair
// agree within about 100 ns, 5e-5 of it. The first conversion is made
// when the program has run (5 ms or more after NewClock): waiting for a
// longer interval made the drain wait, and a ring of 2^16 records filled
// meanwhile and held the program up.
const firstInterval = 2 * time.Millisecond

// pair reads the TSC and the clock together: the TSC reading is the
// midpoint of two around the clock's.
func pair() (uint64, int64) {
	best := ^uint64(0)
	var tsc uint64
	var ns int64
	for range 5 {
		a := rdtsc()
		n := nanotime()
		b := rdtsc()
		if b-a < best {
			best, tsc, ns = b-a, a+(b-a)/2, n
		}
	}
	return tsc, ns
}

// ErrUnstableTSC: the CPU's TSC does not tick at a constant rate through
// frequency changes and idle states, so it cannot be a clock.
var ErrUnstableTSC = errors.New("the CPU's TSC is not constant and nonstop (no constant_tsc and nonstop_tsc in /proc/cpuinfo)")

// CheckTSC reports whether the TSC can serve as the stubs' clock
// (ErrUnstableTSC when not).
func CheckTSC() error {
	ok, err := cpuHas("constant_tsc", "nonstop_tsc")
	if err == nil && !ok {
		err = ErrUnstableTSC
	}
	return err
}

// HasRDTSCP reports whether the CPU has rdtscp, which the stubs read the
// CPU with (-W cpu: the state's WATCH word) and a resource call's time
// (NOWTSC: after the loads before it).
func HasRDTSCP() bool {
	ok, _ := cpuHas("rdtscp")
	return ok
}

// cpuHas reports whether /proc/cpuinfo's flags list each of flags.
func cpuHas(flags ...string) (bool, error) {
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return false, err
	}
	for _, line := range bytes.Split(info, []byte("\n")) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok || string(bytes.TrimSpace(k)) != "flags" {
			continue
		}
		have := strings.Fields(string(v))
		for _, f := range flags {
			if !slices.Contains(have, f) {
				return false, nil
			}
		}
		return true, nil
	}
	return false, nil
}

// NewClock checks that the TSC is usable as a clock and starts measuring
// its rate.
func NewClock() (*Clock, error) {
	if err := CheckTSC(); err != nil {
		return nil, err
	}
	c := &Clock{}
	c.tsc0, c.ns0 = pair()
	return c, nil
}

// FixedClock is a clock that converts at nsPerTick from TSC 0 and never
// measures again: for tests that compare times converted at different
// moments.
func FixedClock(nsPerTick float64) *Clock {
	return &Clock{cur: newScale(0, 0, nsPerTick), next: math.MaxInt64}
}

// Nanos converts a TSC reading.
func (c *Clock) Nanos(tsc uint64) uint64 { return c.Scale().Nanos(tsc) }

// Scale is one piece of the conversion: its Nanos inlines in a loop over
// a batch.
type Scale struct {
	tsc0      uint64
	ns0       int64
	nsPerTick float64
	// whole and frac are nsPerTick's integer part and its fraction in
	// 0.64 fixed point, both exact (a float64 of at least 2^-11 has no
	// bit below 2^-64): Nanos multiplies in integers, without converting
	// to floating point and back (11% of the drain's time a resource
	// call did that), and truncates the exact product.
	whole, frac uint64
}

// newScale is the piece from (tsc0, ns0) at nsPerTick.
func newScale(tsc0 uint64, ns0 int64, nsPerTick float64) Scale {
	s := Scale{tsc0: tsc0, ns0: ns0, nsPerTick: nsPerTick}
	if nsPerTick > 0 && nsPerTick < 1<<32 {
		w := math.Floor(nsPerTick)
		s.whole, s.frac = uint64(w), uint64(math.Ldexp(nsPerTick-w, 64))
	}
	return s
}

// Scale returns the conversion in use (the first call may wait for the
// first interval; one that starts a new piece reads the clocks).
func (c *Clock) Scale() Scale {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.next == 0 {
		if d := time.Duration(nanotime() - c.ns0); d < firstInterval {
			time.Sleep(firstInterval - d)
		}
		tsc, ns := pair()
		c.cur = newScale(c.tsc0, c.ns0, float64(ns-c.ns0)/float64(tsc-c.tsc0))
		c.next = ns + 3*(ns-c.ns0)
	} else if nanotime() >= c.next {
		c.refine()
	}
	return c.cur
}

// refine starts a new piece at the current TSC, where the current one
// ends, with the ratio measured over the whole run.
func (c *Clock) refine() {
	tsc, ns := pair()
	c.cur = newScale(tsc, int64(c.cur.Nanos(tsc)), float64(ns-c.ns0)/float64(tsc-c.tsc0))
	c.next = ns + 3*(ns-c.ns0)
}

// Ticks converts a duration in nanoseconds to TSC ticks.
func (s Scale) Ticks(ns uint64) uint64 {
	if s.nsPerTick <= 0 {
		return ns
	}
	return uint64(float64(ns) / s.nsPerTick)
}

// Nanos converts a TSC reading.
func (s Scale) Nanos(tsc uint64) uint64 {
	d := tsc - s.tsc0
	if int64(d) < 0 {
		// Before the piece (a record read after the piece began).
		return uint64(s.ns0 - int64(s.ticksNanos(-d)))
	}
	return uint64(s.ns0 + int64(s.ticksNanos(d)))
}

// ticksNanos is n ticks in nanoseconds, truncated.
func (s Scale) ticksNanos(n uint64) uint64 {
	hi, _ := bits.Mul64(n, s.frac)
	return n*s.whole + hi
}
