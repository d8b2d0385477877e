package tracer

import (
	"bytes"
	"fmt"
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
// (proc(5): minflt is field 10, majflt 12; the command name, field 2, is
// in parentheses and may hold spaces and parentheses itself).
func parseStatFaults(b []byte) ([]uint64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("stat: no command name")
	}
	f := bytes.Fields(b[i+1:]) // from field 3 on
	if len(f) < 10 {
		return nil, fmt.Errorf("stat: %d fields after the name, want 50", len(f))
	}
	minor, err := strconv.ParseUint(string(f[10-3]), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("stat: minflt: %w", err)
	}
	major, err := strconv.ParseUint(string(f[12-3]), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("stat: majflt: %w", err)
	}
	return []uint64{major, minor}, nil
}

// readEvents reads the counters of kinds for th's process and returns the
// EVENT records of what they are at ts, at depth: their values, or with
// old (the readings at the call's entry) the differences.
func readEvents(th *thread, ts uint64, depth int, kinds uftrace.ReadKind, old []uftrace.ReadEvent) ([]uftrace.ReadEvent, []uftrace.Rec) {
	now := readCounters(th.proc.pid, kinds)
	recs := make([]uftrace.Rec, 0, len(now))
	for _, e := range now {
		diff := false
		for _, o := range old {
			if o.Kind == e.Kind {
				e, diff = e.Sub(o), true
			}
		}
		recs = append(recs, uftrace.Rec{Record: uftrace.Record{Time: ts, Type: uftrace.Event, More: true, Depth: depth, Addr: e.EventID(diff)}, Payload: e.Payload()})
	}
	return now, recs
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
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:]) // from field 3 on
	if len(f) < 39-2 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(f[39-3]), 10, 32)
	return uint32(n), err == nil
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
