// Package bench measures rtrace against the ptrace floor and its peers. The
// benchmarks run real programs; `make bench` runs them once and prints the
// ratios the issues set as targets.
package bench
