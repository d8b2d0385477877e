// Package tracer is rtrace's ptrace engine: it starts a program under
// ptrace, plants int3 breakpoints at function entries, hijacks return
// addresses through one shared return breakpoint, follows threads, forks and
// execs, and hands timestamped records to a Sink. It formats nothing and
// resolves no symbols beyond finding the addresses it patches.
package tracer
