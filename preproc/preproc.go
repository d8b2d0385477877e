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
	// Stdout: write the output to Out instead of a file in Dir. The
	// processes of the stream are not split then: one stream goes out.
	Out io.Writer
	// Maps reads the maps of a pid (nil: /proc/<pid>/maps).
	Maps func(pid int) ([]byte, error)
}

// Run reads one stream from in until its end and writes it out. It
// returns the paths written (none with Out), the first process's first.
func Run(in io.Reader, o Options) ([]string, error) {
	rd, err := wire.NewReader(in)
	if err != nil {
		return nil, fmt.Errorf("reading the stream: %w", err)
	}
	first, err := rd.Next()
	if err != nil {
		return nil, fmt.Errorf("reading the stream: %w", err)
	}
	hdr, ok := first.(*trace.Header)
	if !ok {
		return nil, fmt.Errorf("reading the stream: starts with %T, not a header", first)
	}
	return RunFrom(hdr, rd, o)
}

// RunFrom is Run on a stream whose header was read already.
//
// A resource stream carries every process of a traced tree (docs/PROTOCOL.md,
// "A resource-trace stream"); each gets a file of its own, as sp-rtrace's
// preloaded modules wrote one per process: a fork's TASK starts the child's
// file (with its parent's mappings: the same memory), an exec's SESS starts
// a new file for the new image, a process's exit ends its file, and each
// CALL goes to the file of its thread's process.
func RunFrom(hdr *trace.Header, rd *wire.Reader, o Options) ([]string, error) {
	sp := NewSplitter(o)
	if err := sp.Write(hdr); err != nil {
		return nil, err
	}
	err := sp.copy(rd)
	paths, cerr := sp.Close()
	if err == nil {
		err = cerr
	}
	return paths, err
}

// Splitter is the pre-processor of a resource trace handed to it item by
// item, in the process (no stream to decode): the header first, then the
// rest in stream order, as RunFrom reads them. Close ends every file.
type Splitter struct {
	o Options
	d *demux
}

// NewSplitter returns a Splitter writing as o says.
func NewSplitter(o Options) *Splitter {
	if o.Maps == nil {
		o.Maps = func(pid int) ([]byte, error) { return os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid)) }
	}
	return &Splitter{o: o}
}

// Write routes an item: the first must be the header.
func (sp *Splitter) Write(it trace.Item) error {
	if hdr, ok := it.(*trace.Header); ok {
		if sp.d != nil {
			return fmt.Errorf("preproc: a second header")
		}
		sp.d = &demux{o: sp.o, hdr: hdr, procs: map[int]*procOut{}, tids: map[int]int{}}
		root, err := sp.d.open(hdr.Pid, hdr.Process, "", nil)
		if err != nil {
			return err
		}
		sp.d.root = root
		return nil
	}
	if sp.d == nil {
		return fmt.Errorf("preproc: %T before the header", it)
	}
	return sp.d.item(it)
}

// Calls writes cs, calls of one thread in order, to its process's file,
// as Write writes each.
func (sp *Splitter) Calls(cs []trace.Call) error {
	if len(cs) == 0 {
		return nil
	}
	if sp.d == nil {
		return fmt.Errorf("preproc: calls before the header")
	}
	sp.d.called = true
	return sp.d.of(cs[0].Tid).w.Calls(cs)
}

// Lane is the writer of tid's calls, its process's file's, for a caller
// that writes them itself (wire.Writer.PutCall) as Calls would; nil before
// the header.
func (sp *Splitter) Lane(tid int) *wire.Writer {
	if sp.d == nil {
		return nil
	}
	sp.d.called = true
	return sp.d.of(tid).w
}

// Flush does nothing: each file is written as its items come.
func (sp *Splitter) Flush() error { return nil }

// Close ends every file, and returns the paths written (none with Out),
// the first process's first.
func (sp *Splitter) Close() ([]string, error) {
	if sp.d == nil {
		return nil, nil
	}
	var err error
	for len(sp.d.order) > 0 {
		if cerr := sp.d.close(sp.d.order[0]); err == nil {
			err = cerr
		}
	}
	return sp.d.paths, err
}

