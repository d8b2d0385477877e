package tracer

import _ "unsafe" // for go:linkname

// nanotime is the runtime's CLOCK_MONOTONIC reading through the vDSO
// (runtime/time_nofake.go), without the syscall unix.ClockGettime makes.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// now returns CLOCK_MONOTONIC nanoseconds, the clock uftrace uses.
func now() uint64 { return uint64(nanotime()) }

// Now is the clock of the times the tracer hands its sinks (CLOCK_MONOTONIC
// nanoseconds), for what a sink writes of its own.
func Now() uint64 { return now() }
