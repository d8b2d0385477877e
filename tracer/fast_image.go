package tracer

import (
	"encoding/binary"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"rtrace/tracer/fast"
	"rtrace/tracer/ptrace"
)

// fastImage is the fast engine's state of one address space.
type fastImage struct {
	tableAddr uint64 // the thread table in the process
	rdfsbase  bool   // the code reads the %fs base itself
	table     fast.Table
	sites     []fast.Sites // one shared code copy per scratch mapping
	free      []*fast.State
	chunk     int  // states made by the last newStates
	cloned    bool // a function runs from a copy: return addresses into it
	disabled  bool // no entry is armed any more (a clone(CLONE_VM) child)
	dead      bool // the address space was replaced by an exec
	ended     bool // the process ended: states are unmapped as they close
	warned    bool // a thread could not be registered (the table is full)
	// inherited are the table entries a forked child's copy of the
	// table holds: its parent's at the fork, until fastFork zeroes them.
	inherited []uint64
	// arena holds the in-process walker's tables and module indexes (a
	// forked child shares its parent's); walkIndex is the process's index
	// (0: none yet).
	arena     *walkArena
	walkIndex uint64
	// life is the process's lifeline page (fast_lifeline.go; a forked
	// child shares its parent's); nil: none.
	life *lifePage
}

// name of the thread state memfds, written after the table.
const memfdName = "rtrace-thread\x00"

// newFastImage maps the thread table in tid's process, stopped.
func newFastImage(tid int) (*fastImage, error) {
	addr, err := remoteSyscall(tid, unix.SYS_MMAP, 0, fast.TableSize+4096,
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS, ^uint64(0), 0)
	if err != nil {
		return nil, fmt.Errorf("mapping the thread table: %w", err)
	}
	if err := ptrace.WriteText(tid, addr+fast.TableSize, []byte(memfdName)); err != nil {
		return nil, fmt.Errorf("writing the thread table: %w", err)
	}
	return &fastImage{tableAddr: addr, rdfsbase: hasFSGSBase()}, nil
}

// preTLS is where, in the thread table's mapping, a static program's
// first thread finds its %fs base until its C library sets up TLS: a word
// of zeros past the memfd name (newFastImage).
const preTLS = fast.TableSize + 4096 - 8

// setPreTLS gives tid, stopped at the exec of a static program, a %fs base
// when it has none, for stubs that read their key at %fs:0 (no rdfsbase):
// a static C library runs instrumented functions before its TLS exists
// (__libc_setup_tls sets the base with arch_prctl), and their stubs read
// address 0. Pointing the base at a zero word gives them key 0, as
// rdfsbase's 0 does: each such call stops at entry_miss and goes on
// untraced. rtrace's own key for the thread follows (keyOf); nothing of
// the program reads %fs before its C library sets it: it would fault.
func (fi *fastImage) setPreTLS(tid int) error {
	var regs unix.PtraceRegs
	if err := ptrace.GetRegs(tid, &regs); err != nil {
		return err
	}
	if fi.rdfsbase || regs.Fs_base != 0 {
		return nil
	}
	regs.Fs_base = fi.tableAddr + preTLS
	return ptrace.SetRegs(tid, &regs)
}

// keyOf is the key the stubs compute for thread tid, stopped, whose %fs
// base is fs: the base with rdfsbase, else the word at %fs:0 (glibc's TCB
// points to itself; setPreTLS's zero word gives 0). 0 when that word
// cannot be read: the stubs would fault reading it.
func (fi *fastImage) keyOf(tid int, fs uint64) uint64 {
	if fi.rdfsbase || fs == 0 {
		return fs
	}
	w, err := ptrace.PeekWord(tid, fs)
	if err != nil {
		return 0
	}
	return w
}

// isExit reports whether addr is one of the image's exit stubs.
func (fi *fastImage) isExit(addr uint64) bool {
	for _, s := range fi.sites {
		if s.Exit == addr {
			return true
		}
	}
	return false
}

// site returns the shared code copy holding the int3 at pc, if any.
func (fi *fastImage) site(pc uint64) (fast.Sites, bool) {
	for _, s := range fi.sites {
		if pc >= s.Base && pc < s.Base+fast.CodeSize {
			return s, true
		}
	}
	return fast.Sites{}, false
}

// writeEntry writes a table entry into the process of tid (any live
// thread of it, stopped or not): the state first, so that a thread finding
// the key finds its state.
func (fi *fastImage) writeEntry(tid int, e fast.Entry) error {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], e.State)
	if err := writeMem(tid, fi.tableAddr+e.Off+8, b[:]); err != nil {
		return err
	}
	binary.LittleEndian.PutUint64(b[:], e.Key)
	return writeMem(tid, fi.tableAddr+e.Off, b[:])
}

// clearAllOver is the number of entries past which clearTable writes the
// whole table at once instead of each entry.
const clearAllOver = 64

// clearTable zeroes the entries at offsets offs of the thread table at
// table in tid's process: a forked child's copy, whose other entries are
// zeros. Only those: zeroing the whole 1 MiB broke copy-on-write page by
// page, 1 MiB of the child's memory and a fault per 4 KiB
// (docs/FAST-PATH.md); but the whole table in one write once the entries
// are many.
func clearTable(tid int, table uint64, offs []uint64) error {
	if len(offs) > clearAllOver {
		return writeMem(tid, table, make([]byte, fast.TableSize))
	}
	if len(offs) == 0 {
		return nil
	}
	mem, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", tid), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer mem.Close()
	var zero [16]byte
	for _, off := range offs {
		if _, err := mem.WriteAt(zero[:], int64(table+off)); err != nil {
			return err
		}
	}
	return nil
}

// writeMem writes b at addr in the memory of thread tid's process
// (/proc/<tid>/mem: one system call, whatever the size).
func writeMem(tid int, addr uint64, b []byte) error {
	mem, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", tid), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer mem.Close()
	_, err = mem.WriteAt(b, int64(addr))
	return err
}

// gadget is where a thread runs rtrace's system calls: in the
// executable's scratch mapping, which holds the first shared code copy.
func (fi *fastImage) gadget() remoteGadget {
	s := fi.sites[0]
	return remoteGadget{pc: s.Gadget, trap: s.GadgetTrap, saved: s.Saved}
}

// memfdName is the address of the memfd name newFastImage wrote.
func (fi *fastImage) memfdName() uint64 { return fi.tableAddr + fast.TableSize }
