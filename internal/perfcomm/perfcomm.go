// Package perfcomm records the task name changes of a process tree (a
// thread's comm: prctl(PR_SET_NAME), pthread_setname_np, exec) with the
// kernel's perf events, and writes them as uftrace's perf-cpuN.dat files,
// which uftrace replay shows as linux:task-name events and in its task
// column. It opens what uftrace record opens for them (utils/perf.c,
// open_perf_event): perf's dummy software event on every CPU, inherited
// by new threads and children, with comm and task records timed by
// CLOCK_MONOTONIC, the clock of rtrace's records.
package perfcomm

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ringPages is each CPU's ring: 32 data pages, as uftrace's
// PERF_MMAP_SIZE (plus the header page).
const ringPages = 32

// Recorder holds the perf events of one process tree.
type Recorder struct {
	mu    sync.Mutex
	fds   []int
	rings [][]byte
	data  [][]byte // each CPU's records read so far, not yet written
}

// Open starts recording the task events of pid and of the threads and
// children it makes from now on.
func Open(pid int) (*Recorder, error) {
	attr := unix.PerfEventAttr{
		Type:        unix.PERF_TYPE_SOFTWARE,
		Config:      unix.PERF_COUNT_SW_DUMMY,
		Sample_type: unix.PERF_SAMPLE_TIME | unix.PERF_SAMPLE_TID,
		Sample:      1,
		Bits: unix.PerfBitSampleIDAll | unix.PerfBitExcludeKernel | unix.PerfBitInherit |
			unix.PerfBitTask | unix.PerfBitComm | unix.PerfBitUseClockID,
		Clockid: unix.CLOCK_MONOTONIC,
	}
	attr.Size = uint32(unsafe.Sizeof(attr))
	r := &Recorder{}
	page := os.Getpagesize()
	for cpu := range runtime.NumCPU() {
		fd, err := unix.PerfEventOpen(&attr, pid, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC|unix.PERF_FLAG_FD_NO_GROUP)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("perf_event_open (see kernel.perf_event_paranoid): %w", err)
		}
		ring, err := unix.Mmap(fd, 0, (1+ringPages)*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			unix.Close(fd)
			r.Close()
			return nil, fmt.Errorf("mapping perf's ring: %w", err)
		}
		r.fds, r.rings, r.data = append(r.fds, fd), append(r.rings, ring), append(r.data, nil)
	}
	return r, nil
}

// drain moves what each ring holds into r.data.
func (r *Recorder) drain() {
	for cpu, ring := range r.rings {
		hdr := (*unix.PerfEventMmapPage)(unsafe.Pointer(&ring[0]))
		head := atomic.LoadUint64(&hdr.Data_head) // then the data (perf_event_open(2): rmb)
		tail := hdr.Data_tail
		data := ring[hdr.Data_offset : hdr.Data_offset+hdr.Data_size]
		size := uint64(len(data))
		// A full ring drops the new records (the kernel counts them in a
		// PERF_RECORD_LOST): head never runs more than size ahead of tail.
		for p := tail; p < head; {
			i := p % size
			n := min(head-p, size-i)
			r.data[cpu] = append(r.data[cpu], data[i:i+n]...)
			p += n
		}
		atomic.StoreUint64(&hdr.Data_tail, head)
	}
}

// Drain reads what the kernel recorded so far (the ring holds 32 pages
// a CPU: of a program making thousands of threads between drains, the
// kernel drops the latest task records).
func (r *Recorder) Drain() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drain()
}

// WriteTo writes the records read since the last WriteTo into dir, as
// perf-cpuN.dat files (uftrace's names), appending to those there.
func (r *Recorder) WriteTo(dir string) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drain()
	for cpu, d := range r.data {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("perf-cpu%d.dat", cpu)), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		_, err = f.Write(d)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		r.data[cpu] = nil
	}
	return nil
}

// Close stops recording.
func (r *Recorder) Close() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, fd := range r.fds {
		unix.Munmap(r.rings[i])
		unix.Close(fd)
	}
	r.fds, r.rings = nil, nil
}
