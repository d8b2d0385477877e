package launcher

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"rtrace/internal/datadir"
	"rtrace/internal/trace"
	"rtrace/internal/uftrace"
	"rtrace/postproc"
	"rtrace/preproc"
	"rtrace/resolver"
)

// funcChain is the pipeline of one function-trace window, in process:
//
//	preproc.Stage → postproc.NewFuncStage → resolver.ModuleStage → datadir.Writer
//
// The pre-processor stores the raw stream when asked; the post-processor
// applies uftrace's filters; the resolver writes each module's .sym and
// .dbg; the writer finishes the uftrace.data directory.
type funcChain struct {
	pre  *preproc.Stage
	data *datadir.Writer // nil: no uftrace.data directory (a raw stream only)
}

// newFuncChain starts a window: a new uftrace.data directory named from
// dir (windowDir) when dir is set, a raw stream in rawDir when that is.
func newFuncChain(dir, rawDir string, filters postproc.FuncOptions, warn io.Writer) (*funcChain, error) {
	c := &funcChain{pre: &preproc.Stage{Dir: rawDir}}
	if dir == "" {
		return c, nil
	}
	path, err := windowDir(dir)
	if err != nil {
		return nil, err
	}
	if c.data, err = datadir.Create(path); err != nil {
		os.Remove(path)
		return nil, err
	}
	// uftrace record saves -t in default.opts, which its analysis
	// commands apply when not given another (uftrace.c, default_opts).
	opts := ""
	if filters.Threshold > 0 {
		opts = "-t " + uftrace.ThresholdString(filters.Threshold) + "\n"
	}
	if err := os.WriteFile(filepath.Join(path, "default.opts"), []byte(opts), 0o644); err != nil {
		return nil, err
	}
	ms := resolver.NewModuleStage(path, filters.Srcline, warn, c.data)
	ms.WithSyms = filters.WithSyms
	c.pre.Next = postproc.NewFuncStage(filters, ms)
	return c, nil
}

// Write hands an item to the first stage.
func (c *funcChain) Write(it trace.Item) error { return c.pre.Write(it) }

// Close finishes every stage.
func (c *funcChain) Close() error { return c.pre.Close() }

// outputs are the directory and raw file written ("" for none).
func (c *funcChain) outputs() (dir, raw string) {
	if c.data != nil {
		dir = c.data.Dir()
	}
	return dir, c.pre.Path()
}

// display is path as a user would name it: relative to the current
// directory when under it.
func display(path string) string {
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(rel, "..") {
			return rel
		}
	}
	return path
}

// windowDir makes the directory of a new window of the trace named base:
// base itself when it is free, else base.1, base.2, ... (the first free
// name; an existing one is never overwritten).
func windowDir(base string) (string, error) {
	for n := 0; n < 1<<16; n++ {
		dir := base
		if n > 0 {
			dir = fmt.Sprintf("%s.%d", base, n)
		}
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("creating %s: %w", dir, err)
		}
	}
	return "", fmt.Errorf("no free name for a new window of %s", base)
}

// funcStreamToDir reads a function trace's stream (its header already
// read) through a new window's pipeline: a uftrace.data directory named
// from dir, keeping what filters keep. It returns the directory written.
func funcStreamToDir(hdr *trace.Header, rd trace.Reader, dir string, filters postproc.FuncOptions, warn io.Writer) (string, error) {
	c, err := newFuncChain(dir, "", filters, warn)
	if err != nil {
		return "", err
	}
	out, _ := c.outputs()
	err = c.Write(hdr)
	for err == nil {
		var it trace.Item
		if it, err = rd.Next(); err == nil {
			err = c.Write(it)
		}
	}
	if err == io.EOF {
		err = nil
	}
	return out, errors.Join(err, c.Close())
}
