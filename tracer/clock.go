package tracer

import _ "unsafe" // for go:linkname

// nanotime is the runtime's CLOCK_MONOTONIC reading through the vDSO
// (runtime/time_nofake.go), without the syscall unix.ClockGettime makes.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// now returns CLOCK_MONOTONIC nanoseconds, the clock uftrace uses.
func now() uint64 { return uint64(nanotime()) }
