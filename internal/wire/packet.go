package wire

import "encoding/binary"

// Packet types: FourCC, first character in the low byte.
const (
	PINF = 'P' | 'I'<<8 | 'N'<<16 | 'F'<<24 // process info
	MINF = 'M' | 'I'<<8 | 'N'<<16 | 'F'<<24 // tracing module
	RESR = 'R' | 'E'<<8 | 'S'<<16 | 'R'<<24 // resource type
	CTXR = 'C' | 'T'<<8 | 'X'<<16 | 'R'<<24 // call context
	CALL = 'C' | 'A'<<8 | 'L'<<16 | 'L'<<24 // resource call
	ARGS = 'A' | 'R'<<8 | 'G'<<16 | 'S'<<24 // its arguments
	BTRC = 'B' | 'T'<<8 | 'R'<<16 | 'C'<<24 // its backtrace
	MMAP = 'M' | 'M'<<8 | 'A'<<16 | 'P'<<24 // executable mapping
	NLIB = 'N' | 'L'<<8 | 'I'<<16 | 'B'<<24 // a library was loaded
	HINF = 'H' | 'I'<<8 | 'N'<<16 | 'F'<<24 // heap information
	OCFG = 'O' | 'C'<<8 | 'F'<<16 | 'G'<<24 // output settings
	FILE = 'F' | 'I'<<8 | 'L'<<16 | 'E'<<24 // attachment

	// Version 3.0 (rtrace) additions. rtrace's reader skips a type it
	// does not know; sp-rtrace's own stops there (docs/PROTOCOL.md).
	CEXT = 'C' | 'E'<<8 | 'X'<<16 | 'T'<<24 // call extension: tid, ns time, 64-bit size
	TASK = 'T' | 'A'<<8 | 'S'<<16 | 'K'<<24 // thread start or exit
	FREC = 'F' | 'R'<<8 | 'E'<<16 | 'C'<<24 // a thread's batch of uftrace records
	USDT = 'U' | 'S'<<8 | 'D'<<16 | 'T'<<24 // USDT probe hit with arguments
	LOST = 'L' | 'O'<<8 | 'S'<<16 | 'T'<<24 // events dropped

	// Version 3.1: function traces.
	SESS = 'S' | 'E'<<8 | 'S'<<16 | 'S'<<24 // a process image (start, exec) and its maps
	MAPS = 'M' | 'A'<<8 | 'P'<<16 | 'S'<<24 // a session's new maps
	DLOP = 'D' | 'L'<<8 | 'O'<<16 | 'P'<<24 // a library loaded by dlopen
	FNAM = 'F' | 'N'<<8 | 'A'<<16 | 'M'<<24 // names of traced functions
	EVNM = 'E' | 'V'<<8 | 'N'<<16 | 'M'<<24 // a user event id's name
	UINF = 'U' | 'I'<<8 | 'N'<<16 | 'F'<<24 // uftrace.data info

	// Version 3.2: compact resource calls (3.3: ids as deltas in CALZ).
	RFUN = 'R' | 'F'<<8 | 'U'<<16 | 'N'<<24 // a resource function's id and name
	STAK = 'S' | 'T'<<8 | 'A'<<16 | 'K'<<24 // a backtrace's id and frames
	CALZ = 'C' | 'A'<<8 | 'L'<<16 | 'Z'<<24 // a thread's resource calls, batched

	// Later 3.3 additions, skipped by the readers before them.
	RUSG = 'R' | 'U'<<8 | 'S'<<16 | 'G'<<24 // a process's usage at its end: pid, peak RSS
	HSCR = 'H' | 'S'<<8 | 'C'<<16 | 'R'<<24 // a process's memory scan at its end: the regions
	HSCW = 'H' | 'S'<<8 | 'C'<<16 | 'W'<<24 // and the words found in them that may be pointers
	PMAP = 'P' | 'M'<<8 | 'A'<<16 | 'P'<<24 // a process's page map at its end: its maps
	PMPG = 'P' | 'M'<<8 | 'P'<<16 | 'G'<<24 // and its writable mappings' pages
)

// Handshake magic byte: a stream starting with it is binary.
const Magic = 0xF0

// Version of the stream rtrace writes.
const (
	Major = 3
	Minor = 3
	// Version is Major.Minor as a header names it.
	Version = "3.3"
)

// Task kinds in TASK packets.
const (
	taskStart = 0
	taskExit  = 1
	taskFork  = 2
)

// maxPagesPacket bounds the pages of a PMPG packet (the tracer's
// pagemapChunk).
const maxPagesPacket = 1 << 16

// pageKernel marks a PMPG page whose kernel flags and count follow.
const pageKernel = 0x80

// pinfFunctions is the PINF flag of a function trace.
const pinfFunctions = 1

// Call types in CALL packets.
const (
	callFree  = 1
	callAlloc = 2
)

// maxPacket bounds a packet's payload: a longer length is corruption.
const maxPacket = 64 << 20

// typeName is a packet type as text ("CALL").
func typeName(t uint32) string {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], t)
	for i, c := range b {
		if c < ' ' || c > '~' {
			b[i] = '?'
		}
	}
	return string(b[:])
}
