package drain

import (
	"errors"

	"rtrace/internal/trace"
	"rtrace/internal/wire"
)

// Sink receives the function records the rings hold: the tracer's
// function sink (which has more methods; the drain calls these).
type Sink interface {
	// Records takes a batch of one thread's records, in time order. The
	// drain reuses recs and their payloads after the call returns.
	Records(tid int, recs []trace.Rec) error
	// Exit: the task ended (the process too when tid is its pid), made
	// after its records (Drainer.Exit).
	Exit(time uint64, tid int) error
}

// ResSink receives the resource calls the rings hold.
type ResSink interface {
	// Call reports a resource call, at its return. c is the caller's
	// after Call returns (the drain reuses it): Call keeps nothing of it
	// but its frames, which nothing changes.
	Call(c *trace.Call) error
	// Lost reports n resource calls of thread tid dropped on a full ring.
	Lost(tid int, n uint64) error
}

// BatchSink is a ResSink that also takes a thread's calls a batch at a
// time: the calls of one ring read in one call, through the sink's layers
// once for them all.
type BatchSink interface {
	ResSink
	// Calls reports calls of one thread, in order, as Call reports each;
	// the drain reuses cs after it returns.
	Calls(cs []trace.Call) error
}

// LaneSink is a BatchSink that lends the drain the wire writer a thread's
// calls go to: the drain writes the calls it can (no arguments) into it
// itself, with the function and backtrace numbers it keeps
// (docs/FAST-PATH.md, "The drain's lane"), and hands the others to Calls.
type LaneSink interface {
	BatchSink
	// Lane is the writer of tid's calls now; nil: none (Calls then).
	// Valid until the drain's next call of the sink's methods.
	Lane(tid int) *wire.Writer
	// Laned reports n calls written to a lane, and the error that ended
	// its use, if any (the sink handles it as Calls would, and returns
	// what Calls would have).
	Laned(n int, err error) error
}

// ErrStreamClosed is what a sink returns once its stream is gone (a
// listener that went away): the calls go nowhere until the next window.
var ErrStreamClosed = errors.New("stream closed")
