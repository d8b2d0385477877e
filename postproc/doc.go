// Package postproc is rtrace's post-processor: the filters of sp-rtrace's
// sp-rtrace-postproc (leaks, compress, context, resource, backtrace depth,
// include/exclude, call address, resolve) applied to a stream of trace
// items on their way from a trace.Reader to a trace.Writer.
package postproc
