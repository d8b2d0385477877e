package uftrace

import (
	"encoding/binary"
	"fmt"
)

// The builtin events of uftrace's read= trigger (uftrace.h, enum
// uftrace_event_id): what was read at a function's entry, and the
// difference at its return.
const (
	EventReadProcStatm = 100001 + iota
	EventReadPageFault
	EventDiffProcStatm
	EventDiffPageFault
)

// EventWatchCPU is the id of uftrace's -W cpu event: the CPU a task runs
// on, recorded when it changed (its data: a 32-bit CPU number).
const EventWatchCPU = 100011

// WatchPayload is the EVENT payload of a -W cpu event.
func WatchPayload(cpu uint32) []byte {
	return EventPayload(binary.LittleEndian.AppendUint32(nil, cpu))
}

// A ReadKind is what a read= trigger reads.
type ReadKind uint8

const (
	ReadProcStatm ReadKind = 1 << iota // "proc/statm": /proc/PID/statm, in KB
	ReadPageFault                      // "page-fault": the process's major and minor faults
)

// readKinds are the read= values and their events, in uftrace's order
// (libmcount/record.c, read_events).
var readKinds = []struct {
	name       string
	kind       ReadKind
	read, diff uint64
	fields     []string
}{
	{"proc/statm", ReadProcStatm, EventReadProcStatm, EventDiffProcStatm, []string{"vmsize", "vmrss", "shared"}},
	{"page-fault", ReadPageFault, EventReadPageFault, EventDiffPageFault, []string{"major", "minor"}},
}

// ParseReadKind reads the value of read= ("proc/statm", "page-fault").
// uftrace's pmu-cycle, pmu-cache and pmu-branch read hardware counters,
// which rtrace does not (yet).
func ParseReadKind(s string) (ReadKind, error) {
	for _, k := range readKinds {
		if k.name == s {
			return k.kind, nil
		}
	}
	switch s {
	case "pmu-cycle", "pmu-cache", "pmu-branch":
		return 0, fmt.Errorf("hardware counters (%s) are not read yet (proc/statm and page-fault are)", s)
	}
	return 0, fmt.Errorf("read= wants proc/statm or page-fault, not %q", s)
}

// ReadEvent is one reading of a read= trigger: the values of its kind,
// in uftrace's order (vmsize, vmrss, shared; major, minor).
type ReadEvent struct {
	Kind   ReadKind
	Values []uint64
}

// Kinds lists the kinds set in k, in uftrace's order.
func (k ReadKind) Kinds() []ReadKind {
	var out []ReadKind
	for _, rk := range readKinds {
		if k&rk.kind != 0 {
			out = append(out, rk.kind)
		}
	}
	return out
}

// EventID is the id of the event recording e: its read, or with diff the
// difference from the entry's.
func (e ReadEvent) EventID(diff bool) uint64 {
	for _, rk := range readKinds {
		if rk.kind == e.Kind {
			if diff {
				return rk.diff
			}
			return rk.read
		}
	}
	return 0
}

// Sub is e less the earlier reading old, each value wrapping as uftrace's
// unsigned subtraction does (its replay prints them signed).
func (e ReadEvent) Sub(old ReadEvent) ReadEvent {
	d := ReadEvent{Kind: e.Kind, Values: make([]uint64, len(e.Values))}
	for i := range e.Values {
		if i < len(old.Values) {
			d.Values[i] = e.Values[i] - old.Values[i]
		}
	}
	return d
}

// EventPayload is the payload of an EVENT record carrying data: its size
// (16 bits), the data, padded to 8 bytes (libmcount/record.c,
// record_event).
func EventPayload(data []byte) []byte {
	b := make([]byte, (2+len(data)+7)&^7)
	binary.LittleEndian.PutUint16(b, uint16(len(data)))
	copy(b[2:], data)
	return b
}

// Payload is the EVENT payload of e: its values as 64-bit words.
func (e ReadEvent) Payload() []byte {
	data := make([]byte, 8*len(e.Values))
	for i, v := range e.Values {
		binary.LittleEndian.PutUint64(data[8*i:], v)
	}
	return EventPayload(data)
}

// eventHasData reports whether uftrace reads data with the event id: one
// of the read= events rtrace writes (utils/fstack.c, read_task_event).
func eventHasData(id uint64) bool {
	return id >= EventReadProcStatm && id <= EventDiffPageFault || id == EventWatchCPU
}

// eventPayloadSize is the size of the EVENT payload that starts with b:
// its 16-bit data size, then the data, padded to 8 bytes.
func eventPayloadSize(b []byte) (int, error) {
	if len(b) < 2 {
		return 0, fmt.Errorf("event payload: %d bytes, no size", len(b))
	}
	return (2 + int(binary.LittleEndian.Uint16(b)) + 7) &^ 7, nil
}
