package tracer

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"rtrace/internal/trace"
	"rtrace/internal/uftrace"
	"rtrace/tracer/fast"
	"rtrace/tracer/ptrace"
)

// The memory scan behind the leak kinds (docs/REPORTS.md, "Leak kinds").
// When a traced process ends, rtrace reads its writable memory before it
// is gone, as memcheck's leak check reads the client's
// (valgrind: memcheck/mc_leakcheck.c), and hands on the words that may
// point at a heap block: HeapRegions, then HeapWords (trace.go). The
// post-processor knows the live blocks and classifies them. Each thread's
// registers and stack pointer are taken at its exit event (ptrace(2),
// PTRACE_O_TRACEEXIT: the registers are still there); the scan runs at
// the exit event of the process's last thread, when every other thread
// has passed its own and the memory is still mapped.

// threadEnd is what a thread left at its exit event: its stack pointer
// and its general registers, roots of the scan.

// maxEnds bounds the stack pointers of a process's ended threads kept for
// its scan (a program that starts threads all its life would otherwise
// grow them without end); the newest are kept.
const maxEnds = 1 << 14

// maxEndRegs is how many of the last threads to end keep their registers
// as roots.
const maxEndRegs = 256

type threadEnd struct {
	sp   uint64
	regs []uint64
}

// scanWanted says whether the processes' memory is scanned at their end:
// memory is traced and a window is open.
func (t *Tracer) scanWanted() bool {
	if t.res == nil || !t.window {
		return false
	}
	for _, m := range t.cfg.Modules {
		if m.Name == "memory" {
			return true
		}
	}
	return false
}

// noteEnd keeps th's registers at its exit event and, when th is the last
// thread of its process to reach it, scans the process's memory.
func (t *Tracer) noteEnd(th *thread) {
	p := th.proc
	if p == nil || th.vforked {
		return
	}
	th.ending = true // also when no scan is wanted now: a window may open before the last one ends
	scan, pmap := t.scanWanted(), t.pagemapWanted()
	if !scan && !pmap {
		return
	}
	var regs unix.PtraceRegs
	if scan && ptrace.GetRegs(th.tid, &regs) == nil {
		// Its stack pointer for as long as the process lives (its stack
		// may stay mapped, cached for the next thread), a bounded number
		// of them; its registers only among the last few threads' to end:
		// memcheck's roots are the registers of the threads there at the
		// end (those an exit_group kills), not of one gone long ago.
		if len(p.ends) >= 2*maxEnds {
			p.ends = append(p.ends[:0], p.ends[len(p.ends)-maxEnds:]...)
		}
		if n := len(p.ends); n >= maxEndRegs {
			p.ends[n-maxEndRegs].regs = nil
		}
		e := threadEnd{sp: regs.Rsp, regs: regWords(&regs)}
		if regs.Orig_rax == unix.SYS_EXIT {
			e.regs = nil // it ended itself (pthread_exit): not there at the end
		}
		p.ends = append(p.ends, e)
	}
	for _, o := range t.threads {
		if o.proc == p && !o.ending && !o.vforked {
			return
		}
	}
	if p.scanned {
		return
	}
	p.scanned = true
	t.snapshot(th.tid, p, p.ends, scan, pmap)
}

// snapshot takes the page map (pmap) and the memory scan (scan) of
// process p through its stopped thread tid, ends being its threads'
// registers and stack pointers, into the open window.
func (t *Tracer) snapshot(tid int, p *process, ends []threadEnd, scan, pmap bool) {
	s, ok := t.res.(ScanSink)
	if !ok {
		return
	}
	emit := func(it trace.Item) { t.emit(s.HeapScan([]trace.Item{it})) }
	var own []uint64
	if fi := p.image.fast; fi != nil {
		own = append(own, fi.tableAddr, fi.tableAddr+fast.TableSize+4096)
	}
	// The page map first: the scan's reads map the zero page where the
	// program never touched its memory.
	if pmap {
		if err := pageMap(tid, p.pid, own, emit); err != nil {
			fmt.Fprintf(t.cfg.Warn, "rtrace: warning: pid %d: no page map: %v\n", p.pid, err)
		}
	}
	if scan {
		// A chunk at a time: a big heap's words need not all be held at once.
		if err := scanMemory(tid, p.pid, ends, own, emit); err != nil {
			fmt.Fprintf(t.cfg.Warn, "rtrace: warning: pid %d: the memory scan behind the leak kinds: %v\n", p.pid, err)
		}
	}
}

