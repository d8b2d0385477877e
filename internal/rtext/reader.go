package rtext

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"rtrace/internal/trace"
)

// MaxLine is the longest line the Reader accepts, newline included.
const MaxLine = 64 << 20

// maxTypes bounds the resource types call lines are matched against: masks
// are 32 bits, sp-rtrace has at most 32 types; more lines are hostile.
const maxTypes = 64

// SyntaxError is a line of the input the Reader cannot accept. Only the
// header line and over-long lines are errors: any other line that has no
// known form is a comment.
type SyntaxError struct {
	Line int
	Msg  string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// Reader decodes sp-rtrace text into trace items. It implements
// trace.Reader: the *trace.Header comes first, then the other items in
// the order of their lines, io.EOF at the end.
//
// As sp-rtrace's parser does, it drops lines starting with "# " (the
// summaries the post-processor adds), and gives consecutive calls that
// have no backtrace of their own the next backtrace block: compressed
// output, where a group of calls shares one backtrace, reads back so.
type Reader struct {
	r    *bufio.Reader
	line int // lines read
	buf  []byte
	err  error // sticky: returned once the queue is empty

	res     []*trace.Resource // resource types so far, for "<restype>"
	pending []*trace.Call     // calls waiting for their backtrace block
	frames  []trace.Frame     // the block being read
	queue   []trace.Item      // decoded, not yet returned
}

// NewReader returns a Reader decoding r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10)}
}

// Next returns the next item, io.EOF after the last one.
func (rd *Reader) Next() (trace.Item, error) {
	for len(rd.queue) == 0 {
		if rd.err != nil {
			return nil, rd.err
		}
		s, err := rd.readLine()
		if err != nil {
			rd.flush() // calls before an error or the end are whole
			rd.err = err
			continue
		}
		if rd.line == 1 {
			h, ok := parseHeader(s)
			if !ok {
				rd.err = &SyntaxError{Line: 1, Msg: `no sp-rtrace header ("version=2.0, ..., pid=N, ")`}
				continue
			}
			rd.queue = append(rd.queue, h)
			continue
		}
		rd.parse(s)
	}
	it := rd.queue[0]
	rd.queue[0] = nil
	rd.queue = rd.queue[1:]
	return it, nil
}

// parse decodes one line after the header, in sp-rtrace's order of tests.
func (rd *Reader) parse(s string) {
	if strings.HasPrefix(s, "# ") {
		return
	}
	if len(rd.pending) > 0 {
		if f, ok := parseFrame(s); ok {
			rd.frames = append(rd.frames, f)
			return
		}
		if a, ok := parseArg(s); ok {
			last := rd.pending[len(rd.pending)-1]
			last.Args = append(last.Args, a)
			return
		}
		// A block of frames ends at the first other line; a call without
		// frames ends at a blank line or any line that is not a call.
		if len(rd.frames) > 0 || s == "" {
			rd.flush()
		}
	}
	if s == "" {
		return
	}
	if c, ok := parseCall(s, rd.res); ok {
		rd.pending = append(rd.pending, c)
		return
	}
	rd.flush()
	rd.queue = append(rd.queue, rd.other(s))
}

// other decodes a line that is neither a call nor part of one.
func (rd *Reader) other(s string) trace.Item {
	if m, ok := parseMapping(s); ok {
		return m
	}
	if c, ok := parseContext(s); ok {
		return c
	}
	if r, ok := parseResource(s); ok {
		if len(rd.res) < maxTypes {
			rd.res = append(rd.res, r)
		}
		return r
	}
	if f, ok := parseFile(s); ok {
		return f
	}
	if m, ok := parseModule(s); ok {
		return m
	}
	if u, ok := parseUsage(s); ok {
		return u
	}
	if t, ok := parseTask(s); ok {
		return t
	}
	return &trace.Comment{Text: s}
}

// flush queues the pending calls, each with its own copy of the frames.
func (rd *Reader) flush() {
	for _, c := range rd.pending {
		if len(rd.frames) > 0 {
			c.Frames = append([]trace.Frame(nil), rd.frames...)
		}
		rd.queue = append(rd.queue, c)
	}
	rd.pending = rd.pending[:0]
	rd.frames = rd.frames[:0]
}

// readLine returns the next line without its line end ("\n", and any
// "\r" before it). The last line needs no newline.
func (rd *Reader) readLine() (string, error) {
	rd.buf = rd.buf[:0]
	for {
		chunk, err := rd.r.ReadSlice('\n')
		if len(rd.buf)+len(chunk) > MaxLine {
			return "", &SyntaxError{Line: rd.line + 1, Msg: fmt.Sprintf("line longer than %d bytes", MaxLine)}
		}
		rd.buf = append(rd.buf, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && (err != io.EOF || len(rd.buf) == 0) {
			return "", err
		}
		break
	}
	rd.line++
	b := rd.buf
	if len(b) > 0 && b[len(b)-1] == '\n' {
		b = b[:len(b)-1]
	}
	for len(b) > 0 && b[len(b)-1] == '\r' {
		b = b[:len(b)-1]
	}
	return string(b), nil
}
