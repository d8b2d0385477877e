package launcher

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

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

// rebaseFiles passes the items of rd on, the files its FILE items name
// (the pagemap module's, relative to the trace's directory, as sp-rtrace
// named them relative to its output directory) made relative to outDir,
// where the output's reader will look them up: a trace read from
// inPath's directory and written elsewhere still names them. Written to
// stdout (outDir ""), which may go anywhere, they are named by absolute
// paths (sp-rtrace's fallback too).
func rebaseFiles(rd trace.Reader, inPath, outDir string) trace.Reader {
	from, err := filepath.Abs(filepath.Dir(inPath))
	if err != nil {
		return rd
	}
	to := ""
	if outDir != "" {
		if to, err = filepath.Abs(outDir); err != nil || from == to {
			return rd
		}
	}
	return &rebased{rd: rd, from: from, to: to}
}

type rebased struct {
	rd       trace.Reader
	from, to string // to "": absolute paths
}

func (r *rebased) Next() (trace.Item, error) {
	it, err := r.rd.Next()
	if f, ok := it.(*trace.File); ok && !filepath.IsAbs(f.Path) {
		p := filepath.Join(r.from, f.Path)
		if r.to != "" {
			if rel, rerr := filepath.Rel(r.to, p); rerr == nil {
				p = rel
			}
		}
		it = &trace.File{Name: f.Name, Path: p}
	}
	return it, err
}
