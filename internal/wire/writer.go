package wire

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"time"

	"rtrace/internal/trace"
	"rtrace/internal/uftrace"
)

// Writer encodes trace items as a 3.3 stream. The first item must be the
// *trace.Header. It implements trace.Writer.
type Writer struct {
	w       *bufio.Writer
	p       []byte // the packet being built
	started bool
	z       calls // resource calls, batched (calls.go)
	v20     bool  // sp-rtrace's own 2.0 stream (NewWriter20)
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: bufio.NewWriterSize(w, 64<<10)}
}

// NewWriter20 returns a Writer of sp-rtrace's own protocol 2.0, which
// sp-rtrace-postproc reads: a CALL, its ARGS and a BTRC per call, and
// only the packet types 2.0 has. sp-rtrace-postproc stops at the first
// packet type it does not know, so what 2.0 cannot carry is left out:
// thread ids, times finer than a millisecond and sizes above 4 GiB
// (CEXT), tasks, usage, memory scans, page maps, function traces.
func NewWriter20(w io.Writer) *Writer {
	return &Writer{w: bufio.NewWriterSize(w, 64<<10), v20: true}
}

// Write encodes one item.
func (w *Writer) Write(it trace.Item) error {
	if h, ok := it.(*trace.Header); ok {
		if w.started {
			return fmt.Errorf("wire: a second header")
		}
		w.started = true
		return w.header(h)
	}
	if !w.started {
		return fmt.Errorf("wire: %T before the header", it)
	}
	if c, ok := it.(*trace.Call); ok {
		if w.v20 {
			return w.call20(c)
		}
		return w.call(c)
	}
	if w.v20 {
		switch it.(type) {
		case *trace.Module, *trace.Resource, *trace.Context, *trace.Mapping, *trace.File:
		default:
			return nil // no 2.0 packet: see NewWriter20
		}
	}
	// Anything else follows the calls before it.
	if err := w.flushCalls(); err != nil {
		return err
	}
	switch v := it.(type) {
	case *trace.Module:
		w.begin(MINF)
		w.u32(v.ID)
		w.u32(uint32(v.Major)<<16 | uint32(v.Minor))
		w.str(v.Name)
	case *trace.Resource:
		w.begin(RESR)
		w.u32(uint32(v.ID))
		flags := uint32(0)
		if v.Refcount {
			flags = 1
		}
		w.u32(flags)
		w.str(v.Name)
		w.str(v.Desc)
	case *trace.Context:
		w.begin(CTXR)
		w.u32(v.ID)
		w.str(v.Name)
	case *trace.Mapping:
		w.begin(MMAP)
		w.u64(v.From)
		w.u64(v.To)
		w.str(v.Path)
	case *trace.Library:
		w.begin(NLIB)
		w.str(v.Name)
	case *trace.Task:
		w.begin(TASK)
		kind := uint32(taskStart)
		switch {
		case v.Exit:
			kind = taskExit
		case v.PPid != 0:
			kind = taskFork
		}
		w.u32(kind)
		w.u32(uint32(v.Tid))
		w.u32(uint32(v.Pid))
		w.u32(uint32(v.PPid))
		w.u64(v.Time)
	case *trace.Records:
		return w.records(v)
	case *trace.Session:
		w.begin(SESS)
		w.u64(v.Time)
		w.u32(uint32(v.Pid))
		w.u32(0)
		w.str(v.SID)
		w.str(v.Exe)
		w.blob(v.Maps)
	case *trace.Maps:
		w.begin(MAPS)
		w.str(v.SID)
		w.blob(v.Maps)
	case *trace.Dlopen:
		w.begin(DLOP)
		w.u64(v.Time)
		w.u32(uint32(v.Tid))
		w.u32(0)
		w.u64(v.Base)
		w.str(v.SID)
		w.str(v.Path)
	case *trace.Symbols:
		return w.symbols(v)
	case *trace.EventName:
		w.begin(EVNM)
		w.u64(v.ID)
		w.str(v.Name)
	case *trace.Info:
		b, err := v.Info.MarshalBinary()
		if err != nil {
			return fmt.Errorf("wire: encoding the uftrace info: %w", err)
		}
		w.begin(UINF)
		w.blob(b)
	case *trace.Probe:
		w.begin(USDT)
		w.u64(v.Time)
		w.u32(uint32(v.Tid))
		w.str(v.Name)
		w.u32(uint32(len(v.Args)))
		for _, a := range v.Args {
			w.str(a)
		}
	case *trace.Lost:
		w.begin(LOST)
		w.u64(v.Count)
	case *trace.Usage:
		w.begin(RUSG)
		w.u32(uint32(v.Pid))
		w.u64(v.PeakRSS)
	case *trace.HeapRegions:
		w.begin(HSCR)
		w.u32(uint32(v.Pid))
		w.u32(uint32(len(v.Regions)))
		for _, r := range v.Regions {
			w.u64(r.Start)
			w.u64(r.End)
			w.p = append(w.p, byte(r.Kind))
		}
	case *trace.HeapWords:
		return w.heapWords(v)
	case *trace.PageMap:
		w.begin(PMAP)
		w.u32(uint32(v.Pid))
		w.blob([]byte(v.Maps))
	case *trace.PageFlags:
		// A byte a page, Info; with pageKernel set, the kernel's flags
		// and mapping count follow.
		w.begin(PMPG)
		w.u32(uint32(v.Pid))
		w.u64(v.At)
		w.u32(uint32(len(v.Pages)))
		for _, pg := range v.Pages {
			if !pg.Kernel {
				w.p = append(w.p, pg.Info&^pageKernel)
				continue
			}
			w.p = append(w.p, pg.Info|pageKernel)
			w.u64(pg.KFlags)
			w.u32(pg.KCount)
		}
		for len(w.p)%4 != 0 {
			w.p = append(w.p, 0) // packets are 4-aligned; the reader stops at the count
		}
	case *trace.File:
		w.begin(FILE)
		w.str(v.Name)
		w.str(v.Path)
	case *trace.Comment:
		return nil // text only
	default:
		return fmt.Errorf("wire: cannot encode %T", it)
	}
	return w.end()
}