func (sp *Splitter) copy(rd *wire.Reader) error { return sp.d.copy(rd) }

// demux splits a stream by process.
type demux struct {
	o     Options
	hdr   *trace.Header
	root  *procOut
	procs map[int]*procOut // open outputs by pid
	order []*procOut       // open outputs, in the order they opened
	tids  map[int]int      // thread → process, for the threads that are not their process's leader
	// preamble: the items every file starts with after its header
	// (modules, resources, contexts).
	preamble []trace.Item
	called   bool // a call was seen: the preamble is complete
	paths    []string
	lastTid  int // of's last answer
	last     *procOut
}

// procOut is the output of one process image.
type procOut struct {
	pid  int
	sid  string
	name string // the process name its header carries
	w    *wire.Writer
	bw   *bufio.Writer
	out  io.Writer
	pw   *io.PipeWriter
	post chan error
	seen map[trace.Mapping]bool
	maps []trace.Mapping // sent, in order: a fork's child starts with them
	// pages: the page map being written (pagemap.go).
	pages *pageFiles
}

// open starts the output of process pid (image sid, process name name)
// with the mappings maps, and makes it the process's current one.
func (d *demux) open(pid int, name, sid string, maps []trace.Mapping) (*procOut, error) {
	p := &procOut{pid: pid, sid: sid, name: name, seen: map[trace.Mapping]bool{}}
	out, path, err := d.o.output(pid)
	if err != nil {
		return nil, err
	}
	if path != "" {
		d.paths = append(d.paths, path)
	}
	p.out = out
	sink := out
	if d.o.Post != nil {
		var pr *io.PipeReader
		pr, p.pw = io.Pipe()
		p.post = make(chan error, 1)
		go func() {
			err := d.o.Post(pr, out)
			pr.CloseWithError(err) // unblock the writer if Post gave up
			p.post <- err
		}()
		sink = p.pw
	}
	p.bw = bufio.NewWriterSize(sink, 64<<10)
	p.w = wire.NewWriter(p.bw)
	h := *d.hdr
	h.Pid, h.Process = pid, name
	if err := p.w.Write(&h); err != nil {
		return p, err
	}
	for _, it := range d.preamble {
		if err := p.w.Write(it); err != nil {
			return p, err
		}
	}
	for i := range maps {
		if err := p.mapping(&maps[i]); err != nil {
			return p, err
		}
	}
	d.procs[pid] = p
	d.order = append(d.order, p)
	return p, nil
}

