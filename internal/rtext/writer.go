package rtext

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"rtrace/internal/trace"
)

// Writer encodes trace items as sp-rtrace text, byte for byte as
// sp-rtrace-postproc 1.6 printed them. It implements trace.Writer. Items
// the text has no form for (*trace.Library) are skipped; rtrace's tasks,
// probes and lost counts become "## " comments.
//
// Like the original, it prints the environment (header, resource, context
// and mapping lines) first and holds module lines and comments back until
// the first call: sp-rtrace kept them as comments placed before call 1,
// which is why module lines move below the mappings when text is re-read.
type Writer struct {
	w       *bufio.Writer
	names   map[int]string // resource type names by ID
	nres    int            // resource lines written
	held    []trace.Item   // modules and comments before the first call
	started bool           // a call was written
	line    []byte
}

// NewWriter returns a Writer printing to w. Close flushes it.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: bufio.NewWriterSize(w, 64<<10), names: map[int]string{}}
}

// Write prints one item.
func (w *Writer) Write(it trace.Item) error {
	switch it := it.(type) {
	case *trace.Header:
		w.header(it)
	case *trace.Resource:
		w.nres++
		if _, ok := w.names[it.ID]; !ok {
			w.names[it.ID] = it.Name
		}
		fmt.Fprintf(w.w, "<%x> : %s (%s)", mask(it.ID), it.Name, it.Desc)
		if it.Refcount {
			w.w.WriteString(" [refcount]")
		}
		w.w.WriteByte('\n')
	case *trace.Context:
		fmt.Fprintf(w.w, "@ %x : %s\n", it.ID, it.Name)
	case *trace.Mapping:
		fmt.Fprintf(w.w, ": %s => 0x%x-0x%x\n", it.Path, it.From, it.To)
	case *trace.File:
		fmt.Fprintf(w.w, "& %s : %s\n", it.Name, it.Path)
	case *trace.Call:
		w.start()
		w.call(it)
		w.frames(it.Frames)
	case *trace.Module, *trace.Comment, *trace.Task, *trace.Probe, *trace.Lost, *trace.Usage:
		if !w.started {
			w.held = append(w.held, it)
			return nil
		}
		w.note(it)
	case nil:
		return fmt.Errorf("rtext: writing a nil item")
	default:
		// *trace.Library (a request to the pre-processor) and item types
		// added to the model later have no text form: skipped.
	}
	return w.err()
}

// err is the first error of the underlying writer: bufio.Writer keeps it
// and returns it from any later Write, even an empty one.
func (w *Writer) err() error {
	_, err := w.w.Write(nil)
	return err
}

// mask is the bit of resource type id in masks; 0 for an ID that has none
// (trace.Resource.Mask would panic on ID 0).
func mask(id int) uint32 {
	if id < 1 || id > 32 {
		return 0
	}
	return 1 << (id - 1)
}

// WriteGroup prints calls that share one backtrace as compressed output
// does: each call with its arguments, then comment (when not empty), then
// the frames and the blank line that end the block. The calls' own Frames
// are not printed.
func (w *Writer) WriteGroup(calls []*trace.Call, comment string, frames []trace.Frame) error {
	w.start()
	for _, c := range calls {
		w.call(c)
	}
	if comment != "" {
		w.w.WriteString(comment)
		w.w.WriteByte('\n')
	}
	w.frames(frames)
	return w.err()
}

// Close prints what is held back and flushes. It does not close the
// underlying writer.
func (w *Writer) Close() error {
	w.start()
	return w.w.Flush()
}

// start ends the environment: the held module lines and comments go out.
func (w *Writer) start() {
	if w.started {
		return
	}
	w.started = true
	for _, it := range w.held {
		w.note(it)
	}
	w.held = nil
}

