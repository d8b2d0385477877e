package preproc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"rtrace/internal/trace"
	"rtrace/internal/uftrace"
	"rtrace/internal/wire"
)

// Options say where the stream goes.
type Options struct {
	Dir string // output directory ("" = the current directory)
	// Post, when set, post-processes the stream (wire) into text, written
	// to <pid>-<n>.rtrace.txt instead of the raw file.
	Post func(in io.Reader, out io.Writer) error
	// Stdout: write the output to Out instead of a file in Dir.
	Out io.Writer
	// Maps reads the maps of a pid (nil: /proc/<pid>/maps).
	Maps func(pid int) ([]byte, error)
}

// Run reads one stream from in until its end and writes it out. It
// returns the path written ("" with Out).
func Run(in io.Reader, o Options) (string, error) {
	rd, err := wire.NewReader(in)
	if err != nil {
		return "", fmt.Errorf("reading the stream: %w", err)
	}
	first, err := rd.Next()
	if err != nil {
		return "", fmt.Errorf("reading the stream: %w", err)
	}
	hdr, ok := first.(*trace.Header)
	if !ok {
		return "", fmt.Errorf("reading the stream: starts with %T, not a header", first)
	}
	return RunFrom(hdr, rd, o)
}

// RunFrom is Run on a stream whose header was read already.
func RunFrom(hdr *trace.Header, rd *wire.Reader, o Options) (string, error) {
	if o.Maps == nil {
		o.Maps = func(pid int) ([]byte, error) { return os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid)) }
	}
	out, path, err := o.output(hdr.Pid)
	if err != nil {
		return "", err
	}
	var post chan error
	sink := out
	var pw *io.PipeWriter
	if o.Post != nil {
		var pr *io.PipeReader
		pr, pw = io.Pipe()
		post = make(chan error, 1)
		go func() {
			err := o.Post(pr, out)
			pr.CloseWithError(err) // unblock the writer if Post gave up
			post <- err
		}()
		sink = pw
	}
	bw := bufio.NewWriterSize(sink, 64<<10)
	w := wire.NewWriter(bw)
	p := &pass{w: w, pid: hdr.Pid, maps: o.Maps, seen: map[trace.Mapping]bool{}}
	err = p.copy(hdr, rd)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	if pw != nil {
		pw.Close()
		if perr := <-post; err == nil && perr != nil {
			err = fmt.Errorf("post-processing: %w", perr)
		}
	}
	if c, ok := out.(io.Closer); ok && o.Out == nil {
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}
	return path, err
}

// pass copies items, answering NLIB with the mappings not sent yet.
type pass struct {
	w    *wire.Writer
	pid  int
	maps func(int) ([]byte, error)
	seen map[trace.Mapping]bool
}

func (p *pass) copy(hdr *trace.Header, rd *wire.Reader) error {
	if err := p.w.Write(hdr); err != nil {
		return err
	}
	for {
		it, err := rd.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the stream: %w", err) // what was whole is written
		}
		switch v := it.(type) {
		case *trace.Library:
			if err := p.rescan(); err != nil {
				return err
			}
			continue // answered: the output has the mappings instead
		case *trace.Mapping:
			if p.seen[*v] {
				continue
			}
			p.seen[*v] = true
		}
		if err := p.w.Write(it); err != nil {
			return err
		}
	}
}

// rescan reads the target's maps and writes its executable mappings not
// sent before. A target that is gone keeps the mappings already sent.
func (p *pass) rescan() error {
	data, err := p.maps(p.pid)
	if err != nil {
		return nil
	}
	for _, m := range ExecMappings(data) {
		if p.seen[m] {
			continue
		}
		p.seen[m] = true
		if err := p.w.Write(&m); err != nil {
			return err
		}
	}
	return nil
}

// ExecMappings returns the executable file mappings of a /proc/<pid>/maps
// text, as MMAP packets carry them (nil for text that is not maps).
func ExecMappings(maps []byte) []trace.Mapping {
	mm, err := uftrace.ParseMaps(bytes.NewReader(maps))
	if err != nil {
		return nil
	}
	var out []trace.Mapping
	for _, m := range mm {
		if len(m.Perm) >= 3 && m.Perm[2] == 'x' && strings.HasPrefix(m.Path, "/") {
			out = append(out, trace.Mapping{From: m.Start, To: m.End, Path: m.Path})
		}
	}
	return out
}

// output opens where the stream goes: Out, or a new file in Dir named
// <pid>-<n>.rtrace (.rtrace.txt when post-processed), n counted up from 0
// until the name is free; O_EXCL, so no file is ever overwritten.
func (o Options) output(pid int) (io.Writer, string, error) {
	if o.Out != nil {
		return o.Out, "", nil
	}
	dir := o.Dir
	if dir == "" {
		dir = "."
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", fmt.Errorf("output directory: %w", err)
	}
	ext := ".rtrace"
	if o.Post != nil {
		ext = ".rtrace.txt"
	}
	return Create(dir, pid, ext)
}

// Create makes a new file <pid>-<n><ext> in dir, n counted up from 0
// until the name is free (sp-rtrace's naming); O_EXCL, so no file is ever
// overwritten.
func Create(dir string, pid int, ext string) (*os.File, string, error) {
	for n := 0; n < 1<<20; n++ {
		path := filepath.Join(dir, fmt.Sprintf("%d-%d%s", pid, n, ext))
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("creating %s: %w", path, err)
		}
		return f, path, nil
	}
	return nil, "", fmt.Errorf("no free %d-<n>%s name in %s", pid, ext, dir)
}