// windowEnd takes, when a toggle closes the window, what each traced
// process's end would (its page map, as sp-rtrace's pagemap module took
// it when its window closed, and the memory scan behind the leak kinds
// of the blocks the window leaves allocated), with every thread parked:
// the roots are the registers of its threads then. th is the thread a
// signal stopped. A process that reached its end was taken then.
func (t *Tracer) windowEnd(th *thread) {
	scan, pmap := t.scanWanted(), t.pagemapWanted()
	if !scan && !pmap {
		return
	}
	t.flushAll() // the window's calls come before
	if !t.window {
		return // its stream closed meanwhile
	}
	t.whileParked(th, func() {
		pids := make([]int, 0, len(t.procs))
		for pid := range t.procs {
			pids = append(pids, pid)
		}
		slices.Sort(pids)
		for _, pid := range pids {
			p := t.procs[pid]
			if p.scanned || !t.window {
				continue
			}
			var ends []threadEnd
			tid := 0
			for _, o := range t.threads {
				if o.proc != p || o.vforked || !o.parked {
					continue
				}
				var regs unix.PtraceRegs
				if ptrace.GetRegs(o.tid, &regs) != nil {
					continue
				}
				// Stopped anywhere, a leaf function's locals may lie in
				// the 128 bytes below its stack pointer (the x86-64 ABI's
				// red zone, which memcheck scans too).
				ends = append(ends, threadEnd{sp: regs.Rsp - 128, regs: regWords(&regs)})
				if tid == 0 || o.tid == pid {
					tid = o.tid
				}
			}
			if tid == 0 {
				fmt.Fprintf(t.cfg.Warn, "rtrace: warning: pid %d: no thread stopped at the window's end (one waits in vfork): no page map, its leaks have no kind\n", pid)
				continue
			}
			t.snapshot(tid, p, append(slices.Clone(p.ends), ends...), scan, pmap)
		}
		// The window ends here: what the threads do once resumed, before
		// the sinks close it, is not in it (a block allocated then would
		// be in no scan).
		t.setOn(false)
	})
}

// regWords are the general registers of regs, as memcheck's roots.
func regWords(r *unix.PtraceRegs) []uint64 {
	return []uint64{r.Rax, r.Rbx, r.Rcx, r.Rdx, r.Rsi, r.Rdi, r.Rbp, r.Rsp,
		r.R8, r.R9, r.R10, r.R11, r.R12, r.R13, r.R14, r.R15}
}

// scanChunk is how much memory one read takes.
const scanChunk = 1 << 20

// scanWordsItem bounds the words of one HeapWords item.
const scanWordsItem = 1 << 16

