package uftrace

import (
	"encoding/binary"
	"fmt"
)

// RecordSize is the size of one record in a <tid>.dat file, without payload.
const RecordSize = 16

// recordMagic is the 3-bit magic every record carries; uftrace rejects others.
const recordMagic = 5

// MaxDepth is the largest depth a record can carry (10 bits).
const MaxDepth = 1<<10 - 1

// EventIDBase is the first id of user events (USDT probes and the like);
// smaller ids are reserved for uftrace's builtin events.
const EventIDBase = 1000000

// RecordType is the 2-bit type of a record.
type RecordType uint8

// Record types as uftrace defines them (uftrace.h, enum uftrace_record_type).
const (
	Entry RecordType = 0
	Exit  RecordType = 1
	Lost  RecordType = 2
	Event RecordType = 3
)

func (t RecordType) String() string {
	switch t {
	case Entry:
		return "entry"
	case Exit:
		return "exit"
	case Lost:
		return "lost"
	case Event:
		return "event"
	}
	return fmt.Sprintf("type%d", uint8(t))
}

// Record is one decoded record of a task. Addr is a function address for
// Entry/Exit, the event id for Event and the number of lost records for Lost.
// More is set when an argument (Entry) or return value (Exit) payload follows.
type Record struct {
	Time  uint64
	Type  RecordType
	More  bool
	Depth int
	Addr  uint64
}

// Rec is one record with its payload: the arguments of an ENTRY or the
// return value of an EXIT (More set), else nil.
type Rec struct {
	Record
	Payload []byte
}

// AppendRecord appends the 16-byte encoding of r to b. Depth is masked to 10
// bits and Addr to 48 bits, as the format stores them.
func AppendRecord(b []byte, r Record) []byte {
	b = append(b, make([]byte, RecordSize)...)
	putRecord(b[len(b)-RecordSize:], &r)
	return b
}

// putRecord encodes r into the first RecordSize bytes of b.
func putRecord(b []byte, r *Record) {
	w := uint64(r.Type&3) | uint64(recordMagic)<<3 |
		uint64(r.Depth&MaxDepth)<<6 | (r.Addr&(1<<48-1))<<16
	if r.More {
		w |= 1 << 2
	}
	_ = b[RecordSize-1]
	binary.LittleEndian.PutUint64(b, r.Time)
	binary.LittleEndian.PutUint64(b[8:], w)
}

// DecodeRecord decodes one record from the first RecordSize bytes of b.
func DecodeRecord(b []byte) (Record, error) {
	if len(b) < RecordSize {
		return Record{}, fmt.Errorf("short record: %d of %d bytes", len(b), RecordSize)
	}
	w := binary.LittleEndian.Uint64(b[8:])
	if m := (w >> 3) & 7; m != recordMagic {
		return Record{}, fmt.Errorf("bad record magic %d (want %d)", m, recordMagic)
	}
	return Record{
		Time:  binary.LittleEndian.Uint64(b),
		Type:  RecordType(w & 3),
		More:  w&(1<<2) != 0,
		Depth: int((w >> 6) & MaxDepth),
		Addr:  w >> 16,
	}, nil
}
