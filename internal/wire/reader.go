package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"rtrace/internal/trace"
	"rtrace/internal/uftrace"
)

// Reader decodes a stream (rtrace 3.x or sp-rtrace 2.x) into trace items.
// It implements trace.Reader. Unknown packet types are skipped. A stream
// cut short yields every whole item, then an error naming the offset.
type Reader struct {
	r       *bufio.Reader
	off     int64 // of the next unread byte
	ptr     int   // pointer size: 4 or 8
	major   int
	hdr     *trace.Header
	pending []trace.Item // items decoded; those from head on not yet returned
	head    int
	hbuf    [8]byte     // packet header
	call    *trace.Call // a call waiting for its BTRC
	index   int         // calls so far
	z       czReader    // 3.2's named functions and backtraces
	buf     []byte
	err     error
}

// ErrNotWire: the input does not start with the handshake.
var ErrNotWire = errors.New("not an rtrace/sp-rtrace binary stream (no 0xF0 handshake)")

// NewReader reads the handshake from r. The header item (filled in from
// the handshake and the PINF/OCFG packets) is the first Next returns.
func NewReader(r io.Reader) (*Reader, error) {
	rd := &Reader{r: bufio.NewReaderSize(r, 64<<10)}
	hs := make([]byte, 2)
	if _, err := io.ReadFull(rd.r, hs); err != nil {
		return nil, fmt.Errorf("reading the handshake: %w", noEOF(err))
	}
	if hs[0] != Magic {
		return nil, ErrNotWire
	}
	body := make([]byte, hs[1])
	if _, err := io.ReadFull(rd.r, body); err != nil {
		return nil, fmt.Errorf("reading the handshake: %w", noEOF(err))
	}
	rd.off = int64(2 + len(body))
	if len(body) < 3 || int(body[2])+5 > len(body) {
		return nil, fmt.Errorf("handshake of %d bytes is too short", len(body))
	}
	major, minor, alen := body[0], body[1], int(body[2])
	arch := string(body[3 : 3+alen])
	endian, ptr := body[3+alen], int(body[4+alen])
	if major < 2 || major > Major {
		return nil, fmt.Errorf("protocol version %d.%d is not supported (2.x and 3.x are)", major, minor)
	}
	if endian != 0 {
		return nil, fmt.Errorf("big-endian streams are not supported")
	}
	if ptr != 4 && ptr != 8 {
		return nil, fmt.Errorf("pointer size %d is not supported", ptr)
	}
	rd.ptr, rd.major = ptr, int(major)
	rd.hdr = &trace.Header{Version: fmt.Sprintf("%d.%d", major, minor), Arch: arch, Binary: true}
	return rd, nil
}

// Next returns the next item; io.EOF at the end of a whole stream.
func (rd *Reader) Next() (trace.Item, error) {
	for rd.head == len(rd.pending) {
		rd.pending, rd.head = rd.pending[:0], 0 // one queue, reused
		if rd.err != nil {
			return nil, rd.err
		}
		rd.err = rd.packet()
		if rd.err != nil && rd.call != nil { // a call cut off before its BTRC
			rd.emit(rd.call)
			rd.call = nil
		}
		if rd.err != nil && rd.hdr != nil {
			rd.emit(rd.hdr)
			rd.hdr = nil
		}
	}
	it := rd.pending[rd.head]
	rd.pending[rd.head] = nil
	rd.head++
	return it, nil
}

// emit queues an item; the header goes out before anything else.
func (rd *Reader) emit(it trace.Item) {
	if rd.hdr != nil && it != trace.Item(rd.hdr) {
		rd.pending = append(rd.pending, rd.hdr)
		rd.hdr = nil
	}
	rd.pending = append(rd.pending, it)
}

