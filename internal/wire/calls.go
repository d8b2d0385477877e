package wire

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"
	"unsafe"

	"rtrace/internal/trace"
)

// Resource calls in version 3.2 (docs/PROTOCOL.md, "Added in 3.2"): a
// stream names each function (RFUN) and each backtrace (STAK) once, and
// its calls go in batches (CALZ) of variable-length records that refer to
// them: 13-20 bytes a call where CALL, CEXT and BTRC took ~200.

// Flags of a CALZ record.
const (
	czAlloc   = 1
	czStack   = 2
	czArgs    = 4
	czContext = 8
	czNoTime  = 16
	// czIDDelta (3.3): the id is a signed varint from the batch's
	// previous call's id (the first's from 0): a block freed after its
	// allocation, or allocated near the last one, takes 1-3 bytes where
	// an address took 6-7.
	czIDDelta = 32
	// czKnown are the flags this reader knows: a call with another one
	// comes from a newer writer whose fields it cannot skip (a 3.2
	// reader took 3.3's deltas for ids: from 3.3 on a reader refuses).
	czKnown = czAlloc | czStack | czArgs | czContext | czNoTime | czIDDelta
)

// czMax bounds a CALZ batch: the calls of one thread in a row, at most
// this many.
const czMax = 256

// calls is the Writer's compact encoding of resource calls.
type calls struct {
	fns    map[fnKey]uint32
	stacks map[string]uint32
	key    []byte // a backtrace as a stacks key
	// Shortcuts of the two maps: the functions met last, and the
	// backtraces by their frames' array (callers hand the same slice for
	// a stack again: the drain's table, the Reader's).
	recent  [4]recentFn
	nextFn  int
	byArray *[arrayCache]stackRef

	batch  []byte // the CALZ payload being built
	tid    int
	n      int
	last   int64  // the time of the batch's last call (ns of the day)
	lastID uint64 // and its id
}

type fnKey struct {
	res  int
	name string
}

type recentFn struct {
	key fnKey
	id  uint32
	ok  bool
}

type stackRef struct {
	at *trace.Frame
	n  int
	id uint32
}

// arrayCache is the number of entries of the byArray shortcut: a
// direct-mapped cache by the array's address (a map's lookup cost a
// tenth of the drain's time on Lua's allocations, and it grew and was
// cleared without end).
const arrayCache = 1 << 12

// arraySlot is the byArray entry of the array at f.
func arraySlot(f *trace.Frame) int {
	return int(uintptr(unsafe.Pointer(f))>>5) & (arrayCache - 1)
}

// Calls writes cs, in order, as Write writes each: the drain's way, one
// call to the writer for a thread's calls of a ring read.
func (w *Writer) Calls(cs []trace.Call) error {
	if !w.started {
		return fmt.Errorf("wire: calls before the header")
	}
	put := w.call
	if w.v20 {
		put = w.call20
	}
	for i := range cs {
		if err := put(&cs[i]); err != nil {
			return err
		}
	}
	return nil
}

// call adds c to the batch, naming its function and backtrace first when
// new (those packets go out before the batch that refers to them).
func (w *Writer) call(c *trace.Call) error {
	fn, err := w.FuncID(c.Res, c.Name)
	if err != nil {
		return err
	}
	stack := NoStack
	if len(c.Frames) > 0 {
		if stack, err = w.StackID(c.Frames); err != nil {
			return err
		}
	}
	var flags byte
	if len(c.Args) > 0 {
		flags |= czArgs
	}
	if c.Context != 0 {
		flags |= czContext
	}
	if err := w.put(c.Tid, flags, fn, c.Time, c.Alloc, c.Size, c.ID, stack); err != nil {
		return err
	}
	z := &w.z
	b := z.batch
	if len(c.Args) > 0 {
		b = binary.AppendUvarint(b, uint64(len(c.Args)))
		for _, a := range c.Args {
			b = binary.AppendUvarint(b, uint64(len(a.Name)))
			b = append(b, a.Name...)
			b = binary.AppendUvarint(b, uint64(len(a.Value)))
			b = append(b, a.Value...)
		}
	}
	if c.Context != 0 {
		b = binary.AppendUvarint(b, uint64(c.Context))
	}
	z.batch = b
	return nil
}

