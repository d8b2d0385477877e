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
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ringPages is each CPU's ring: 256 data pages (1 MiB, about 26000 task
// records), where uftrace's PERF_MMAP_SIZE has 32 but reads them as they
// fill.
const ringPages = 256

// Recorder holds the perf events of one process tree.
type Recorder struct {
	mu    sync.Mutex
	cpus  []int // the CPU of each ring
	fds   []int
	rings [][]byte
	data  [][]byte // each CPU's records read so far, not yet written
	stop  chan struct{}
	done  chan struct{}
}

// parseCPUList reads a kernel CPU list ("0-3,6\n"), nil when it is not one.
func parseCPUList(list string) []int {
	var cpus []int
	for _, r := range strings.Split(strings.TrimSpace(list), ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err1 := strconv.Atoi(lo)
		z, err2 := strconv.Atoi(hi)
		if !isRange {
			z, err2 = a, nil
		}
		if err1 != nil || err2 != nil || a < 0 || z < a || z-a > 1<<16 || len(cpus) > 1<<16 {
			return nil
		}
		for c := a; c <= z; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// drainEvery is how often the rings are read while the program runs.
const drainEvery = 20 * time.Millisecond

// onlineCPUs are the CPUs the kernel runs (/sys/devices/system/cpu/online,
// "0-3,6"): a thread may run on any of them whatever rtrace's own
// affinity (taskset, a cgroup's cpuset).
func onlineCPUs() []int {
	b, _ := os.ReadFile("/sys/devices/system/cpu/online")
	cpus := parseCPUList(string(b))
	if len(cpus) == 0 {
		for c := range runtime.NumCPU() {
			cpus = append(cpus, c)
		}
	}
	return cpus
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
	r := &Recorder{stop: make(chan struct{}), done: make(chan struct{})}
	page := os.Getpagesize()
	for _, cpu := range onlineCPUs() {
		fd, err := unix.PerfEventOpen(&attr, pid, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC|unix.PERF_FLAG_FD_NO_GROUP)
		if err == unix.ENODEV {
			continue // gone offline meanwhile
		}
		if err != nil {
			close(r.done)
			r.Close()
			return nil, fmt.Errorf("perf_event_open (see kernel.perf_event_paranoid): %w", err)
		}
		ring, err := unix.Mmap(fd, 0, (1+ringPages)*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			unix.Close(fd)
			close(r.done)
			r.Close()
			return nil, fmt.Errorf("mapping perf's ring: %w", err)
		}
		r.cpus, r.fds, r.rings, r.data = append(r.cpus, cpu), append(r.fds, fd), append(r.rings, ring), append(r.data, nil)
	}
	go func() {
		defer close(r.done)
		tick := time.NewTicker(drainEvery)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				r.Drain()
			case <-r.stop:
				return
			}
		}
	}()
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

// Drain reads what the kernel recorded so far; a goroutine does it every
// drainEvery (of a program making tens of thousands of threads or names
// between two drains, the kernel drops the latest task records: WriteTo
// counts them).
func (r *Recorder) Drain() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drain()
}

// WriteTo writes the records read since the last WriteTo into dir, as
// perf-cpuN.dat files (uftrace's names), appending to those there. It
// returns how many records the kernel dropped meanwhile (PERF_RECORD_LOST:
// a ring was full).
func (r *Recorder) WriteTo(dir string) (lost uint64, err error) {
	if r == nil {
		return 0, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drain()
	for cpu, d := range r.data { // cpu: the index of the ring
		lost += lostIn(d)
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("perf-cpu%d.dat", r.cpus[cpu])), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return lost, err
		}
		_, err = f.Write(d)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return lost, err
		}
		r.data[cpu] = nil
	}
	return lost, nil
}

// lostIn counts the records the PERF_RECORD_LOST records of d say were
// dropped (perf_event_open(2): header, id, lost).
func lostIn(d []byte) uint64 {
	var n uint64
	for len(d) >= 8 {
		typ, size := binary.LittleEndian.Uint32(d), int(binary.LittleEndian.Uint16(d[6:]))
		if size < 8 || size > len(d) {
			break
		}
		if typ == unix.PERF_RECORD_LOST && size >= 24 {
			n += binary.LittleEndian.Uint64(d[16:])
		}
		d = d[size:]
	}
	return n
}

// Close stops recording.
func (r *Recorder) Close() {
	if r == nil {
		return
	}
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, fd := range r.fds {
		unix.Munmap(r.rings[i])
		unix.Close(fd)
	}
	r.fds, r.rings = nil, nil
}