// packet reads and decodes one packet.
func (rd *Reader) packet() error {
	h := rd.hbuf[:]
	start := rd.off
	n, err := io.ReadFull(rd.r, h)
	rd.off += int64(n)
	if err == io.EOF {
		return io.EOF
	}
	if err != nil {
		return fmt.Errorf("stream cut short in a packet header at offset %d", start)
	}
	typ, size := binary.LittleEndian.Uint32(h[:]), binary.LittleEndian.Uint32(h[4:])
	if size > maxPacket {
		return fmt.Errorf("packet %s at offset %d claims %d bytes: corrupt stream", typeName(typ), start, size)
	}
	if cap(rd.buf) < int(size) {
		rd.buf = make([]byte, size)
	}
	body := rd.buf[:size]
	n, err = io.ReadFull(rd.r, body)
	rd.off += int64(n)
	if err != nil {
		if typ == CALZ && n >= 16 {
			// A batch's calls are whole one by one: those before the cut
			// are kept (calz stops at the first cut record).
			rd.calz(&decoder{b: body[:n], ptr: rd.ptr})
		}
		return fmt.Errorf("stream cut short in packet %s at offset %d (%d of %d bytes)", typeName(typ), start, n, size)
	}
	d := &decoder{b: body, ptr: rd.ptr}
	if err := rd.decode(typ, d); err != nil {
		return fmt.Errorf("packet %s at offset %d: %w", typeName(typ), start, err)
	}
	return nil
}

