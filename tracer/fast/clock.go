package fast

import (
	"bytes"
	"errors"
	"os"
	"sync"
	"time"
	_ "unsafe" // for go:linkname
)

//go:linkname nanotime runtime.nanotime
func nanotime() int64

func rdtsc() uint64

// Clock converts the TSC readings the stubs write to CLOCK_MONOTONIC
// nanoseconds, the clock of uftrace and of rtrace's other records: ns =
// ns0 + (tsc - tsc0) * nsPerTick. The ratio is measured between NewClock
// and the first conversion (at least minInterval apart), then fixed: a
// fixed ratio keeps converted times monotonic.
type Clock struct {
	tsc0      uint64
	ns0       int64
	once      sync.Once
	nsPerTick float64
}

// minInterval bounds the calibration's error: two readings of the pair
// agree within about 100 ns, 1e-5 of it.
const minInterval = 10 * time.Millisecond

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
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return err
	}
	if !bytes.Contains(info, []byte(" constant_tsc")) || !bytes.Contains(info, []byte(" nonstop_tsc")) {
		return ErrUnstableTSC
	}
	return nil
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

func (c *Clock) calibrate() {
	if d := time.Duration(nanotime() - c.ns0); d < minInterval {
		time.Sleep(minInterval - d)
	}
	tsc1, ns1 := pair()
	c.nsPerTick = float64(ns1-c.ns0) / float64(tsc1-c.tsc0)
}

// Nanos converts a TSC reading.
func (c *Clock) Nanos(tsc uint64) uint64 { return c.Scale().Nanos(tsc) }

// Scale is the conversion, fixed once calibrated: its Nanos inlines in a
// loop over a batch.
type Scale struct {
	tsc0      uint64
	ns0       int64
	nsPerTick float64
}

// Scale returns the calibrated conversion (the first call may wait for
// the calibration).
func (c *Clock) Scale() Scale {
	c.once.Do(c.calibrate)
	return Scale{c.tsc0, c.ns0, c.nsPerTick}
}

// Nanos converts a TSC reading.
func (s Scale) Nanos(tsc uint64) uint64 {
	return uint64(s.ns0 + int64(float64(int64(tsc-s.tsc0))*s.nsPerTick))
}
