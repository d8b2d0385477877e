package tracer

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"rtrace/internal/elfx"
	"rtrace/internal/uftrace"
	"rtrace/tracer/fast"
	"rtrace/tracer/unwind"
)

// The in-process walker's side in rtrace (docs/FAST-PATH.md, "The
// walker"): the unwind tables it follows, compiled from each module's CFI
// once per file and written into an arena the process maps read-only; the
// module index of each process, the same modules its unwinder knows; and
// the walks it stops, which rtrace finishes remotely with the same
// unwinder, so the frames are Backtrace's either way.

// arenaSize is the address space an arena takes (a sparse memfd: only
// what is written takes memory). libc's table is 340 KB, cc1plus's 6.2 MB.
const arenaSize = 256 << 20

// walkArena is a memfd shared by rtrace (read-write) and a process and its
// forked children (read-only, inherited): unwind tables and module
// indexes, appended.
type walkArena struct {
	mem    []byte // rtrace's mapping
	addr   uint64 // the process's
	used   uint64
	tables map[string]uint64 // the table of each file, by path, in the process
	users  int               // the images that map it
}

// alloc reserves n bytes, 8-aligned, and returns their offset; false when
// the arena is full.
func (a *walkArena) alloc(n uint64) (uint64, bool) {
	off := (a.used + 7) &^ 7
	if off+n > uint64(len(a.mem)) {
		return 0, false
	}
	a.used = off + n
	return off, true
}

// newArena makes an arena in the process of th, stopped (its other
// threads may run: the system calls run at the gadget).
func (t *Tracer) newArena(th *thread) (*walkArena, error) {
	fi := th.proc.image.fast
	rs := func(nr uint64, args ...uint64) (uint64, error) {
		return remoteSyscallAt(th.tid, fi.gadget(), nr, args...)
	}
	fd, err := rs(unix.SYS_MEMFD_CREATE, fi.tableAddr+fast.TableSize, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	defer rs(unix.SYS_CLOSE, fd)
	if _, err := rs(unix.SYS_FTRUNCATE, fd, arenaSize); err != nil {
		return nil, fmt.Errorf("ftruncate: %w", err)
	}
	f, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/%d", th.proc.pid, fd), os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, arenaSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping the unwind arena: %w", err)
	}
	addr, err := rs(unix.SYS_MMAP, 0, arenaSize, unix.PROT_READ, unix.MAP_SHARED, fd, 0)
	if err != nil {
		unix.Munmap(mem)
		return nil, fmt.Errorf("mapping the unwind arena: %w", err)
	}
	return &walkArena{mem: mem, addr: addr, tables: map[string]uint64{}, users: 1}, nil
}

// put writes tab into the arena (walk.S's table: n, n u32 starts, the u64
// rows 8-aligned) and returns its address in the process.
func (a *walkArena) put(tab *unwind.Table) (uint64, bool) {
	n := uint64(len(tab.Rows))
	rows := (8 + 4*n + 7) &^ 7
	off, ok := a.alloc(rows + 8*n)
	if !ok {
		return 0, false
	}
	b := a.mem[off:]
	binary.LittleEndian.PutUint64(b, n)
	for i, s := range tab.Starts {
		binary.LittleEndian.PutUint32(b[8+4*i:], s)
	}
	for i, r := range tab.Rows {
		binary.LittleEndian.PutUint64(b[rows+8*uint64(i):], r)
	}
	return a.addr + off, true
}

// index writes a module index (walk.S's: n, then {lo, hi, bias, table}
// each) for mods, with the tables the arena holds, and returns its
// address in the process.
func (a *walkArena) index(mods []unwind.ModuleInfo) (uint64, bool) {
	off, ok := a.alloc(8 + 32*uint64(len(mods)))
	if !ok {
		return 0, false
	}
	b := a.mem[off:]
	binary.LittleEndian.PutUint64(b, uint64(len(mods)))
	for i, m := range mods {
		e := b[8+32*i:]
		binary.LittleEndian.PutUint64(e, m.Lo)
		binary.LittleEndian.PutUint64(e[8:], m.Hi)
		binary.LittleEndian.PutUint64(e[16:], m.Bias)
		binary.LittleEndian.PutUint64(e[24:], a.tables[m.Path])
	}
	return a.addr + off, true
}

// tableCache holds the tables compiled in this run, by file: a file is
// compiled once for every process that maps it.
type tableCache struct {
	mu     sync.Mutex
	tables map[tableKey]*unwind.Table
}

// tableKey names a module's file by its path and its contents' identity:
// a program rebuilt at the same path during a traced tree (build, run,
// rebuild, run) has another table.
type tableKey struct {
	path string
	id   elfx.FileID
}

// get returns the table of module m of unwinder u, compiled from the CFI
// u parsed of it (Backtrace needs it anyway).
func (c *tableCache) get(u *unwind.Unwinder, m unwind.ModuleInfo) *unwind.Table {
	id, ok := elfx.StatID(m.Path)
	if !ok {
		return u.Table(m) // not kept: nothing names its contents
	}
	k := tableKey{m.Path, id}
	c.mu.Lock()
	defer c.mu.Unlock()
	if tab, ok := c.tables[k]; ok {
		return tab
	}
	if c.tables == nil {
		c.tables = map[tableKey]*unwind.Table{}
	}
	tab := u.Table(m)
	c.tables[k] = tab
	return tab
}

