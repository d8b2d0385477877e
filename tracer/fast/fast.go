package fast

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Layout of a thread's state, as stub.S uses it.
const (
	offGuard    = 0x00
	offDepth    = 0x08
	offUnhook   = 0x10
	offShared   = 0x18
	offWatch    = 0x20
	offLastCPU  = 0x28
	offReal     = 0x30
	offCTail    = 0x38
	offHead     = 0x40
	offTail     = 0x80
	offLost     = 0xc0
	offStall    = 0xc8
	offHeld     = 0xd0
	offWaiting  = 0xd8
	offInRes    = 0xe0
	offInResD   = 0xe8
	offStackLo  = 0xf0
	offStackHi  = 0xf8
	offUnwind   = 0x100
	offBTDepth  = 0x108
	offPCGen    = 0x110
	offResDesc  = 0x118
	offResArg   = 0x120
	offRoomNeed = 0x150
	offResLost  = 0x158
	offWalkN    = 0x160
	offWalkPC   = 0x168
	offWalkSP   = 0x170
	offWalkBP   = 0x178
	offWalkEx   = 0x180
	offResPay   = 0x188
	offInResX   = 0x1c8
	offResTSC   = 0x1d0
	offInResW   = 0x1d8
	offRelSince = 0x1e0
	offSigRes   = 0x1e8
	offCoarse   = 0x1f0
	offMemoCur  = 0x1f8
	offMemoF    = 0x200
	offMemoN    = 0x208
	offWalkRows = 0x400
	offWalkBuf  = 0x800
	offFrames   = 0x1000
	frameSize   = 32
	offRing     = 0x21000
	recSize     = 16
	offSCache   = 0x121000
	scEntry     = 0x110
	offPCCache  = 0x132000
	offSCGen    = 0x142000
	offMemo     = 0x143000
	memoEntries = 64
	memoEnt     = 0x200

	// WalkMax is the most frames the in-process walker finds: rtrace
	// finishes a deeper walk.
	WalkMax = 256
	// StackCacheMax is the deepest stack a thread's stack cache keeps.
	StackCacheMax = 32

	// MaxStack is the depth of a thread's shadow stack: deeper calls run
	// untraced (their entry is not recorded, their return not hijacked).
	MaxStack = 4096
	// RingCap is the number of records a thread's ring holds.
	RingCap = 0x10000
	// StateSize is the size of a thread's state mapping: the ring, then
	// the caches of the resource calls' stacks and of unwind rows.
	StateSize = offMemo + memoEntries*memoEnt

	// TableEntries is the number of threads a process's table can hold at
	// once (its load stays under one half: see Table.Insert).
	TableEntries = 65536
	// TableSize is the size of the thread table mapping.
	TableSize = TableEntries * 16
	hashK     = 0x9E3779B97F4A7C15
	tombstone = 1 // a freed table entry: lookups go on past it
)

// CodeSize is the size of the shared code (Code) at the start of a fast
// scratch mapping.
var CodeSize = uint64(len(blob)+15) &^ 15

// Code returns the shared code for a scratch mapping at base (its bytes
// are position-independent; base only names the symbols), reading the
// thread table at table. rdfsbase: the kernel lets user code read the %fs
// base (HWCAP2_FSGSBASE); otherwise the key is the word at %fs:0, which
// glibc sets to the same value (the TCB points to itself).
//
// alive is the address of the process's lifeline word (0: none), whose
// FUTEX_OWNER_DIED bit the kernel sets when rtrace dies: the code's int3s
// that would stop for rtrace go on without it then (IFGONE in stub.S).
func Code(table, alive uint64, rdfsbase bool) []byte {
	c := make([]byte, CodeSize)
	copy(c, blob)
	binary.LittleEndian.PutUint64(c, table)
	binary.LittleEndian.PutUint64(c[offAlive:], alive)
	if rdfsbase {
		// rdfsbase %rcx (f3 48 0f ae c1), then a 4-byte nop.
		for _, at := range []int{offLookup, offResLookup} {
			copy(c[at:], []byte{0xf3, 0x48, 0x0f, 0xae, 0xc1, 0x0f, 0x1f, 0x40, 0x00})
		}
	}
	return c
}

