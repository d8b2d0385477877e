package tracer

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"

	"rtrace/internal/trace"
	"rtrace/internal/uftrace"
	"rtrace/tracer/ptrace"
)

// The pagemap module (docs/REPORTS.md, "Page maps"): when a traced
// process ends, what its writable mappings' pages are, as sp-rtrace's
// pagemap module recorded it when its window closed
// (src/rtrace-pagemap/sp_rtrace_pagemap.c): /proc/PID/maps, then a page
// at a time from /proc/PID/pagemap (proc(5): bit 63 present, bit 62
// swapped, 61 a file page, 56 mapped by it alone, bits 0-54 the page
// frame), the kernel's flags and mapping
// count of the frame from /proc/kpageflags and /proc/kpagecount where
// rtrace may read them (CAP_SYS_ADMIN; unprivileged readers get frame 0,
// then none are read), and whether the page is all zero bytes, read in
// the private writable mappings, as the module read its own.

// pagemapWanted says whether the processes' page maps are taken at their
// end: the pagemap module is on and a window is open.
func (t *Tracer) pagemapWanted() bool {
	if t.res == nil || !t.window {
		return false
	}
	for _, m := range t.cfg.Modules {
		if m.Name == "pagemap" {
			return true
		}
	}
	return false
}

// pagemapChunk is how many pages a PageFlags item holds at most.
const pagemapChunk = 1 << 16

// MaxMapPages bounds the pages of a mapping the page map takes (4 GiB of
// address space): a bigger one (a sanitizer's shadow, a reservation) is
// named in the maps but has no pages (docs/REPORTS.md, "Page maps").
const MaxMapPages = 1 << 20

// pageMap reads the page map of process pid through its stopped thread
// tid and hands it to emit: a PageMap, then the PageFlags of each
// writable mapping, in address order. rtrace's own mappings are left
// out: its memfds, and the [start, end) pairs of own cut out of the
// mapping the kernel merged them into.
func pageMap(tid, pid int, own []uint64, emit func(trace.Item)) error {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", tid))
	if err != nil {
		return err
	}
	kept := ownCut(string(raw), own)
	maps, err := uftrace.ParseMaps(strings.NewReader(kept))
	if err != nil {
		return fmt.Errorf("/proc/%d/maps: %w", tid, err)
	}
	pm, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", tid))
	if err != nil {
		return err
	}
	defer pm.Close()
	emit(&trace.PageMap{Pid: pid, Maps: kept})
	var kflags, kcount *os.File
	if f, err := os.Open("/proc/kpageflags"); err == nil {
		kflags = f
		defer f.Close()
	}
	if f, err := os.Open("/proc/kpagecount"); err == nil {
		kcount = f
		defer f.Close()
	}
	entries := make([]byte, 8*pagemapChunk)
	mem := make([]byte, 4096*pagemapChunk/16)
	var word [8]byte
	for _, m := range maps {
		if len(m.Perm) < 4 || m.Perm[1] != 'w' || m.End <= m.Start || m.Start%4096 != 0 || (m.End-m.Start)/4096 > MaxMapPages {
			continue
		}
		private := m.Perm[0] == 'r' && m.Perm[3] == 'p'
		for at := m.Start; at < m.End; at += 4096 * pagemapChunk {
			n := int(min((m.End-at)/4096, pagemapChunk))
			pages := make([]trace.Page, n)
			got, _ := pm.ReadAt(entries[:8*n], int64(at/4096*8))
			for i := 0; i < got/8; i++ {
				e := binary.LittleEndian.Uint64(entries[8*i:])
				pg := &pages[i]
				switch {
				case e&(1<<62) != 0:
					pg.Info = trace.PageSwap
				case e&(1<<63) != 0:
					pg.Info = trace.PageMemory
					if e&(1<<61) != 0 {
						pg.Info |= trace.PageFile
					}
					if e&(1<<56) != 0 {
						pg.Info |= trace.PageExclusive
					}
					pfn := e & (1<<55 - 1)
					if pfn != 0 && kflags != nil {
						if _, err := kflags.ReadAt(word[:], int64(pfn*8)); err == nil {
							pg.Kernel, pg.KFlags = true, binary.LittleEndian.Uint64(word[:])
							if kcount != nil {
								if _, err := kcount.ReadAt(word[:], int64(pfn*8)); err == nil {
									pg.KCount = uint32(binary.LittleEndian.Uint64(word[:]))
								}
							}
						}
					}
				case anonymous(m):
					// Anonymous, never touched (or its page dropped):
					// reads as zeros, and reading it would map the zero
					// page into a process that may go on.
					pg.Info = trace.PageZero
				}
			}
			if private {
				zeroPages(tid, at, pages, mem)
			}
			emit(&trace.PageFlags{Pid: pid, At: at, Pages: pages})
		}
	}
	return nil
}

// ownCut returns the maps text without rtrace's own mappings: its
// memfds' lines, and the ranges of own (pairs) cut out of the lines they
// lie in (the kernel merges an anonymous mapping with its neighbours).
func ownCut(maps string, own []uint64) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(maps, "\n") {
		if line == "" || strings.Contains(line, "/memfd:rtrace-") {
			continue
		}
		rng, rest, _ := strings.Cut(line, " ")
		lo, hi, ok := strings.Cut(rng, "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil {
			b.WriteString(line)
			continue
		}
		parts := without(start, end, own)
		for j := 0; j+1 < len(parts); j += 2 {
			if len(parts) == 2 && parts[0] == start && parts[1] == end {
				b.WriteString(line)
				break
			}
			fmt.Fprintf(&b, "%0*x-%0*x %s", len(lo), parts[j], len(hi), parts[j+1], rest)
		}
	}
	return b.String()
}

// zeroPages marks the pages in RAM from at on whose bytes are all 0,
// read through buf a run of present pages at a time (a page at a time
// where a run does not read). Pages not in RAM are not read: a read
// would map them in, or swap them in, in a process that may go on.
func zeroPages(tid int, at uint64, pages []trace.Page, buf []byte) {
	per := len(buf) / 4096
	for i := 0; i < len(pages); {
		if pages[i].Info&trace.PageMemory == 0 {
			i++
			continue
		}
		n := 1
		for n < per && i+n < len(pages) && pages[i+n].Info&trace.PageMemory != 0 {
			n++
		}
		b := buf[:4096*n]
		whole := ptrace.ReadMem(tid, at+uint64(i)*4096, b) == nil
		for j := 0; j < n; j++ {
			pg := b[4096*j : 4096*(j+1)]
			if !whole && ptrace.ReadMem(tid, at+uint64(i+j)*4096, pg) != nil {
				continue
			}
			if allZero(pg) {
				pages[i+j].Info |= trace.PageZero
			}
		}
		i += n
	}
}

// allZero reports whether b holds only zero bytes.
func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
