// Package pagemap draws sp-rtrace-pagemap's reports (docs/REPORTS.md,
// "Page maps"): the writable mappings of a traced process at its end, a
// character a page, from the page map the pagemap module attached to its
// trace (the maps and pageflags files) and the blocks still allocated
// then.
package pagemap

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"rtrace/internal/regular"
	"rtrace/internal/trace"
)

// The layout of the pageflags file (preproc/pagemap.go): for each
// mapping a header {from, to, size} and {info, kflags, kcount} a page.
const (
	headerSize = 24
	recordSize = 24
	pageSize   = 4096
)

// Area is a mapping of the process, a line of its maps.
type Area struct {
	From, To uint64
	Perm     string
	Path     string // the first word of the path; "" when anonymous
	Line     string // as read
	Pages    []trace.Page
	HasPages bool // the pageflags file has its pages
	Blocks   []*Block
}

// Writable reports whether the area may be written (sp-rtrace draws
// those).
func (a *Area) Writable() bool { return len(a.Perm) > 1 && a.Perm[1] == 'w' }

// Block is an allocation live at the end, in an area.
type Block struct {
	Call *trace.Call
}

// Data is what the reports draw.
type Data struct {
	Pid     int
	Process string
	Areas   []*Area
	// Kernel: some page has the kernel's flags (rtrace could read
	// /proc/kpageflags).
	Kernel bool
}

// Read reads a resource trace with its page map: the blocks live at its
// end (every allocation not released; a leak report's are all), placed
// in the mappings of the maps file the trace names. A relative
// attachment path is looked up in dir, then in the current directory.
func Read(rd trace.Reader, dir string) (*Data, error) {
	d := &Data{}
	var mapsPath, flagsPath string
	var mapsOwn, flagsOwn bool
	live := map[uint64]*trace.Call{}
	var readErr error
	for {
		it, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			readErr = err
			break
		}
		switch v := it.(type) {
		case *trace.Header:
			d.Pid, d.Process = v.Pid, v.Process
		case *trace.File:
			// The first of the header's process (a trace written as one
			// stream may hold its children's too), else the first.
			own := strings.HasPrefix(filepath.Base(v.Path), fmt.Sprintf("%d-pagemap-", d.Pid))
			switch {
			case v.Name == "maps" && (mapsPath == "" || own && !mapsOwn):
				mapsPath, mapsOwn = v.Path, own
			case v.Name == "pageflags" && (flagsPath == "" || own && !flagsOwn):
				flagsPath, flagsOwn = v.Path, own
			}
		case *trace.Call:
			if v.Alloc {
				live[v.ID] = v
			} else {
				delete(live, v.ID)
			}
		}
	}
	if mapsPath == "" || flagsPath == "" {
		if readErr != nil {
			return nil, readErr
		}
		return nil, errors.New("the trace has no page map: record it with --module pagemap (sp-rtrace's -e pagemap), then give rtrace pagemap the raw trace or a report of it")
	}
	mb, err := readAttachment(mapsPath, dir)
	if err != nil {
		return nil, err
	}
	if d.Areas, err = ParseMaps(mb); err != nil {
		return nil, fmt.Errorf("%s: %w", mapsPath, err)
	}
	fb, err := readAttachment(flagsPath, dir)
	if err != nil {
		return nil, err
	}
	if d.Kernel, err = placePages(d.Areas, fb); err != nil {
		return nil, fmt.Errorf("%s: %w", flagsPath, err)
	}
	for _, c := range live {
		i, ok := slices.BinarySearchFunc(d.Areas, c.ID, func(a *Area, addr uint64) int {
			switch {
			case a.To <= addr:
				return -1
			case a.From > addr:
				return 1
			}
			return 0
		})
		if ok {
			d.Areas[i].Blocks = append(d.Areas[i].Blocks, &Block{Call: c})
		}
	}
	for _, a := range d.Areas {
		slices.SortFunc(a.Blocks, func(x, y *Block) int {
			return cmp.Or(cmp.Compare(x.Call.ID, y.Call.ID), cmp.Compare(x.Call.Index, y.Call.Index))
		})
	}
	return d, readErr
}

// readAttachment reads the file an attachment line names: as given when
// absolute, else in dir, then in the current directory.
func readAttachment(path, dir string) ([]byte, error) {
	if filepath.IsAbs(path) {
		return regular.ReadFile(path)
	}
	var tried []string
	for _, base := range []string{dir, "."} {
		if base == "" {
			continue
		}
		p := filepath.Join(base, path)
		b, err := regular.ReadFile(p)
		if err == nil || !errors.Is(err, os.ErrNotExist) {
			return b, err
		}
		tried = append(tried, p)
	}
	return nil, fmt.Errorf("the page map's file %s is not there (looked for %s): run rtrace pagemap on the trace in its directory (-i DIR/PID-N.rtrace), or from that directory", path, strings.Join(tried, " and "))
}

// ParseMaps reads a maps file (proc(5)): every line an area, in order.
func ParseMaps(b []byte) ([]*Area, error) {
	var out []*Area
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Fields(line)
		lo, hi, ok := strings.Cut(f[0], "-")
		from, err1 := strconv.ParseUint(lo, 16, 64)
		to, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil || to < from || len(f) < 2 {
			return nil, fmt.Errorf("line %d: %q is not a maps line (FROM-TO PERMS ...)", n, line)
		}
		a := &Area{From: from, To: to, Perm: f[1], Line: line}
		if len(f) > 5 {
			a.Path = f[5]
		}
		if len(out) > 0 && out[len(out)-1].To > from {
			return nil, fmt.Errorf("line %d: %q overlaps the line before", n, line)
		}
		out = append(out, a)
	}
	return out, sc.Err()
}

// placePages gives the areas their pages from a pageflags file. A
// mapping the file does not have (or has in part, as the original
// module's [vsyscall]) keeps none: its pages are drawn as not present.
// It reports whether some page has the kernel's flags.
func placePages(areas []*Area, b []byte) (bool, error) {
	byStart := map[uint64]*Area{}
	for _, a := range areas {
		byStart[a.From] = a
	}
	kernel := false
	for off := 0; off+headerSize <= len(b); {
		from := binary.LittleEndian.Uint64(b[off:])
		to := binary.LittleEndian.Uint64(b[off+8:])
		size := binary.LittleEndian.Uint64(b[off+16:]) // a u32 and its padding
		size &= 0xffffffff
		off += headerSize
		if to < from || size%recordSize != 0 || size/recordSize != (to-from)/pageSize {
			return kernel, fmt.Errorf("the mapping at offset %d (0x%x-0x%x, %d bytes of pages) is not whole", off-headerSize, from, to, size)
		}
		if uint64(len(b)-off) < size {
			break // cut short: the last mapping has no pages
		}
		a := byStart[from]
		if a != nil && a.To == to {
			a.Pages, a.HasPages = make([]trace.Page, size/recordSize), true
			for i := range a.Pages {
				r := b[off+i*recordSize:]
				info := binary.LittleEndian.Uint32(r)
				pg := trace.Page{Info: uint8(info), KFlags: binary.LittleEndian.Uint64(r[8:]), KCount: binary.LittleEndian.Uint32(r[16:])}
				pg.Kernel = pg.KFlags != 0 || pg.KCount != 0
				kernel = kernel || pg.Kernel
				a.Pages[i] = pg
			}
		}
		off += int(size)
	}
	return kernel, nil
}
