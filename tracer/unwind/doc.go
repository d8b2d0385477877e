// Package unwind computes backtraces of a stopped traced process: DWARF CFI
// from each module's .eh_frame and .debug_frame (delve's pkg/dwarf/frame),
// falling back to the rbp chain where no FDE covers a pc. x86-64 only.
package unwind
