// Package testutil builds C fixtures for tests and finds the tools they
// need (gcc, uftrace), failing instead of skipping when CI=true.
package testutil
