package preproc

import (
	"bufio"
	"errors"
	"fmt"
	"os"

	"rtrace/internal/trace"
	"rtrace/internal/wire"
)

// Stage is the pre-processor's stage of a function trace, in process (the
// tracer hands it each item, batches of records whole, nothing encoded)
// or behind a stream reader: it stores the stream as a raw
// <pid>-<n>.rtrace file in Dir when Dir is set, and passes every item on
// to Next when Next is set. The file is named at the header (its pid) and
// never overwrites one.
type Stage struct {
	Dir  string
	Next trace.Writer

	path string
	f    *os.File
	bw   *bufio.Writer
	w    *wire.Writer
}

// Path is the raw file written ("" for none).
func (s *Stage) Path() string { return s.path }

// Write stores and passes on one item.
func (s *Stage) Write(it trace.Item) error {
	if h, ok := it.(*trace.Header); ok && s.Dir != "" && s.w == nil {
		if err := os.MkdirAll(s.Dir, 0o755); err != nil {
			return fmt.Errorf("output directory: %w", err)
		}
		f, path, err := Create(s.Dir, h.Pid, ".rtrace")
		if err != nil {
			return err
		}
		s.f, s.path = f, path
		s.bw = bufio.NewWriterSize(f, 64<<10)
		s.w = wire.NewWriter(s.bw)
	}
	if s.w != nil {
		if err := s.w.Write(it); err != nil {
			return fmt.Errorf("writing %s: %w", s.path, err)
		}
	}
	if s.Next != nil {
		return s.Next.Write(it)
	}
	return nil
}

// Close finishes the raw file and closes the next stage.
func (s *Stage) Close() error {
	var errs []error
	if s.w != nil {
		errs = append(errs, s.w.Close(), s.bw.Flush(), s.f.Close())
		s.w = nil
	}
	if s.Next != nil {
		errs = append(errs, s.Next.Close())
	}
	return errors.Join(errs...)
}