// close ends the output of p: the mappings of its process not sent yet,
// then the stream, the post-processor and the file.
func (d *demux) close(p *procOut) error {
	if d.procs[p.pid] == p {
		delete(d.procs, p.pid)
	}
	for i, q := range d.order {
		if q == p {
			d.order = append(d.order[:i], d.order[i+1:]...)
			break
		}
	}
	err := d.rescan(p)
	if perr := p.endPages(); err == nil {
		err = perr
	}
	if cerr := p.w.Close(); err == nil {
		err = cerr
	}
	if ferr := p.bw.Flush(); err == nil {
		err = ferr
	}
	if p.pw != nil {
		p.pw.Close()
		if perr := <-p.post; err == nil && perr != nil {
			err = fmt.Errorf("post-processing: %w", perr)
		}
	}
	if c, ok := p.out.(io.Closer); ok && d.o.Out == nil {
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// of returns the output of thread tid's process: the first process's for
// a thread the stream did not name.
func (d *demux) of(tid int) *procOut {
	if d.o.Out != nil {
		return d.root
	}
	if tid == d.lastTid && d.last != nil {
		return d.last // no task or session came since
	}
	d.lastTid, d.last = tid, d.find(tid)
	return d.last
}

func (d *demux) find(tid int) *procOut {
	pid, ok := d.tids[tid]
	if !ok {
		pid = tid
	}
	if p := d.procs[pid]; p != nil {
		return p
	}
	return d.root
}

func (d *demux) copy(rd *wire.Reader) error {
	for {
		it, err := rd.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the stream: %w", err) // what was whole is written
		}
		if err := d.item(it); err != nil {
			return err
		}
	}
}

// item routes one item of the stream.
func (d *demux) item(it trace.Item) error {
	switch v := it.(type) {
	case *trace.Module, *trace.Resource, *trace.Context:
		if !d.called {
			d.preamble = append(d.preamble, it)
		}
		return d.root.w.Write(it)
	case *trace.Library:
		// Answered: the output has the mappings instead.
		for _, p := range d.order {
			if err := d.rescan(p); err != nil {
				return err
			}
		}
		return nil
	case *trace.Mapping:
		return d.root.mapping(v)
	case *trace.Call:
		d.called = true
		return d.of(v.Tid).w.Write(v)
	case *trace.Task:
		d.last = nil
		return d.task(v)
	case *trace.Session:
		d.last = nil
		return d.session(v)
	case *trace.Usage:
		if p := d.procs[v.Pid]; p != nil && d.o.Out == nil {
			return p.w.Write(v) // before its exit: its file is still open
		}
	case *trace.HeapRegions:
		if p := d.procs[v.Pid]; p != nil && d.o.Out == nil {
			return p.w.Write(v)
		}
	case *trace.HeapWords:
		if p := d.procs[v.Pid]; p != nil && d.o.Out == nil {
			return p.w.Write(v)
		}
	case *trace.PageMap:
		return d.pageMap(d.of(v.Pid), v)
	case *trace.PageFlags:
		return d.of(v.Pid).pageFlags(v)
	}
	return d.root.w.Write(it)
}

// task follows the process tree: a fork starts its child's output, a
// thread joins its process, a process's exit ends its output.
func (d *demux) task(t *trace.Task) error {
	if d.o.Out != nil {
		return d.root.w.Write(t)
	}
	switch {
	case t.PPid != 0 && !t.Exit:
		parent := d.procs[t.PPid]
		if parent == nil {
			parent = d.root
		}
		if old := d.procs[t.Pid]; old != nil { // a reused pid
			if err := d.close(old); err != nil {
				return err
			}
		}
		_, err := d.open(t.Pid, parent.name, parent.sid, parent.maps)
		return err
	case t.Exit && t.Tid == t.Pid:
		p := d.procs[t.Pid]
		if p == nil {
			return nil
		}
		if err := p.w.Write(t); err != nil {
			return err
		}
		if p == d.root {
			return nil // the first process's file ends with the stream
		}
		return d.close(p)
	case t.Exit:
		delete(d.tids, t.Tid)
	case t.Tid != t.Pid:
		d.tids[t.Tid] = t.Pid
	}
	return nil
}

// session is a process image's state: its maps changed (the same session
// id), or it exec'd (another one): the old image's output ends and the
// new image's starts.
func (d *demux) session(s *trace.Session) error {
	if d.o.Out != nil {
		for _, m := range ExecMappings(s.Maps) {
			if err := d.root.mapping(&m); err != nil {
				return err
			}
		}
		return nil
	}
	p := d.procs[s.Pid]
	if p != nil && (p.sid == "" || p.sid == s.SID) {
		p.sid = s.SID
		for _, m := range ExecMappings(s.Maps) {
			if err := p.mapping(&m); err != nil {
				return err
			}
		}
		return nil
	}
	if p != nil {
		if err := d.close(p); err != nil {
			return err
		}
	}
	np, err := d.open(s.Pid, s.Exe, s.SID, ExecMappings(s.Maps))
	if err != nil {
		return err
	}
	if p == d.root {
		d.root = np
	}
	return nil
}

// mapping writes m unless p's output has it.
func (p *procOut) mapping(m *trace.Mapping) error {
	if p.seen[*m] {
		return nil
	}
	p.seen[*m] = true
	p.maps = append(p.maps, *m)
	return p.w.Write(m)
}

// rescan reads the maps of p's process and writes its executable
// mappings not sent before. A process that is gone keeps the mappings
// already sent.
func (d *demux) rescan(p *procOut) error {
	data, err := d.o.Maps(p.pid)
	if err != nil {
		return nil
	}
	for _, m := range ExecMappings(data) {
		if err := p.mapping(&m); err != nil {
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
