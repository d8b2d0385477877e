// Package launcher runs what `rtrace record` and `rtrace attach` do: it
// starts the tracer and wires its output through the pipeline stages to the
// sinks, maps signals (Ctrl-C, SIGTERM) and passes the target's exit status on.
package launcher
