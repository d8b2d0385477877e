// Package ptrace is the only code in rtrace that calls ptrace(2). The kernel
// accepts requests for a tracee only from the thread that attached it, so
// every request runs on one locked OS thread (see Thread).
package ptrace
