// Package resolver turns addresses into names: ELF symbols and DWARF source
// lines. For sp-rtrace backtraces a Resolver annotates frames within the
// trace's mappings ("main() at leaky.c:12"); for uftrace.data output it
// produces the .sym and .dbg contents of a module.
package resolver
