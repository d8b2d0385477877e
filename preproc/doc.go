// Package preproc is the pre-processor stage: it takes the tracer's wire
// stream (from a named pipe, a pipe or a file), keeps the target's memory
// maps current (a NLIB packet makes it rescan /proc/<pid>/maps and send
// MMAP packets), and stores the stream as a raw <pid>-<n>.rtrace file that
// never overwrites another, or hands it to a post-processor.
package preproc
