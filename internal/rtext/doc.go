// Package rtext reads and writes the sp-rtrace text format: a header line,
// module, resource, context and mapping lines, then numbered calls with
// their arguments and backtraces, as sp-rtrace-postproc prints them.
package rtext
