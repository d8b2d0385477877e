package tracer

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The lifeline (docs/RELIABILITY.md, "rtrace killed"): each process the
// fast engine instruments maps a page it shares with rtrace whose word
// the stubs read before an int3 that would stop for rtrace. The word is a
// robust futex (futex(2), set_robust_list(2)) owned by a thread of rtrace
// that does nothing else: when rtrace dies, however (SIGKILL too), the
// kernel walks that thread's robust list as it exits and sets
// FUTEX_OWNER_DIED in every word on it. The stubs then go on without
// rtrace (untraced, a walk cut short, a value unrecorded) instead of
// trapping into a tracer that is gone, which the kernel turns into a
// SIGTRAP that kills the process.

// lifePage is one process's lifeline page: rtrace's mapping holds, at 0,
// the robust list entry (the next entry's address in rtrace), at 8 the
// word, which the process sees at addr+8. A forked child shares its
// parent's (inherited, MAP_SHARED).
type lifePage struct {
	mem   []byte
	addr  uint64
	users int
	k     *keeper // whose list it is on
}

// word is the address of the page's word in the process (0: no page).
func (p *lifePage) word() uint64 {
	if p == nil {
		return 0
	}
	return p.addr + lifeWordOff
}

const (
	lifeWordOff   = 8
	robustHeadLen = 24 // struct robust_list_head on x86-64
)

// keeper holds the robust list of the tracer thread (the thread that
// ptraces the processes): the kernel marks the words on it as that thread
// exits, before it detaches from its tracees (do_exit: exit_mm, which
// releases the robust list, comes before exit_notify, which lets the
// tracees go; kernel/exit.c). A list on another thread of rtrace could be
// marked after the tracees run on.
type keeper struct {
	mu    sync.Mutex
	head  []byte // struct robust_list_head: {next, futex_offset, list_op_pending}
	tid   uint32
	pages []*lifePage // the list's entries, in its order
}

// newKeeper registers an empty robust list for the calling thread, which
// must be the tracer thread (locked to its goroutine).
func newKeeper() (*keeper, error) {
	head, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	k := &keeper{head: head, tid: uint32(unix.Gettid())}
	*(*uintptr)(unsafe.Pointer(&head[0])) = addrOf(head) // an empty list points at its head
	*(*int64)(unsafe.Pointer(&head[8])) = lifeWordOff
	if _, _, e := unix.RawSyscall(unix.SYS_SET_ROBUST_LIST, addrOf(head), robustHeadLen, 0); e != 0 {
		unix.Munmap(head)
		return nil, fmt.Errorf("set_robust_list: %w", e)
	}
	return k, nil
}

// add puts p's word on the keeper's list, owned by the keeper: first on
// it, after the head.
func (k *keeper) add(p *lifePage) {
	k.mu.Lock()
	defer k.mu.Unlock()
	*(*uint32)(unsafe.Pointer(&p.mem[lifeWordOff])) = k.tid
	pending := (*uintptr)(unsafe.Pointer(&k.head[16]))
	*pending = addrOf(p.mem) // list_op_pending: the kernel looks at it too if rtrace dies now
	next := addrOf(k.head)
	if len(k.pages) > 0 {
		next = addrOf(k.pages[0].mem)
	}
	*(*uintptr)(unsafe.Pointer(&p.mem[0])) = next
	*(*uintptr)(unsafe.Pointer(&k.head[0])) = addrOf(p.mem)
	*pending = 0
	k.pages = append([]*lifePage{p}, k.pages...)
}

// remove takes p's word off the list: its predecessor (the head, or the
// page before it in k.pages, the list's order) points past it.
func (k *keeper) remove(p *lifePage) {
	k.mu.Lock()
	defer k.mu.Unlock()
	i := slices.Index(k.pages, p)
	if i < 0 {
		return
	}
	next := addrOf(k.head)
	if i+1 < len(k.pages) {
		next = addrOf(k.pages[i+1].mem)
	}
	pred := k.head
	if i > 0 {
		pred = k.pages[i-1].mem
	}
	*(*uintptr)(unsafe.Pointer(&pred[0])) = next
	k.pages = slices.Delete(k.pages, i, i+1)
}

// addrOf is the address of b's first byte (memory rtrace mapped: it does
// not move).
func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }

// newLifePage maps a lifeline page in tid's process, stopped, named by the
// memfd name newFastImage wrote at name, and puts it on the tracer
// thread's list (k). An error leaves the process without one: its stubs
// trap as before.
func newLifePage(k *keeper, tid int, name uint64) (*lifePage, error) {
	fd, err := remoteSyscall(tid, unix.SYS_MEMFD_CREATE, name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	defer remoteSyscall(tid, unix.SYS_CLOSE, fd)
	if _, err := remoteSyscall(tid, unix.SYS_FTRUNCATE, fd, 4096); err != nil {
		return nil, fmt.Errorf("ftruncate: %w", err)
	}
	f, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/%d", tid, fd), os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	addr, err := remoteSyscall(tid, unix.SYS_MMAP, 0, 4096, unix.PROT_READ, unix.MAP_SHARED, fd, 0)
	if err != nil {
		unix.Munmap(mem)
		return nil, fmt.Errorf("mmap: %w", err)
	}
	p := &lifePage{mem: mem, addr: addr, users: 1, k: k}
	k.add(p)
	return p, nil
}

// release drops one user of p; the last takes its word off the list and
// unmaps rtrace's view.
func (p *lifePage) release() {
	if p == nil {
		return
	}
	if p.users--; p.users <= 0 && p.mem != nil {
		p.k.remove(p)
		unix.Munmap(p.mem)
		p.mem = nil
	}
}
