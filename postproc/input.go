package postproc

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"rtrace/internal/rtext"
	"rtrace/internal/trace"
	"rtrace/internal/wire"
)

// ErrEmpty: the input has no byte at all.
var ErrEmpty = errors.New("the input is empty")

// wireMagic is the first byte of a binary stream's handshake.
const wireMagic = 0xF0

// NewReader returns a reader for a trace in either encoding, told apart by
// content as sp-rtrace-postproc does: a binary stream starts with the
// handshake byte 0xF0, anything else is read as sp-rtrace text.
func NewReader(r io.Reader) (trace.Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	b, err := br.Peek(1)
	if err == io.EOF {
		return nil, ErrEmpty
	}
	if err != nil {
		return nil, err
	}
	if b[0] == wireMagic {
		return openWire(br)
	}
	return rtext.NewReader(br), nil
}

// openWire decodes a binary stream.
func openWire(r io.Reader) (trace.Reader, error) {
	rd, err := wire.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("binary stream: %w", err)
	}
	return rd, nil
}

// Text post-processes the trace in (binary stream or text) into sp-rtrace
// text on out: the pre-processor's -P pipe.
func Text(in io.Reader, out io.Writer, opts Options) error {
	rd, err := NewReader(in)
	if err != nil {
		return err
	}
	return Run(rd, rtext.NewWriter(out), opts)
}