// header prints the header line: "key=value, " pairs in sp-rtrace's order,
// each only when known, with the trailing ", ".
func (w *Writer) header(h *trace.Header) {
	b := w.line[:0]
	field := func(key, val string) {
		b = append(b, key...)
		b = append(b, '=')
		b = append(b, val...)
		b = append(b, ", "...)
	}
	version := h.Version
	if version == "" {
		version = "2.0"
	}
	field("version", version)
	if h.Arch != "" {
		field("arch", h.Arch)
	}
	if !h.Time.IsZero() {
		t := h.Time
		field("timestamp", fmt.Sprintf("%d.%d.%d %02d:%02d:%02d", t.Year(), int(t.Month()), t.Day(), t.Hour(), t.Minute(), t.Second()))
	}
	if h.Process != "" {
		field("process", h.Process)
	}
	field("pid", strconv.Itoa(h.Pid))
	if len(h.Filter) > 0 {
		field("filter", strings.Join(h.Filter, "|"))
	}
	if h.Depth >= 0 {
		field("backtrace depth", strconv.Itoa(h.Depth))
	}
	if h.Origin != "" {
		field("origin", h.Origin)
	}
	b = append(b, '\n')
	w.w.Write(b)
	w.line = b
}

// call prints a call line and its arguments.
func (w *Writer) call(c *trace.Call) {
	b := strconv.AppendInt(w.line[:0], int64(c.Index), 10)
	b = append(b, ". "...)
	if c.Context != 0 {
		b = append(b, '@')
		b = strconv.AppendUint(b, uint64(c.Context), 16)
		b = append(b, ' ')
	}
	if c.Time >= 0 {
		b = append(b, '[')
		b = append(b, formatClock(c.Time)...)
		b = append(b, "] "...)
	}
	b = append(b, c.Name...)
	if name, ok := w.names[c.Res]; ok && w.nres > 1 {
		b = append(b, '<')
		b = append(b, name...)
		b = append(b, '>')
	}
	if c.Alloc {
		b = append(b, '(')
		b = strconv.AppendUint(b, c.Size, 10)
		b = append(b, ") = 0x"...)
	} else {
		b = append(b, "(0x"...)
	}
	b = strconv.AppendUint(b, c.ID, 16)
	if !c.Alloc {
		b = append(b, ')')
	}
	b = append(b, '\n')
	for _, a := range c.Args {
		b = append(b, "\t$"...)
		b = append(b, a.Name...)
		b = append(b, " = "...)
		b = append(b, a.Value...)
		b = append(b, '\n')
	}
	w.w.Write(b)
	w.line = b
}

// frames prints a backtrace block and the blank line that ends it.
func (w *Writer) frames(fs []trace.Frame) {
	b := w.line[:0]
	for _, f := range fs {
		b = append(b, "\t0x"...)
		b = strconv.AppendUint(b, f.Addr, 16)
		if f.Text != "" {
			b = append(b, ' ')
			b = append(b, f.Text...)
		}
		b = append(b, '\n')
	}
	b = append(b, '\n')
	w.w.Write(b)
	w.line = b
}

// note prints a module line or a comment. rtrace's own events (tasks,
// probes, lost counts) have no sp-rtrace form: they become "## " comments,
// which survive a re-read (as comments).
func (w *Writer) note(it trace.Item) {
	switch it := it.(type) {
	case *trace.Module:
		fmt.Fprintf(w.w, "## tracing module: [%x] %s (%d.%d)\n", it.ID, it.Name, it.Major, it.Minor)
	case *trace.Comment:
		w.w.WriteString(it.Text)
		w.w.WriteByte('\n')
	case *trace.Task:
		w.w.WriteString(taskLine(it))
		w.w.WriteByte('\n')
	case *trace.Probe:
		fmt.Fprintf(w.w, "## probe %s (tid %d) at %d ns: %s\n", it.Name, it.Tid, it.Time, strings.Join(it.Args, ", "))
	case *trace.Lost:
		fmt.Fprintf(w.w, "## lost %d events\n", it.Count)
	case *trace.Usage:
		w.w.WriteString(usageLine(it))
		w.w.WriteByte('\n')
	}
}