// scanMemory reads the writable memory of process pid through its thread
// tid (stopped at its exit event) and hands the scan's items to emit, in
// order. ends are its threads' registers and stack pointers, in the order
// they ended (a later thread's stack pointer in the same mapping wins: a
// stack a new thread reused); own are the [start, end) pairs of rtrace's
// own mappings in it, left out.
func scanMemory(tid, pid int, ends []threadEnd, own []uint64, emit func(trace.Item)) error {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", tid))
	if err != nil {
		return err
	}
	maps, err := uftrace.ParseMaps(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("/proc/%d/maps: %w", tid, err)
	}
	regs := scanRegions(maps, ends, own)
	targets := scanTargets(maps)
	emit(&trace.HeapRegions{Pid: pid, Regions: regs})
	words := &trace.HeapWords{Pid: pid}
	put := func(at, v uint64) {
		if !inRanges(targets, v) {
			return
		}
		words.Words = append(words.Words, trace.HeapWord{At: at, Val: v})
		if len(words.Words) == scanWordsItem {
			emit(words)
			words = &trace.HeapWords{Pid: pid}
		}
	}
	for _, e := range ends {
		for _, v := range e.regs {
			put(0, v)
		}
	}
	buf := make([]byte, scanChunk)
	// Only the pages in RAM or swapped are read: the others read as
	// zeros, and reading them would map them in, page tables and all, in
	// a process that may go on (a window's end), or for hours (a
	// reservation, a sanitizer's shadow).
	pm, pmErr := os.Open(fmt.Sprintf("/proc/%d/pagemap", tid))
	if pmErr == nil {
		defer pm.Close()
	}
	var skipped []string
	for _, r := range regs {
		if r.End-r.Start > scanMax {
			skipped = append(skipped, fmt.Sprintf("0x%x-0x%x", r.Start, r.End))
			continue
		}
		runs := [][2]uint64{{r.Start, r.End}}
		if pmErr == nil {
			runs = presentRuns(pm, r.Start, r.End)
		}
		for _, run := range runs {
			for at := run[0]; at < run[1]; at += scanChunk {
				n := min(run[1]-at, scanChunk)
				if ptrace.ReadMem(tid, at, buf[:n]) == nil {
					for i := uint64(0); i+8 <= n; i += 8 {
						put(at+i, binary.LittleEndian.Uint64(buf[i:]))
					}
					continue
				}
				// Part of it is unreadable (a file mapping past its file's
				// end): the pages that read.
				for pg := uint64(0); pg < n; pg += 4096 {
					m := min(n-pg, 4096)
					if ptrace.ReadMem(tid, at+pg, buf[pg:pg+m]) != nil {
						continue
					}
					for i := pg; i+8 <= pg+m; i += 8 {
						put(at+i, binary.LittleEndian.Uint64(buf[i:]))
					}
				}
			}
		}
	}
	if len(words.Words) > 0 {
		emit(words)
	}
	if len(skipped) > 0 {
		return fmt.Errorf("mappings of more than %d GiB not scanned (their words are no roots): %s", scanMax>>30, strings.Join(skipped, ", "))
	}
	return nil
}

// scanMax: a region bigger than this is not read (its page map alone
// would take long).
const scanMax = 64 << 30

// presentRuns are the runs of [start, end) whose pages are in RAM or
// swapped, as pm (/proc/PID/pagemap, proc(5): bits 63 and 62) says;
// where it cannot say, the run is taken as there.
func presentRuns(pm *os.File, start, end uint64) [][2]uint64 {
	var runs [][2]uint64
	add := func(lo, hi uint64) {
		lo, hi = max(lo, start), min(hi, end)
		if k := len(runs); k > 0 && runs[k-1][1] == lo {
			runs[k-1][1] = hi
		} else if lo < hi {
			runs = append(runs, [2]uint64{lo, hi})
		}
	}
	entries := make([]byte, 8*pagemapChunk)
	for at := start &^ 4095; at < end; at += 4096 * pagemapChunk {
		n := int(min((end-at+4095)/4096, pagemapChunk))
		got, _ := pm.ReadAt(entries[:8*n], int64(at/4096*8))
		for i := 0; i < n; i++ {
			pg := at + uint64(i)*4096
			if 8*i+8 > got || binary.LittleEndian.Uint64(entries[8*i:])&(3<<62) != 0 {
				add(pg, pg+4096) // present, swapped, or not known
			}
		}
	}
	return runs
}

