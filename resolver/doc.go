// Package resolver turns addresses into names: ELF symbols and DWARF source
// lines. For uftrace.data output it produces the .sym and .dbg contents of
// a module.
package resolver