func (rd *Reader) decode(typ uint32, d *decoder) error {
	if typ != CEXT && typ != ARGS && typ != BTRC && rd.call != nil {
		rd.emit(rd.call)
		rd.call = nil
	}
	switch typ {
	case OCFG:
		if rd.hdr != nil {
			rd.hdr.OutDir, rd.hdr.PostOpts = d.str(), d.str()
		}
	case PINF:
		pid, sec, usec, depth := d.u32(), d.u32(), d.u32(), d.u32()
		name := d.str()
		var flags uint32
		if len(d.b) >= 4 { // 3.1: flags after sp-rtrace's fields
			flags = d.u32()
		}
		if rd.hdr != nil {
			rd.hdr.Pid, rd.hdr.Depth, rd.hdr.Process = int(pid), int(depth), name
			rd.hdr.Functions = flags&pinfFunctions != 0
			if sec != 0 {
				rd.hdr.Time = time.Unix(int64(sec), int64(usec)*1000)
			}
		}
	case MINF:
		id, ver := d.u32(), d.u32()
		rd.emit(&trace.Module{ID: id, Major: uint16(ver >> 16), Minor: uint16(ver), Name: d.str()})
	case RESR:
		id, flags := d.u32(), d.u32()
		rd.emit(&trace.Resource{ID: int(id), Refcount: flags&1 != 0, Name: d.str(), Desc: d.str()})
	case CTXR:
		rd.emit(&trace.Context{ID: d.u32(), Name: d.str()})
	case MMAP:
		from, to := d.ptrv(), d.ptrv()
		rd.emit(&trace.Mapping{From: from, To: to, Path: d.str()})
	case NLIB:
		rd.emit(&trace.Library{Name: d.str()})
	case FILE:
		rd.emit(&trace.File{Name: d.str(), Path: d.str()})
	case CALL:
		c := &trace.Call{Res: int(d.u32()), Context: d.u32()}
		c.Time = time.Duration(d.u32()) * time.Millisecond
		c.Alloc = d.u32() == callAlloc
		c.Name = d.str()
		c.Size = uint64(d.u32())
		c.ID = d.ptrv()
		rd.index++
		c.Index = rd.index
		rd.call = c
	case CEXT:
		tid, _, ns, size := d.u32(), d.u32(), d.u64(), d.u64()
		if rd.call != nil && d.err == nil {
			rd.call.Tid, rd.call.Time, rd.call.Size = int(tid), time.Duration(ns), size
		}
	case ARGS:
		n := d.u32()
		for i := uint32(0); i < n && d.err == nil; i++ {
			a := trace.Arg{Name: d.str(), Value: d.str()}
			if rd.call != nil && d.err == nil {
				rd.call.Args = append(rd.call.Args, a)
			}
		}
	case BTRC:
		n := d.u32()
		if uint64(n)*uint64(rd.ptr) > uint64(len(d.b)) {
			return fmt.Errorf("%d frames do not fit in %d bytes", n, len(d.b))
		}
		var frames []trace.Frame
		if n > 0 {
			frames = make([]trace.Frame, n)
		}
		for i := range frames {
			frames[i].Addr = d.ptrv()
		}
		if rd.call != nil {
			rd.call.Frames = frames
			rd.emit(rd.call)
			rd.call = nil
		}
	case TASK:
		kind, tid, pid, ppid, ns := d.u32(), d.u32(), d.u32(), d.u32(), d.u64()
		t := &trace.Task{Exit: kind == taskExit, Tid: int(tid), Pid: int(pid), Time: ns}
		if kind == taskFork {
			t.PPid = int(ppid)
		}
		rd.emit(t)
	case FREC:
		return rd.records(d)
	case SESS:
		ss := &trace.Session{Time: d.u64(), Pid: int(d.u32())}
		d.u32()
		ss.SID, ss.Exe, ss.Maps = d.str(), d.str(), bytes.Clone(d.blob())
		rd.emit(ss)
	case MAPS:
		rd.emit(&trace.Maps{SID: d.str(), Maps: bytes.Clone(d.blob())})
	case DLOP:
		dl := &trace.Dlopen{Time: d.u64(), Tid: int(d.u32())}
		d.u32()
		dl.Base, dl.SID, dl.Path = d.u64(), d.str(), d.str()
		rd.emit(dl)
	case FNAM:
		sym := &trace.Symbols{SID: d.str()}
		n := d.u32()
		if uint64(n)*12 > uint64(len(d.b)) {
			return fmt.Errorf("%d functions do not fit in %d bytes", n, len(d.b))
		}
		sym.Funcs = make([]trace.Func, 0, n)
		for i := uint32(0); i < n && d.err == nil; i++ {
			sym.Funcs = append(sym.Funcs, trace.Func{Addr: d.u64(), Name: d.str()})
		}
		rd.emit(sym)
	case EVNM:
		rd.emit(&trace.EventName{ID: d.u64(), Name: d.str()})
	case UINF:
		b := d.blob()
		if d.err != nil {
			return d.err
		}
		in, err := uftrace.ParseInfo(b)
		if err != nil {
			return fmt.Errorf("uftrace info: %w", err)
		}
		rd.emit(&trace.Info{Info: *in})
	case USDT:
		p := &trace.Probe{Time: d.u64(), Tid: int(d.u32()), Name: d.str()}
		n := d.u32()
		for i := uint32(0); i < n && d.err == nil; i++ {
			p.Args = append(p.Args, d.str())
		}
		rd.emit(p)
	case LOST:
		rd.emit(&trace.Lost{Count: d.u64()})
	case RUSG:
		rd.emit(&trace.Usage{Pid: int(d.u32()), PeakRSS: d.u64()})
	case HSCR:
		r := &trace.HeapRegions{Pid: int(d.u32())}
		n := d.u32()
		if uint64(n)*17 > uint64(len(d.b)) {
			return fmt.Errorf("HSCR: %d regions in %d bytes", n, len(d.b))
		}
		for i := uint32(0); i < n; i++ {
			r.Regions = append(r.Regions, trace.HeapRegion{Start: d.u64(), End: d.u64(), Kind: trace.RegionKind(d.take(1)[0])})
		}
		rd.emit(r)
	case HSCW:
		return rd.heapWords(d)
	case PMAP:
		rd.emit(&trace.PageMap{Pid: int(d.u32()), Maps: string(d.blob())})
	case PMPG:
		return rd.pageFlags(d)
	case RFUN:
		return rd.rfun(d)
	case STAK:
		return rd.stak(d)
	case CALZ:
		return rd.calz(d)
	default: // HINF and types of later versions: skipped
		return nil
	}
	return d.err
}

// records decodes FREC: a thread's records, a record with its More bit
// followed by its payload.
func (rd *Reader) records(d *decoder) error {
	tid, n := d.u32(), d.u32()
	if uint64(n)*uftrace.RecordSize > uint64(len(d.b)) {
		return fmt.Errorf("%d records do not fit in %d bytes", n, len(d.b))
	}
	v := &trace.Records{Tid: int(tid), Recs: make([]trace.Rec, 0, n)}
	for i := uint32(0); i < n && d.err == nil; i++ {
		b := d.take(uftrace.RecordSize)
		if b == nil {
			break
		}
		r, err := uftrace.DecodeRecord(b)
		if err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		var payload []byte
		if r.More {
			payload = bytes.Clone(d.blob())
			if d.err == nil && len(payload)%8 != 0 {
				return fmt.Errorf("record %d: payload of %d bytes (want a multiple of 8)", i, len(payload))
			}
		}
		v.Recs = append(v.Recs, trace.Rec{Record: r, Payload: payload})
	}
	if d.err != nil {
		return d.err
	}
	rd.emit(v)
	return nil
}