// Sites are the addresses in a fast scratch mapping whose int3 the tracer
// handles, and where it sends a thread.
type Sites struct {
	Base        uint64 // the code's first byte
	Entry, Exit uint64 // the shared entry routine and the exit stub
	// EntryArgs: the shared entry of a function whose arguments or return
	// value its stub records (ArgsHead).
	EntryArgs uint64
	// EntryMiss: a thread the table does not hold (its key in rcx) stops
	// here (rip is one past the int3); registered, it goes on.
	EntryMiss uint64
	// EntryOut: where an unregistrable thread goes on, untraced.
	EntryOut uint64
	// EntryUnhooked: a call while an exception unwinds the thread's stack.
	EntryUnhooked uint64
	// ExitMiss: a hijacked return whose key the table does not hold (the
	// thread changed its %fs base since the call): rtrace adds the key to
	// the thread's state and the lookup runs again.
	ExitMiss uint64
	// ExitStop: the return of a frame pushed with FlagStop, registers
	// restored and the real return address on top of the stack: rtrace
	// records the EXIT with the return value; the thread goes on to a ret.
	ExitStop uint64
	// ExitEmpty: a hijacked return with no frame: rtrace has lost track,
	// the process cannot go on.
	ExitEmpty uint64
	// Held: the end of a critical section during which rtrace held a
	// signal for the thread (State.Hold): rtrace delivers one held signal
	// at each stop here and clears the state's flag with the last.
	Held uint64
	// ResEntry is the shared entry of resource functions' stubs (ResHead);
	// ResMiss and ResUnhooked are its EntryMiss and EntryUnhooked.
	ResEntry, ResMiss, ResUnhooked uint64
	// WalkStop: the in-process walker stopped (State.WalkStopped): rtrace
	// finishes the walk (State.SetWalk) and the thread goes on.
	WalkStop uint64
	// Gadget: rtrace's system calls in the process run here (`syscall`,
	// then an int3 at GadgetTrap), the thread's own registers written at
	// Saved first (SavedRegs): should rtrace die meanwhile, the thread
	// puts them back itself and goes on (docs/RELIABILITY.md).
	Gadget, GadgetTrap, Saved uint64
	// NewStates runs, as Gadget runs one system call, those that make a
	// thread state's memory (stub.S, newstates): one stop for four.
	NewStates uint64
}

// GadgetOff is the gadget's offset in the shared code (Sites.Gadget).
const GadgetOff = offGadget

// SavedRegs encodes the registers at stub.S's saved, in its order: rip,
// rsp, flags, rax, rbx, rcx, rdx, rsi, rdi, rbp, r8-r15.
func SavedRegs(rip, rsp, flags, rax, rbx, rcx, rdx, rsi, rdi, rbp, r8, r9, r10, r11, r12, r13, r14, r15 uint64) []byte {
	b := make([]byte, 0, 18*8)
	for _, w := range []uint64{rip, rsp, flags, rax, rbx, rcx, rdx, rsi, rdi, rbp, r8, r9, r10, r11, r12, r13, r14, r15} {
		b = binary.LittleEndian.AppendUint64(b, w)
	}
	return b
}

// SitesAt returns the Sites of the shared code at base.
func SitesAt(base uint64) Sites {
	return Sites{
		Base: base, Entry: base + offEntry, Exit: base + offExit, EntryArgs: base + offEntryArgs,
		EntryMiss: base + offEntryMiss, EntryOut: base + offEntryOut,
		EntryUnhooked: base + offEntryUnhooked,
		ExitMiss:      base + offExitMiss, ExitEmpty: base + offExitEmpty, ExitStop: base + offExitStop,
		Held:     base + offHeldTrap,
		ResEntry: base + offResEntry, ResMiss: base + offResMiss, ResUnhooked: base + offResUnhooked,
		WalkStop: base + offWalkStop,
		Gadget:   base + offGadget, GadgetTrap: base + offGadgetTrap, Saved: base + offSaved,
		NewStates: base + offNewStates,
	}
}