// scanRegions picks the mappings a scan reads: the readable and writable
// ones (memcheck's), but rtrace's own, the kernel's ([vvar]...) and
// devices' (reading one may block or change it); a thread's stack from
// its stack pointer up (below it is dead, as memcheck sees it).
func scanRegions(maps []uftrace.Mapping, ends []threadEnd, own []uint64) []trace.HeapRegion {
	var out []trace.HeapRegion
	for _, m := range maps {
		if len(m.Perm) < 2 || m.Perm[0] != 'r' || m.Perm[1] != 'w' || m.End <= m.Start {
			continue
		}
		switch {
		case strings.HasPrefix(m.Path, "[v"), strings.HasPrefix(m.Path, "/memfd:rtrace-"),
			strings.HasPrefix(m.Path, "/dev/") && !strings.HasPrefix(m.Path, "/dev/zero"):
			continue
		}
		r := trace.HeapRegion{Start: m.Start, End: m.End, Kind: trace.RegionRoot}
		switch {
		case m.Path == "[heap]":
			r.Kind = trace.RegionHeap
		case m.Path == "":
			r.Kind = trace.RegionAnon
		case strings.HasPrefix(m.Path, "[stack"):
			r.Kind = trace.RegionStack
		}
		if r.Kind == trace.RegionAnon || r.Kind == trace.RegionStack {
			for _, e := range ends {
				if e.sp >= m.Start && e.sp < m.End {
					r.Kind, r.Start = trace.RegionStack, e.sp&^7
				}
			}
		}
		out = append(out, cutOut(r, own)...)
	}
	return out
}

// cutOut returns r without the [start, end) pairs of own: rtrace's
// anonymous mapping may be one with its neighbour (the kernel merges
// adjacent anonymous mappings of the same protection: a library's bss
// past its file's last page, say), which stays scanned.
func cutOut(r trace.HeapRegion, own []uint64) []trace.HeapRegion {
	var out []trace.HeapRegion
	parts := without(r.Start, r.End, own)
	for i := 0; i+1 < len(parts); i += 2 {
		out = append(out, trace.HeapRegion{Start: parts[i], End: parts[i+1], Kind: r.Kind})
	}
	return out
}

// without is [start, end) less the [lo, hi) pairs of own, as pairs.
func without(start, end uint64, own []uint64) []uint64 {
	parts := []uint64{start, end}
	for i := 0; i+1 < len(own); i += 2 {
		lo, hi := own[i], own[i+1]
		var next []uint64
		for j := 0; j+1 < len(parts); j += 2 {
			a, z := parts[j], parts[j+1]
			if hi <= a || lo >= z {
				next = append(next, a, z)
				continue
			}
			if a < lo {
				next = append(next, a, lo)
			}
			if hi < z {
				next = append(next, hi, z)
			}
		}
		parts = next
	}
	return parts
}

// anonymous says whether m is memory of no file: the brk heap, a stack,
// an anonymous mapping (where heap blocks may be).
func anonymous(m uftrace.Mapping) bool {
	return m.Path == "" || m.Path == "[heap]" || strings.HasPrefix(m.Path, "[stack")
}

// scanTargets are the ranges a block may be in, sorted, as [start, end)
// pairs: the heap and the anonymous mappings, stacks included (a stack
// pointer kept from a thread gone long ago may lie in a mapping that is an
// arena now: postproc tells them apart by the blocks in them).
func scanTargets(maps []uftrace.Mapping) []uint64 {
	var out []uint64
	for _, m := range maps {
		if len(m.Perm) < 2 || m.Perm[0] != 'r' || m.Perm[1] != 'w' || m.End <= m.Start {
			continue
		}
		if anonymous(m) {
			if n := len(out); n > 0 && out[n-1] == m.Start {
				out[n-1] = m.End // one range with the one before
			} else {
				out = append(out, m.Start, m.End)
			}
		}
	}
	return out
}

// inRanges says whether v is in one of the sorted [start, end) pairs.
func inRanges(rs []uint64, v uint64) bool {
	if len(rs) == 0 || v < rs[0] || v >= rs[len(rs)-1] {
		return false
	}
	i, _ := slices.BinarySearch(rs, v+1) // the first bound above v
	return i%2 == 1
}