// records writes FREC: tid, count, then each record's two 64-bit words
// as uftrace stores them, a record with its More bit followed by its
// payload as a blob. A batch too large for one packet is split.
func (w *Writer) records(v *trace.Records) error {
	recs := v.Recs
	for len(recs) > 0 {
		n, size := 0, 0
		for n < len(recs) && (n == 0 || size+24+len(recs[n].Payload) < maxPacket/2) {
			size += 24 + len(recs[n].Payload)
			n++
		}
		w.begin(FREC)
		w.u32(uint32(v.Tid))
		w.u32(uint32(n))
		for _, r := range recs[:n] {
			w.p = uftrace.AppendRecord(w.p, r.Record)
			if r.More {
				w.blob(r.Payload)
			}
		}
		if err := w.end(); err != nil {
			return err
		}
		recs = recs[n:]
	}
	return nil
}

// symbols writes FNAM packets: sid, count, then each function's address
// and name; a long list is split.
func (w *Writer) symbols(v *trace.Symbols) error {
	funcs := v.Funcs
	for first := true; first || len(funcs) > 0; first = false {
		n, size := 0, 0
		for n < len(funcs) && size < maxPacket/2 {
			size += 12 + len(funcs[n].Name)
			n++
		}
		w.begin(FNAM)
		w.str(v.SID)
		w.u32(uint32(n))
		for _, f := range funcs[:n] {
			w.u64(f.Addr)
			w.str(f.Name)
		}
		if err := w.end(); err != nil {
			return err
		}
		funcs = funcs[n:]
	}
	return nil
}

// Flush writes buffered packets to the underlying writer.
func (w *Writer) Flush() error {
	if err := w.flushCalls(); err != nil {
		return err
	}
	return w.w.Flush()
}

// Close flushes; it does not close the underlying writer.
func (w *Writer) Close() error { return w.Flush() }

func (w *Writer) header(h *trace.Header) error {
	arch := h.Arch
	if arch == "" {
		arch = "x86_64"
	}
	major, minor := byte(Major), byte(Minor)
	if w.v20 {
		major, minor = 2, 0
	}
	hs := []byte{Magic, 0, major, minor, byte(len(arch))}
	hs = append(hs, arch...)
	hs = append(hs, 0, 8) // little endian, 8-byte pointers
	for len(hs)%4 != 0 {
		hs = append(hs, 0)
	}
	hs[1] = byte(len(hs) - 2)
	if _, err := w.w.Write(hs); err != nil {
		return err
	}
	w.begin(OCFG)
	w.str(h.OutDir)
	w.str(h.PostOpts)
	if err := w.end(); err != nil {
		return err
	}
	w.begin(PINF)
	w.u32(uint32(h.Pid))
	w.u32(uint32(h.Time.Unix()))
	w.u32(uint32(h.Time.Nanosecond() / 1000))
	w.u32(uint32(h.Depth))
	w.str(h.Process)
	if h.Functions && !w.v20 { // after sp-rtrace's fields: a 2.0 reader stops before it
		w.u32(pinfFunctions)
	}
	return w.end()
}