// HeadLen is the length of a function's stub head (Head).
const HeadLen = 31

// ErrRange: the stub is out of rel32 range of what it calls.
var ErrRange = errors.New("out of rel32 range")

// Head returns the head of the stub at slot for the function at fn, whose
// shared entry routine is at entry:
//
//	mov %rax,-0x10(%rsp)   save rax below the return address
//	lea fn(%rip),%rax      the function, for the record
//	call entry             record, push the frame, hijack the return
//	mov -0x10(%rsp),%rax
//	movq $0,-8(%rsp)       the return address of the call: no address of
//	                       rtrace's code is left on the stack (a detach
//	                       looks for them)
//
// What follows the head is the function's relocated first instructions
// and a jump back, or a jump to where the function goes on.
func Head(slot, fn, entry uint64) ([]byte, error) {
	h := []byte{0x48, 0x89, 0x44, 0x24, 0xf0, 0x48, 0x8d, 0x05}
	h, err := rel32(h, slot+uint64(len(h))+4, fn)
	if err != nil {
		return nil, fmt.Errorf("function %#x from stub %#x: %w", fn, slot, err)
	}
	h = append(h, 0xe8)
	if h, err = rel32(h, slot+uint64(len(h))+4, entry); err != nil {
		return nil, fmt.Errorf("entry %#x from stub %#x: %w", entry, slot, err)
	}
	h = append(h, 0x48, 0x8b, 0x44, 0x24, 0xf0)
	return append(h, 0x48, 0xc7, 0x44, 0x24, 0xf8, 0, 0, 0, 0), nil
}

// ResHead returns the head of the stub at slot of a resource function
// whose descriptor is at desc (Desc), calling the shared resEntry: Head's,
// with the descriptor in %rax instead of the function.
func ResHead(slot, desc, resEntry uint64) ([]byte, error) {
	return Head(slot, desc, resEntry)
}

// ArgsHead returns the head of the stub at slot of a function whose
// arguments (the first Desc.Args integer registers) or return value
// (DescRet) its records carry (args.S), whose descriptor is at desc:
// Head's, calling the shared entryArgs with the descriptor.
func ArgsHead(slot, desc, entryArgs uint64) ([]byte, error) {
	return Head(slot, desc, entryArgs)
}

// Descriptor flags (res.S's DF_*).
const (
	// DescRelease: a release whose effect does not depend on its result,
	// recorded at its entry; its return is left alone.
	DescRelease = 1
	// DescOut: the record carries the word argument Out points at, read
	// when the call returned 0.
	DescOut = 2
	// DescBacktrace: the record carries the call's backtrace.
	DescBacktrace = 4
	// DescEntryTime: a release recorded at its return; its record's time
	// is its entry's (what it releases may be another thread's before it
	// returns), and the thread's state says a release is being made
	// (State.ReleasingSince) until the record is written.
	DescEntryTime = 8
	// DescBoth: a call that releases and allocates (realloc, dup2): its
	// record carries its entry's time as a last payload word, the time
	// of its releases; the state says so as for DescEntryTime.
	DescBoth = 16
	// DescReleaseFrame: a release recorded at its entry (as DescRelease)
	// whose frame stays for the calls nested in it (operator delete's
	// free); its return writes nothing.
	DescReleaseFrame = 32
	// DescRet: a function's return value is recorded (ArgsHead's
	// descriptors): its frame gets FlagRet.
	DescRet = 64
)

// DescSize is the size of a resource function's descriptor.
const DescSize = 16

