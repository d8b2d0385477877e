package tracer

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"strconv"

	"rtrace/internal/uftrace"
)

// Counters for uftrace's read= trigger (-T FUNC@read=...): read from /proc
// while the thread is stopped at FUNC's entry and return, recorded as
// uftrace's builtin events (libmcount/record.c: save_proc_statm reads
// /proc/self/statm, save_page_fault getrusage(RUSAGE_SELF)).

// readCounters reads the counters of kinds for process pid; those that
// cannot be read are left out.
func readCounters(pid int, kinds uftrace.ReadKind) []uftrace.ReadEvent {
	var out []uftrace.ReadEvent
	for _, k := range kinds.Kinds() {
		var vals []uint64
		var err error
		switch k {
		case uftrace.ReadProcStatm:
			var b []byte
			if b, err = os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid)); err == nil {
				vals, err = parseStatm(b, uint64(os.Getpagesize())/1024)
			}
		case uftrace.ReadPageFault:
			var b []byte
			if b, err = os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
				vals, err = parseStatFaults(b)
			}
		}
		if err == nil {
			out = append(out, uftrace.ReadEvent{Kind: k, Values: vals})
		}
	}
	return out
}

// parseStatm reads the size, resident and shared pages of a
// /proc/PID/statm (proc(5)), in KB with pages of pageKB.
func parseStatm(b []byte, pageKB uint64) ([]uint64, error) {
	f := bytes.Fields(b)
	if len(f) < 3 {
		return nil, fmt.Errorf("statm: %d fields, want 7", len(f))
	}
	vals := make([]uint64, 3)
	for i := range vals {
		n, err := strconv.ParseUint(string(f[i]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("statm: field %d: %w", i+1, err)
		}
		vals[i] = n * pageKB
	}
	return vals, nil
}

// parseStatFaults reads the major and minor faults of a /proc/PID/stat
// (proc(5): minflt is field 10, majflt 12).
func parseStatFaults(b []byte) ([]uint64, error) {
	minor, err := statField(b, 10)
	if err != nil {
		return nil, fmt.Errorf("stat: minflt: %w", err)
	}
	major, err := statField(b, 12)
	if err != nil {
		return nil, fmt.Errorf("stat: majflt: %w", err)
	}
	return []uint64{major, minor}, nil
}

// statField reads field n (counted from 1, as proc(5) counts them) of a
// /proc stat file as a number. The command name, field 2, is in
// parentheses and may hold spaces and parentheses itself.
func statField(b []byte, n int) (uint64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name")
	}
	f := bytes.Fields(b[i+1:]) // from field 3 on
	if n < 3 || len(f) < n-2 {
		return 0, fmt.Errorf("%d fields after the name, want %d", len(f), n-2)
	}
	return strconv.ParseUint(string(f[n-3]), 10, 64)
}

// recordFunc records a record of th: Tracer.record, or fastRecord for the
// fast engine's records the tracer writes.
type recordFunc func(th *thread, r uftrace.Record, payload []byte)

// recordEntry records th's ENTRY of f at ts, at depth, with its
// arguments' payload, and what goes with it: with -W cpu, a watch event
// when th's CPU is not the one *last says (before the ENTRY; the thread's
// first just after it, inside the call: uftrace's save_watchpoint), and
// f's read= counters after it, which it returns for the return's
// (recordReads).
func (t *Tracer) recordEntry(th *thread, f *fn, ts uint64, depth int, payload []byte, last *uint64, record recordFunc) []uftrace.ReadEvent {
	var watch uftrace.Rec
	first, watched := false, false
	if t.cfg.WatchCPU {
		if watch, first, watched = watchCPU(th, last, ts, depth); watched && !first {
			record(th, watch.Record, watch.Payload)
		}
	}
	record(th, uftrace.Record{Time: ts, Type: uftrace.Entry, Depth: depth, Addr: f.addr}, payload)
	if watched && first {
		watch.Depth++
		record(th, watch.Record, watch.Payload)
	}
	return recordReads(th, ts, depth+1, f.reads, nil, record)
}

// recordReads reads the counters of kinds for th's process and records
// them as EVENTs at ts, at depth: their values, or with old (the readings
// at the call's entry) the differences. It returns the values (nil
// without kinds).
func recordReads(th *thread, ts uint64, depth int, kinds uftrace.ReadKind, old []uftrace.ReadEvent, record recordFunc) []uftrace.ReadEvent {
	if kinds == 0 {
		return nil
	}
	now := readCounters(th.proc.pid, kinds)
	for _, e := range now {
		diff := false
		for _, o := range old {
			if o.Kind == e.Kind {
				e, diff = e.Sub(o), true
			}
		}
		record(th, uftrace.Record{Time: ts, Type: uftrace.Event, More: true, Depth: depth, Addr: e.EventID(diff)}, e.Payload())
	}
	return now
}

// cpuOf reads the CPU thread tid of process pid last ran on
// (/proc/PID/task/TID/stat, field 39: proc(5)).
func cpuOf(pid, tid int) (uint32, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid))
	if err != nil {
		return 0, false
	}
	return parseStatCPU(b)
}

// parseStatCPU reads the processor field (39) of a /proc stat file.
func parseStatCPU(b []byte) (uint32, bool) {
	n, err := statField(b, 39)
	return uint32(n), err == nil && n <= math.MaxUint32
}

// watchCPU returns the -W cpu event of th at ts, at depth, when the CPU it
// runs on is not the one *last says (the CPU + 1; 0: none yet), which it
// updates; ok false when there is none to record.
func watchCPU(th *thread, last *uint64, ts uint64, depth int) (rec uftrace.Rec, first, ok bool) {
	cpu, ok := cpuOf(th.proc.pid, th.tid)
	if !ok || uint64(cpu)+1 == *last {
		return uftrace.Rec{}, false, false
	}
	first = *last == 0
	*last = uint64(cpu) + 1
	return uftrace.Rec{Record: uftrace.Record{Time: ts, Type: uftrace.Event, More: true, Depth: depth, Addr: uftrace.EventWatchCPU}, Payload: uftrace.WatchPayload(cpu)}, first, true
}