// FuncID is the stream's number of function name of resource res, named
// (RFUN) first when new. With StackID and PutCall, a caller that keeps
// the numbers writes calls without a trace.Call (the drain's lane).
func (w *Writer) FuncID(res int, name string) (uint32, error) {
	z := &w.z
	if z.fns == nil {
		z.fns, z.stacks = map[fnKey]uint32{}, map[string]uint32{}
	}
	for i := range z.recent {
		// The same name is mostly the same string (the caller's table's):
		// its bytes compared only when not.
		if r := &z.recent[i]; r.ok && r.key.res == res && len(r.key.name) == len(name) &&
			(unsafe.StringData(r.key.name) == unsafe.StringData(name) || r.key.name == name) {
			return r.id, nil
		}
	}
	fk := fnKey{res, name}
	fn, ok := z.fns[fk]
	if ok {
		z.recent[z.nextFn] = recentFn{fk, fn, true}
		z.nextFn = (z.nextFn + 1) % len(z.recent)
		return fn, nil
	}
	fn = uint32(len(z.fns))
	z.fns[fk] = fn
	w.begin(RFUN)
	w.u32(fn)
	w.u32(uint32(res))
	w.str(name)
	return fn, w.end()
}

// NoStack is PutCall's stack for a call without a backtrace.
const NoStack = ^uint32(0)

// StackID is the stream's number of the backtrace frames (not empty),
// named (STAK) first when new. The same frames' slice again is found
// without hashing its addresses.
func (w *Writer) StackID(frames []trace.Frame) (uint32, error) {
	z := &w.z
	if z.fns == nil {
		z.fns, z.stacks = map[fnKey]uint32{}, map[string]uint32{}
	}
	if z.byArray != nil {
		if r := &z.byArray[arraySlot(&frames[0])]; r.at == &frames[0] && r.n == len(frames) {
			return r.id, nil
		}
	}
	z.key = z.key[:0]
	for _, f := range frames {
		z.key = binary.LittleEndian.AppendUint64(z.key, f.Addr)
	}
	stack, ok := z.stacks[string(z.key)]
	if !ok {
		stack = uint32(len(z.stacks))
		z.stacks[string(z.key)] = stack
		w.begin(STAK)
		w.u32(stack)
		w.u32(uint32(len(frames)))
		w.p = append(w.p, z.key...)
		if err := w.end(); err != nil {
			return 0, err
		}
	}
	if z.byArray == nil {
		z.byArray = new([arrayCache]stackRef)
	}
	z.byArray[arraySlot(&frames[0])] = stackRef{&frames[0], len(frames), stack}
	return stack, nil
}

// PutCall adds a call of thread tid to the batch: function fn (FuncID's)
// at time of day t (negative: none), an allocation of size bytes or a
// release, of resource id, with backtrace stack (StackID's, or NoStack),
// and no arguments.
func (w *Writer) PutCall(tid int, fn uint32, t time.Duration, alloc bool, size, id uint64, stack uint32) error {
	return w.put(tid, 0, fn, t, alloc, size, id, stack)
}

// put adds a call's fixed fields to the batch, flags (czArgs, czContext)
// saying what the caller appends after them.
func (w *Writer) put(tid int, flags byte, fn uint32, time time.Duration, alloc bool, size, id uint64, stack uint32) error {
	z := &w.z
	if z.n > 0 && (z.tid != tid || z.n >= czMax) {
		if err := w.flushCalls(); err != nil {
			return err
		}
	}
	t := int64(time)
	if z.n == 0 {
		z.batch = binary.LittleEndian.AppendUint32(z.batch[:0], uint32(tid))
		z.batch = binary.LittleEndian.AppendUint32(z.batch, 0) // the count, at the flush
		z.batch = binary.LittleEndian.AppendUint64(z.batch, uint64(max(t, 0)))
		z.tid, z.last, z.lastID = tid, max(t, 0), 0
	}
	if alloc {
		flags |= czAlloc
	}
	if stack != NoStack {
		flags |= czStack
	}
	if t < 0 {
		flags |= czNoTime
	}
	flags |= czIDDelta
	// The fixed fields, into room made once (at most 1+5+10+10+10+5
	// bytes): the drain's busiest lines.
	b := slices.Grow(z.batch, czFixedMax)
	at := len(b)
	p := b[at : at+czFixedMax]
	p[0] = flags
	i := 1 + putUvarint(p[1:], uint64(fn))
	if t >= 0 {
		d := t - z.last
		i += putUvarint(p[i:], uint64(d<<1)^uint64(d>>63))
		z.last = t
	}
	if alloc {
		i += putUvarint(p[i:], size)
	}
	d := int64(id - z.lastID)
	i += putUvarint(p[i:], uint64(d<<1)^uint64(d>>63))
	z.lastID = id
	if stack != NoStack {
		i += putUvarint(p[i:], uint64(stack))
	}
	z.batch = b[:at+i]
	z.n++
	return nil
}

// czFixedMax is room for a call's fixed fields (flags, its function, time,
// size, id and stack) with putUvarint's 10 bytes free at each.
const czFixedMax = 1 + 5*binary.MaxVarintLen64