// call20 writes CALL, ARGS (when any) and BTRC, as sp-rtrace's modules
// send them: BTRC follows every call, with 0 frames when there are none.
// The time is in milliseconds of the day (0 when the call has none), the
// size 32 bits (a larger one is cut to the largest it holds).
func (w *Writer) call20(c *trace.Call) error {
	w.begin(CALL)
	w.u32(uint32(c.Res))
	w.u32(c.Context)
	var ms uint32
	if c.Time > 0 {
		ms = uint32(c.Time / time.Millisecond)
	}
	w.u32(ms)
	kind := uint32(callFree)
	if c.Alloc {
		kind = callAlloc
	}
	w.u32(kind)
	w.str(c.Name)
	w.u32(uint32(min(c.Size, math.MaxUint32)))
	w.u64(c.ID)
	if err := w.end(); err != nil {
		return err
	}
	if len(c.Args) > 0 {
		w.begin(ARGS)
		w.u32(uint32(len(c.Args)))
		for _, a := range c.Args {
			w.str(clip20(a.Name))
			w.str(clip20(a.Value))
		}
		if err := w.end(); err != nil {
			return err
		}
	}
	w.begin(BTRC)
	w.u32(uint32(len(c.Frames)))
	for _, f := range c.Frames {
		w.u64(f.Addr)
	}
	return w.end()
}

// clip20 cuts an argument string of a 2.0 stream to 512 bytes: sp-rtrace's
// post-processor reads the stream into a buffer of 8 KiB, 4 KiB at a time
// (src/rtrace-postproc/parse_binary.c, BUFFER_SIZE), and a packet that
// does not fit is never whole.
func clip20(s string) string {
	if len(s) > 512 {
		return s[:512]
	}
	return s
}

func (w *Writer) begin(typ uint32) {
	w.p = binary.LittleEndian.AppendUint32(w.p[:0], typ)
	w.p = append(w.p, 0, 0, 0, 0)
}

func (w *Writer) end() error {
	binary.LittleEndian.PutUint32(w.p[4:], uint32(len(w.p)-8))
	_, err := w.w.Write(w.p)
	return err
}

func (w *Writer) u32(v uint32) { w.p = binary.LittleEndian.AppendUint32(w.p, v) }
func (w *Writer) u64(v uint64) { w.p = binary.LittleEndian.AppendUint64(w.p, v) }

// blob writes bytes of any length: u32 length, the bytes, NULs up to a
// multiple of 4.
func (w *Writer) blob(b []byte) {
	w.u32(uint32(len(b)))
	w.p = append(w.p, b...)
	for len(w.p)%4 != 0 {
		w.p = append(w.p, 0)
	}
}

// str writes sp-rtrace's string: u16 length, bytes, NULs up to a multiple
// of 4 (the length written includes the padding, as the original does).
func (w *Writer) str(s string) {
	if len(s) > 0xfff0 {
		s = s[:0xfff0]
	}
	n := len(s)
	if n == 0 { // the original writes a zero dword for an empty string
		w.p = append(w.p, 0, 0, 0, 0)
		return
	}
	pad := (4 - (2+n)%4) % 4
	w.p = binary.LittleEndian.AppendUint16(w.p, uint16(n+pad))
	w.p = append(w.p, s...)
	for range pad {
		w.p = append(w.p, 0)
	}
}

// heapWordsMax bounds the words of one HSCW packet (at most 20 bytes
// each): an item with more goes in several.
const heapWordsMax = 1 << 16

// heapWords writes v as HSCW packets: pid, count, then each word as two
// varints, its address's distance from the previous one's in words (the
// first's from 0) and its value's zigzag distance from the previous
// value: pointers near each other take 2-4 bytes where two words took 16.
func (w *Writer) heapWords(v *trace.HeapWords) error {
	ws := v.Words
	for {
		n := min(len(ws), heapWordsMax)
		w.begin(HSCW)
		w.u32(uint32(v.Pid))
		w.u32(uint32(n))
		var at, val uint64
		for _, x := range ws[:n] {
			if x.At < at || x.At%8 != 0 {
				return fmt.Errorf("wire: heap word at %#x after %#x: not in address order, or not aligned", x.At, at)
			}
			w.p = binary.AppendUvarint(w.p, (x.At-at)/8)
			d := int64(x.Val - val)
			w.p = binary.AppendUvarint(w.p, uint64(d<<1)^uint64(d>>63))
			at, val = x.At, x.Val
		}
		if err := w.end(); err != nil {
			return err
		}
		ws = ws[n:]
		if len(ws) == 0 {
			return nil
		}
	}
}