// fastWalkStop finishes, at Sites.WalkStop, the walk th's walker stopped:
// from the frame it reached, with the unwinder, up to -b frames; then
// puts in the process the tables of the modules the walk went through,
// so that the next walks there need no stop.
func (t *Tracer) fastWalkStop(th *thread) {
	st := th.fastView()
	im := th.proc.image
	if st == nil || im.unwinder == nil {
		return
	}
	frames, pc, sp, bp, exact := st.WalkStopped()
	depth := min(t.cfg.Backtrace, fast.WalkMax)
	if n := len(frames); n > 0 && n < depth {
		mem := &shadowMem{mem: unwind.ProcMem(th.tid), rets: shadowRets(th), hijacked: im.hijacked}
		frames = im.unwinder.Continue(mem, unwind.Regs{PC: pc, SP: sp, BP: bp}, exact, depth-n, frames)
	}
	st.SetWalk(frames)
	t.walkStops++
	t.addTables(th, frames)
}

// addTables puts in th's process the tables of the modules holding pcs
// that it lacks, and points its threads at the new module index.
func (t *Tracer) addTables(th *thread, pcs []uint64) {
	fi := th.proc.image.fast
	mods := th.proc.image.unwinder.Modules()
	if fi.arena == nil {
		a, err := t.newArena(th)
		if err != nil {
			if !t.warnedArena {
				t.warnedArena = true
				fmt.Fprintf(t.cfg.Warn, "rtrace: warning: pid %d: no room for the in-process unwinder (%v): every backtrace stops the program\n", th.proc.pid, err)
			}
			return
		}
		fi.arena = a
	}
	added := fi.walkIndex == 0
	for _, pc := range pcs {
		for _, m := range mods {
			if pc < m.Lo || pc >= m.Hi || fi.arena.tables[m.Path] != 0 {
				continue
			}
			if addr, ok := fi.arena.put(t.tables.get(th.proc.image.unwinder, m)); ok {
				fi.arena.tables[m.Path] = addr
				added = true
			}
		}
	}
	if added {
		t.publishIndex(th.proc)
	}
}

// publishIndex writes p's module index anew (its modules changed, or a
// table came) and points its threads' walkers at it.
func (t *Tracer) publishIndex(p *process) {
	fi := p.image.fast
	if fi == nil || fi.arena == nil || p.image.unwinder == nil {
		return
	}
	idx, ok := fi.arena.index(p.image.unwinder.Modules())
	if !ok {
		return
	}
	fi.walkIndex = idx
	for _, th := range t.threads {
		if th.proc == p && th.fast.fs != nil {
			th.fast.fs.SetUnwind(idx)
		}
	}
}

// fastResState sets up the resource part of th's new state st: the range
// of its stack (from the mapping its stack pointer rsp is in), the
// backtrace depth and the walker's module index.
func (t *Tracer) fastResState(th *thread, st *fast.State, rsp uint64) {
	if t.res == nil {
		return
	}
	st.SetBacktraceDepth(t.cfg.Backtrace)
	if lo, hi, ok := stackRange(th.proc.pid, th.tid, rsp); ok {
		st.SetStack(lo, hi)
	}
	st.SetUnwind(th.proc.image.fast.walkIndex)
}

// stackRange returns the stack thread tid of pid runs on, from the mapping
// holding rsp: the whole of it, or for the process's main stack (which
// grows down) as far as its size limit lets it grow: nothing else is
// mapped there (the kernel keeps mmap_base below it).
func stackRange(pid, tid int, rsp uint64) (lo, hi uint64, ok bool) {
	maps, err := readMaps(pid)
	if err != nil {
		return 0, 0, false
	}
	mm, err := uftrace.ParseMaps(bytes.NewReader(maps))
	if err != nil {
		return 0, 0, false
	}
	for _, m := range mm {
		if rsp < m.Start || rsp >= m.End {
			continue
		}
		start := m.Start
		if m.Path == "[stack]" {
			if limit := stackLimit(pid); limit > m.End-m.Start && limit < m.End {
				start = m.End - limit
			}
		}
		return start, m.End, true
	}
	return 0, 0, false
}

// stackLimit is pid's soft limit of its stack's size (0: unknown or
// unlimited).
func stackLimit(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return 0
	}
	return parseStackLimit(b)
}

// parseStackLimit reads the soft limit of "Max stack size" from the text
// of /proc/PID/limits (proc(5)); 0 when it is missing or "unlimited".
func parseStackLimit(b []byte) uint64 {
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "Max stack size"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.ParseUint(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}

// release drops one image's use of the arena (its process ended or
// exec'd; forked children share their parent's); the last takes rtrace's
// view away.
func (a *walkArena) release() {
	if a == nil {
		return
	}
	if a.users--; a.users <= 0 && a.mem != nil {
		unix.Munmap(a.mem)
		a.mem = nil
	}
}
