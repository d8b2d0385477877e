package launcher

import (
	"errors"
	"fmt"
	"io"
	"os"

	"rtrace/internal/trace"
	"rtrace/postproc"
)

// OpenTrace opens the resource trace the drawing verbs (calltree,
// timeline) read: the file path the user named (a pipe too: <(...)), or
// stdin when path is "". It returns the reader, the input's
// name for messages and what closes it.
func OpenTrace(path string, stdin io.Reader) (trace.Reader, string, func(), error) {
	r, name, closer := stdin, "stdin", func() {}
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, path, closer, err
		}
		r, name, closer = f, path, func() { f.Close() }
	}
	rd, err := postproc.NewReader(r)
	if err != nil {
		closer()
		if errors.Is(err, postproc.ErrEmpty) {
			return nil, name, func() {}, fmt.Errorf("%s: the input is empty", name)
		}
		return nil, name, func() {}, fmt.Errorf("%s: %w", name, err)
	}
	return rd, name, closer, nil
}
