package fast

import "unsafe"

// Resource records in a thread's ring (res.S): a record whose word's low
// two bits are 2 starts a group, a CALL or a STACK, whose payload records
// follow.
const (
	resType     = 2
	resStackBit = 4
	resHasStack = 8
	// resArgsType starts an ARGS or RET group (args.S): a function's
	// argument registers before its ENTRY, its return value before its
	// EXIT.
	resArgsType = resType | resStackBit | resHasStack
)

// IsRes reports whether a ring word starts a resource record group.
func IsRes(word uint64) bool { return word&3 == resType }

// ResCall is a resource call a ring held: its time (a TSC reading), its
// function (Desc.ID), its payload words (the arguments, the result, the
// out word) and its backtrace (nil: none).
//
// An ARGS or RET group (args.S) decodes as a ResCall with Values set: TSC
// is then the word of the function record it belongs to (the next one),
// ID the function's number (Desc.ID), Slot 0 for the arguments and 1 for
// the return value, Words the registers.
type ResCall struct {
	TSC    uint64
	ID     uint32
	Slot   uint8 // the stack cache's slot Stack is in
	Values bool
	Words  []uint64
	Stack  []uint64
}

// ResDecoder decodes the resource records of one thread's ring in order,
// across the parts and batches Drain hands: it keeps the thread's stack
// cache as its stubs keep theirs, replayed from the STACK records, and the
// group a part's end cut. The zero ResDecoder is a new thread's.
type ResDecoder struct {
	slots [256][]uint64
	hdr   Rec
	need  int // payload records of the group still to come
	words []uint64
}

// Pending reports whether the next record is the payload of a group
// begun: whatever its word says, it is not a header.
func (d *ResDecoder) Pending() bool { return d.need > 0 }

// Reset forgets everything: the state is another thread's now.
func (d *ResDecoder) Reset() { *d = ResDecoder{} }

// Group decodes, when not Pending, the CALL group whose header is part[i]
// if its payload lies in part too: the call, its Words the payload in
// place (valid as long as part is), and the records it took. ok is false
// for anything else (a STACK, a group the part cuts): Feed takes those.
func (d *ResDecoder) Group(part []Rec, i int, c *ResCall) (n int, ok bool) {
	h := &part[i]
	values := h.Word&0xf == resArgsType
	if d.need > 0 || h.Word&3 != resType || h.Word&resStackBit != 0 && !values {
		return 0, false
	}
	k := int(h.Word>>4) & 0xf
	if i+k >= len(part) {
		return 0, false
	}
	if values {
		n := min(int(h.Word>>16)&0xff, 2*k)
		c.TSC, c.ID, c.Slot, c.Values, c.Words, c.Stack = h.TSC, uint32(h.Word>>24), uint8(h.Word>>8), true, nil, nil
		if n > 0 {
			c.Words = unsafe.Slice((*uint64)(unsafe.Pointer(&part[i+1])), n)
		}
		return 1 + k, true
	}
	c.TSC, c.ID, c.Slot, c.Values, c.Words, c.Stack = h.TSC, uint32(h.Word>>16), 0, false, nil, nil
	if k > 0 {
		c.Words = unsafe.Slice((*uint64)(unsafe.Pointer(&part[i+1])), 2*k)
	}
	if h.Word&resHasStack != 0 {
		c.Slot = uint8(h.Word >> 8)
		c.Stack = d.slots[c.Slot]
	}
	return 1 + k, true
}

// Call1 decodes, when not Pending, the CALL group at part[i] whose
// payload is one record in part (two words: one argument and the result,
// or a release's pointer and a pad), as Group would: the drain's quick
// lane for malloc and free. stack: the call names its stack cache slot.
func (d *ResDecoder) Call1(part []Rec, i int) (id uint32, slot uint8, stack bool, w0, w1 uint64, ok bool) {
	h := part[i].Word
	if d.need > 0 || h&0xf7 != 1<<4|resType || i+1 >= len(part) {
		return 0, 0, false, 0, 0, false
	}
	p := &part[i+1]
	return uint32(h >> 16), uint8(h >> 8), h&resHasStack != 0, p.TSC, p.Word, true
}