// putUvarint is binary.PutUvarint for a p known to have room: it writes
// x's varint at p's start and returns its length.
func putUvarint(p []byte, x uint64) int {
	p = p[:binary.MaxVarintLen64]
	i := 0
	for x >= 0x80 && i < binary.MaxVarintLen64-1 {
		p[i] = byte(x) | 0x80
		x >>= 7
		i++
	}
	p[i] = byte(x)
	return i + 1
}

// flushCalls writes the batch of calls, if any.
func (w *Writer) flushCalls() error {
	z := &w.z
	if z.n == 0 {
		return nil
	}
	binary.LittleEndian.PutUint32(z.batch[4:], uint32(z.n))
	z.n = 0
	w.begin(CALZ)
	w.p = append(w.p, z.batch...)
	for len(w.p)%4 != 0 {
		w.p = append(w.p, 0)
	}
	return w.end()
}

// czReader is the Reader's state of a 3.2 stream: the functions and
// backtraces named so far.
type czReader struct {
	fns    []fnKey
	stacks [][]trace.Frame
}

// rfun decodes RFUN: function id's resource and name. Ids come in order.
func (rd *Reader) rfun(d *decoder) error {
	id, res, name := d.u32(), d.u32(), d.str()
	if d.err != nil {
		return d.err
	}
	if int(id) != len(rd.z.fns) {
		return fmt.Errorf("function %d named after %d others", id, len(rd.z.fns))
	}
	rd.z.fns = append(rd.z.fns, fnKey{int(res), name})
	return nil
}

// stak decodes STAK: backtrace id's frames. Ids come in order.
func (rd *Reader) stak(d *decoder) error {
	id, n := d.u32(), d.u32()
	if d.err != nil {
		return d.err
	}
	if int(id) != len(rd.z.stacks) {
		return fmt.Errorf("backtrace %d named after %d others", id, len(rd.z.stacks))
	}
	if uint64(n)*8 > uint64(len(d.b)) {
		return fmt.Errorf("%d frames do not fit in %d bytes", n, len(d.b))
	}
	frames := make([]trace.Frame, n)
	for i := range frames {
		frames[i].Addr = d.u64()
	}
	rd.z.stacks = append(rd.z.stacks, frames)
	return d.err
}

// calz decodes CALZ: a thread's calls. Calls share their backtrace's
// frames: nothing may change them.
func (rd *Reader) calz(d *decoder) error {
	tid, n, base := d.u32(), d.u32(), d.u64()
	if d.err != nil {
		return d.err
	}
	b := d.b
	uv := func() uint64 {
		v, k := binary.Uvarint(b)
		if k <= 0 {
			d.err = errShort
			return 0
		}
		b = b[k:]
		return v
	}
	t := int64(base)
	var lastID uint64
	for i := uint32(0); i < n && d.err == nil; i++ {
		if len(b) == 0 {
			return errShort
		}
		flags := b[0]
		b = b[1:]
		if flags&^czKnown != 0 {
			return fmt.Errorf("call %d: flags %#x this reader does not know (a newer rtrace wrote the stream)", i, flags)
		}
		fn := uv()
		if d.err != nil {
			break
		}
		if fn >= uint64(len(rd.z.fns)) {
			return fmt.Errorf("call %d: function %d was never named", i, fn)
		}
		c := &trace.Call{Tid: int(tid), Res: rd.z.fns[fn].res, Name: rd.z.fns[fn].name, Alloc: flags&czAlloc != 0, Time: -1}
		if flags&czNoTime == 0 {
			dt, k := binary.Varint(b)
			if k <= 0 {
				return errShort
			}
			b = b[k:]
			t += dt
			c.Time = time.Duration(t)
		}
		if c.Alloc {
			c.Size = uv()
		}
		if flags&czIDDelta != 0 {
			dv := uv()
			c.ID = lastID + uint64(int64(dv>>1)^-int64(dv&1))
		} else {
			c.ID = uv()
		}
		lastID = c.ID
		if flags&czStack != 0 {
			s := uv()
			if d.err == nil && s >= uint64(len(rd.z.stacks)) {
				return fmt.Errorf("call %d: backtrace %d was never named", i, s)
			}
			if d.err == nil {
				c.Frames = rd.z.stacks[s]
			}
		}
		if flags&czArgs != 0 {
			na := uv()
			if na > uint64(len(b)) {
				return errShort
			}
			str := func() string {
				l := uv()
				if d.err != nil || l > uint64(len(b)) {
					d.err = errShort
					return ""
				}
				s := string(b[:l])
				b = b[l:]
				return s
			}
			for range na {
				c.Args = append(c.Args, trace.Arg{Name: str(), Value: str()})
			}
		}
		if flags&czContext != 0 {
			c.Context = uint32(uv())
		}
		if d.err != nil {
			break
		}
		rd.index++
		c.Index = rd.index
		rd.emit(c)
	}
	return d.err
}