// Desc is a resource function's descriptor, which its stub hands the
// shared code: the function, rtrace's number for it (the ring records
// carry it), flags, the arguments its records carry and the out argument.
type Desc struct {
	Fn        uint64
	ID        uint32
	Flags     uint8
	Args, Out uint8
}

// Bytes encodes d as res.S reads it.
func (d Desc) Bytes() []byte {
	b := binary.LittleEndian.AppendUint64(nil, d.Fn)
	b = binary.LittleEndian.AppendUint32(b, d.ID)
	return append(b, d.Flags, d.Args, d.Out, 0)
}

func rel32(b []byte, end, target uint64) ([]byte, error) {
	rel := int64(target) - int64(end)
	if rel < math.MinInt32 || rel > math.MaxInt32 {
		return nil, ErrRange
	}
	return binary.LittleEndian.AppendUint32(b, uint32(int32(rel))), nil
}

// Table is rtrace's copy of a process's thread table: it is the only
// writer, and writes each change into the process (Entry). It holds only
// the entries in use (a process has a few threads, the table room for
// TableEntries): a full copy was 1 MiB of rtrace's heap per traced
// process, each fork's child included. The zero Table is empty.
type Table struct {
	slots map[int]slot // by index; absent: an empty entry
	used  int          // live entries and tombstones
}

type slot struct{ key, state uint64 }

// Entry is one 16-byte table entry to write at byte offset Off.
type Entry struct {
	Off        uint64
	Key, State uint64
}

func index(key uint64) int { return int((key * hashK) >> 48) }

// Insert adds key → state and returns the entry to write into the
// process; ok is false when key cannot be registered (0, the key of a
// thread before its TLS is set up, or a full table).
func (t *Table) Insert(key, state uint64) (Entry, bool) {
	if key == 0 || key == tombstone || t.used >= TableEntries/2 {
		return Entry{}, false
	}
	if t.slots == nil {
		t.slots = map[int]slot{}
	}
	free := -1
	for i := index(key); ; i = (i + 1) % TableEntries {
		switch t.slots[i].key {
		case key:
			t.slots[i] = slot{key, state}
			return Entry{uint64(i) * 16, key, state}, true
		case tombstone:
			if free < 0 {
				free = i
			}
			continue
		case 0:
			if free < 0 {
				free = i
				t.used++
			}
			t.slots[free] = slot{key, state}
			return Entry{uint64(free) * 16, key, state}, true
		}
	}
}

// Remove frees key's entry and returns the tombstone to write, ok false
// when key is not there.
func (t *Table) Remove(key uint64) (Entry, bool) {
	for i := index(key); t.slots[i].key != 0; i = (i + 1) % TableEntries {
		if t.slots[i].key == key {
			t.slots[i] = slot{tombstone, 0}
			return Entry{uint64(i) * 16, tombstone, 0}, true
		}
	}
	return Entry{}, false
}

// Offsets returns the byte offsets of the entries written into the
// process so far, live ones and tombstones, in no order: the rest of the
// table is zeros.
func (t *Table) Offsets() []uint64 {
	offs := make([]uint64, 0, len(t.slots))
	for i := range t.slots {
		offs = append(offs, uint64(i)*16)
	}
	return offs
}

// Lookup returns key's state as the code's lookup finds it.
func (t *Table) Lookup(key uint64) (uint64, bool) {
	for i := index(key); t.slots[i].key != 0; i = (i + 1) % TableEntries {
		if t.slots[i].key == key {
			return t.slots[i].state, true
		}
	}
	return 0, false
}

// Record types in a ring word's low two bits (uftrace's ENTRY and EXIT).
const (
	TypeEntry = 0
	TypeExit  = 1
)

// Word packs a record's type, depth and function address as stub.S does.
func Word(typ int, depth int, addr uint64) uint64 {
	return addr<<16 | uint64(depth)<<2 | uint64(typ)
}

// Unword unpacks a ring word.
func Unword(w uint64) (typ, depth int, addr uint64) {
	return int(w & 3), int(w>>2) & 0x3fff, w >> 16
}
