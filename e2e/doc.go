// Package e2e holds the end-to-end tests: they build the rtrace binary and
// the C fixtures of testdata/, run them as a user would, and check the
// results with the real uftrace.
package e2e
