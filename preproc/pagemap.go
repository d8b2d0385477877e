package preproc

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"rtrace/internal/trace"
	"rtrace/internal/uftrace"
)

// A process's page map (trace.PageMap, then its PageFlags) becomes the
// two files sp-rtrace's pagemap module attached to its trace
// (docs/REPORTS.md, "Page maps"): <pid>-pagemap-maps-<n>, the maps as
// read, and <pid>-pagemap-pageflags-<n>, for each writable mapping a
// header {from, to, size} and a record {info, kflags, kcount} a page, in
// its native x86-64 layout (24 bytes each). The trace names them with
// FILE items ("& maps : NAME" in text), relative to its directory, as
// sp-rtrace named them relative to the post-processor's output directory.

// PageHeaderSize and PageRecordSize are the sizes of the pageflags
// file's header and records.
const (
	PageHeaderSize = 24
	PageRecordSize = 24
)

// pageFiles is a page map being written.
type pageFiles struct {
	f     *os.File
	bw    *bufio.Writer
	areas map[uint64]uint64 // the writable mappings' ends by start
}

// pageMap starts the page map m of p's process: its two files, named
// in p's trace.
func (d *demux) pageMap(p *procOut, m *trace.PageMap) error {
	if err := p.endPages(); err != nil {
		return err
	}
	dir := d.o.Dir
	if dir == "" {
		dir = "."
	}
	maps, err := uftrace.ParseMaps(bytes.NewReader([]byte(m.Maps)))
	if err != nil {
		return fmt.Errorf("the page map of pid %d: %w", m.Pid, err)
	}
	areas := map[uint64]uint64{}
	for _, a := range maps {
		if len(a.Perm) > 1 && a.Perm[1] == 'w' && a.End > a.Start {
			areas[a.Start] = a.End
		}
	}
	for n := 0; n < 1<<20; n++ {
		names := [2]string{fmt.Sprintf("%d-pagemap-maps-%d", m.Pid, n), fmt.Sprintf("%d-pagemap-pageflags-%d", m.Pid, n)}
		mf, err := os.OpenFile(filepath.Join(dir, names[0]), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("the page map of pid %d: %w", m.Pid, err)
		}
		_, err = mf.WriteString(m.Maps)
		if cerr := mf.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("the page map of pid %d: %w", m.Pid, err)
		}
		ff, err := os.OpenFile(filepath.Join(dir, names[1]), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return fmt.Errorf("the page map of pid %d: %w", m.Pid, err)
		}
		p.pages = &pageFiles{f: ff, bw: bufio.NewWriterSize(ff, 64<<10), areas: areas}
		if err := p.w.Write(&trace.File{Name: "maps", Path: names[0]}); err != nil {
			return err
		}
		return p.w.Write(&trace.File{Name: "pageflags", Path: names[1]})
	}
	return fmt.Errorf("the page map of pid %d: no free file name in %s", m.Pid, dir)
}

// pageFlags writes pages of p's page map: a mapping's header before its
// first page.
func (p *procOut) pageFlags(v *trace.PageFlags) error {
	pf := p.pages
	if pf == nil {
		return nil // no PageMap before: nothing to add them to
	}
	var b [PageRecordSize]byte
	if end, ok := pf.areas[v.At]; ok {
		binary.LittleEndian.PutUint64(b[0:], v.At)
		binary.LittleEndian.PutUint64(b[8:], end)
		binary.LittleEndian.PutUint64(b[16:], (end-v.At)/4096*PageRecordSize)
		pf.bw.Write(b[:PageHeaderSize])
	}
	for _, pg := range v.Pages {
		clear(b[:])
		binary.LittleEndian.PutUint32(b[0:], uint32(pg.Info))
		binary.LittleEndian.PutUint64(b[8:], pg.KFlags)
		binary.LittleEndian.PutUint32(b[16:], pg.KCount)
		pf.bw.Write(b[:])
	}
	return nil
}

// endPages ends p's page map, if one is being written.
func (p *procOut) endPages() error {
	pf := p.pages
	if pf == nil {
		return nil
	}
	p.pages = nil
	err := pf.bw.Flush()
	if cerr := pf.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("the page map of pid %d: %w", p.pid, err)
	}
	return nil
}