// Call2 is Call1 for a CALL group of two payload records (four words:
// realloc's pointer, size, result and entry time), w pointing at them in
// part.
func (d *ResDecoder) Call2(part []Rec, i int) (id uint32, slot uint8, stack bool, w *[4]uint64, ok bool) {
	h := part[i].Word
	if d.need > 0 || h&0xf7 != 2<<4|resType || i+2 >= len(part) {
		return 0, 0, false, nil, false
	}
	return uint32(h >> 16), uint8(h >> 8), h&resHasStack != 0, (*[4]uint64)(unsafe.Pointer(&part[i+1])), true
}

// Stack is the stack cache slot slot's stack as the records filled it
// (nil: none yet), the one Group gives a call naming the slot.
func (d *ResDecoder) Stack(slot uint8) []uint64 { return d.slots[slot] }

// Feed takes the next record of a group: its header (IsRes) or, when
// Pending, its payload. It returns the call a CALL group makes once whole
// (a STACK fills its slot), its Words valid until the next Feed. A group
// the process could not have written (a stack deeper than WalkMax) is
// dropped, and bad reports it.
func (d *ResDecoder) Feed(r Rec) (c ResCall, whole, bad bool) {
	if d.need == 0 {
		d.hdr, d.words = r, d.words[:0]
		if r.Word&resStackBit != 0 && r.Word&0xf != resArgsType {
			n := r.Word >> 16
			if n > WalkMax {
				return ResCall{}, false, true
			}
			d.need = int(n+1) / 2
		} else {
			d.need = int(r.Word>>4) & 0xf
		}
	} else {
		d.words = append(d.words, r.TSC, r.Word)
		d.need--
	}
	if d.need > 0 {
		return ResCall{}, false, false
	}
	slot := int(d.hdr.Word>>8) & 0xff
	if d.hdr.Word&0xf == resArgsType {
		n := min(int(d.hdr.Word>>16)&0xff, len(d.words))
		return ResCall{TSC: d.hdr.TSC, ID: uint32(d.hdr.Word >> 24), Slot: uint8(slot), Values: true, Words: d.words[:n]}, true, false
	}
	if d.hdr.Word&resStackBit != 0 {
		d.slots[slot] = append([]uint64(nil), d.words[:d.hdr.Word>>16]...)
		return ResCall{}, false, false
	}
	c = ResCall{TSC: d.hdr.TSC, ID: uint32(d.hdr.Word >> 16), Words: d.words}
	if d.hdr.Word&resHasStack != 0 {
		c.Slot = uint8(slot)
		c.Stack = d.slots[slot]
	}
	return c, true, false
}

// ResWords packs a call's records as res.S writes them, for tests: its
// header and payload, its stack (nil: none) in the cache's slot, written
// first in a STACK when miss.
func ResWords(tsc uint64, id uint32, words []uint64, stack []uint64, slot int, miss bool) []Rec {
	var out []Rec
	w := uint64(id)<<16 | uint64(slot)<<8 | uint64((len(words)+1)/2)<<4 | resType
	if stack != nil {
		if miss {
			out = append(out, Rec{Word: uint64(len(stack))<<16 | uint64(slot)<<8 | resStackBit | resType})
			out = appendPairs(out, stack)
		}
		w |= resHasStack
	}
	out = append(out, Rec{TSC: tsc, Word: w})
	return appendPairs(out, words)
}

// appendPairs appends ws to out as the stubs write a payload: two words a
// record, the last one's second word 0 for an odd count.
func appendPairs(out []Rec, ws []uint64) []Rec {
	for i := 0; i < len(ws); i += 2 {
		r := Rec{TSC: ws[i]}
		if i+1 < len(ws) {
			r.Word = ws[i+1]
		}
		out = append(out, r)
	}
	return out
}

// ValueWords packs an ARGS group (ret false: the argument registers) or a
// RET group (rax, rdx) of function id as args.S writes them, for tests:
// before the function record whose word is word.
func ValueWords(word uint64, id uint32, ret bool, regs []uint64) []Rec {
	k := (len(regs) + 1) / 2
	kind := uint64(0)
	if ret {
		kind = 1
	}
	out := []Rec{{TSC: word, Word: uint64(id)<<24 | uint64(len(regs))<<16 | kind<<8 | uint64(k)<<4 | resArgsType}}
	return appendPairs(out, regs)
}
