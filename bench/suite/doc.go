// Package suite is rtrace's measuring stick: it builds the workloads
// (rtrace's own C fixtures and real programs from Debian's source
// packages), runs each under rtrace and under the tools users would pick
// instead, several times, and reports what it measured side by side, as
// ratios, with the checks that the traces are right. `make bench` runs it
// through bench/run. It never asserts a speed: benchmarks report, tests
// assert.
package suite
