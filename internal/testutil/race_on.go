//go:build race

package testutil

// Race is true when the tests run with the race detector: BuildRtrace then
// builds rtrace with it too.
const Race = true