// decoder reads the fields of one packet's payload, remembering the first
// overrun instead of panicking.
type decoder struct {
	b   []byte
	ptr int
	err error
}

var errShort = errors.New("payload shorter than its fields")

func (d *decoder) take(n int) []byte {
	if d.err != nil || n > len(d.b) {
		d.err = errShort
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u32() uint32 {
	if b := d.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if b := d.take(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (d *decoder) ptrv() uint64 {
	if d.ptr == 4 {
		return uint64(d.u32())
	}
	return d.u64()
}

// blob reads bytes written by Writer.blob; the result aliases the packet.
func (d *decoder) blob() []byte {
	n := d.u32()
	if d.err != nil || uint64(n) > uint64(len(d.b)) {
		d.err = errShort
		return nil
	}
	b := d.take(int(n))
	d.take(min(len(d.b), -int(n)&3))
	return b
}

// str reads sp-rtrace's string: u16 length, bytes; an empty one takes 4
// bytes. Trailing padding NULs are stripped.
func (d *decoder) str() string {
	lb := d.take(2)
	if lb == nil {
		return ""
	}
	n := int(binary.LittleEndian.Uint16(lb))
	if n == 0 {
		d.take(2)
		return ""
	}
	b := d.take(n)
	return strings.TrimRight(string(b), "\x00")
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// pageFlags decodes PMPG (Writer.Write of a trace.PageFlags).
func (rd *Reader) pageFlags(d *decoder) error {
	v := &trace.PageFlags{Pid: int(d.u32()), At: d.u64()}
	n := d.u32()
	if d.err != nil {
		return d.err
	}
	if uint64(n) > uint64(len(d.b)) || n > maxPagesPacket {
		return fmt.Errorf("PMPG: %d pages in %d bytes", n, len(d.b))
	}
	if v.At%4096 != 0 || v.At+uint64(n)*4096 < v.At {
		return fmt.Errorf("PMPG: %d pages at 0x%x", n, v.At)
	}
	v.Pages = make([]trace.Page, n)
	for i := range v.Pages {
		b := d.take(1)
		if b == nil {
			return d.err
		}
		pg := &v.Pages[i]
		pg.Info = b[0] &^ pageKernel
		if b[0]&pageKernel != 0 {
			pg.Kernel, pg.KFlags, pg.KCount = true, d.u64(), d.u32()
		}
	}
	rd.emit(v)
	return d.err
}

// heapWords decodes HSCW (Writer.heapWords). Addresses only grow: an
// address that wraps is corruption.
func (rd *Reader) heapWords(d *decoder) error {
	v := &trace.HeapWords{Pid: int(d.u32())}
	n := d.u32()
	if d.err != nil {
		return d.err
	}
	if uint64(n)*2 > uint64(len(d.b)) {
		return fmt.Errorf("HSCW: %d words in %d bytes", n, len(d.b))
	}
	v.Words = make([]trace.HeapWord, 0, n)
	var at, val uint64
	for i := uint32(0); i < n; i++ {
		da, k := binary.Uvarint(d.b)
		if k <= 0 || da > (^uint64(0)-at)/8 {
			return fmt.Errorf("HSCW: bad address of word %d", i)
		}
		d.b = d.b[k:]
		dv, k := binary.Uvarint(d.b)
		if k <= 0 {
			return fmt.Errorf("HSCW: bad value of word %d", i)
		}
		d.b = d.b[k:]
		at += da * 8
		val += uint64(int64(dv>>1) ^ -int64(dv&1))
		v.Words = append(v.Words, trace.HeapWord{At: at, Val: val})
	}
	rd.emit(v)
	return nil
}
