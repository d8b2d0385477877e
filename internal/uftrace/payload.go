package uftrace

import (
	"encoding/binary"
	"fmt"
	"math"
)

// MaxStringLen is the longest string a payload carries; longer strings are
// cut and end in "..." as uftrace's libmcount does.
const MaxStringLen = 98

// NullString is how a NULL string pointer is stored (uftrace v0.13 writes the
// text "NULL"; replay shows it quoted).
const NullString = "NULL"

// UnreadableString is what uftrace stores for a string pointer it cannot read.
func UnreadableString(addr uint64) string { return fmt.Sprintf("<%#x>", addr) }

// Value is one recorded argument or return value. Int holds integers,
// pointers, enums and chars (raw bits, sign-extended or not as recorded);
// Float holds floating-point values; Str holds strings, the bytes of a
// struct, and the F80Size bytes of a long double as read (Float then holds
// its value rounded to a float64, and a Value without those bytes is
// stored from Float).
type Value struct {
	Int   uint64
	Float float64
	Str   string
}

// isString reports whether the spec's value is stored as a length-prefixed string.
func (a ArgSpec) isString() bool { return a.Fmt == 's' || a.Fmt == 'S' }

// storedSize is the number of payload bytes a non-string value takes.
func (a ArgSpec) storedSize() int {
	switch {
	case a.Fmt == 'c':
		return 4
	case a.Fmt == 'f' || a.Kind == FloatArg:
		if a.Size == 4 {
			return 4
		}
		if a.Size == 10 {
			return 12
		}
		return 8
	case a.Fmt == 't':
		return (a.Size + 3) &^ 3
	case a.Size == 0:
		return 8
	}
	return (a.Size + 3) &^ 3
}

// AppendPayload appends the payload of vals, described by specs (one value per
// spec), to b, padded to a multiple of 8 bytes as the format requires.
// Strings of MaxStringLen bytes or more keep their first 95 bytes and end in
// "..." (libmcount/record.c stops at ARG_STR_MAX and writes "...").
func AppendPayload(b []byte, specs []ArgSpec, vals []Value) ([]byte, error) {
	if len(specs) != len(vals) {
		return b, fmt.Errorf("payload: %d specs but %d values", len(specs), len(vals))
	}
	start := len(b)
	for i, a := range specs {
		v := vals[i]
		if a.isString() {
			s := v.Str
			if len(s) >= MaxStringLen {
				s = s[:MaxStringLen-3] + "..."
			}
			b = binary.LittleEndian.AppendUint16(b, uint16(len(s)))
			b = append(b, s...)
			for (len(b)-start)%4 != 0 {
				b = append(b, 0)
			}
			continue
		}
		switch n := a.storedSize(); {
		case a.Fmt == 'c':
			b = append(b, byte(v.Int), 0, 0, 0)
		case a.Fmt == 'f' || a.Kind == FloatArg:
			if n == 4 {
				b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(v.Float)))
			} else if n == 12 { // a long double in a 12-byte slot
				if len(v.Str) == F80Size {
					b = append(b, v.Str...)
				} else {
					f := Float64ToF80(v.Float)
					b = append(b, f[:]...)
				}
				b = append(b, 0, 0)
			} else {
				b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v.Float))
			}
		case a.Fmt == 't':
			raw := make([]byte, n)
			copy(raw, v.Str)
			b = append(b, raw...)
		case n == 4:
			b = binary.LittleEndian.AppendUint32(b, uint32(v.Int))
		default:
			b = binary.LittleEndian.AppendUint64(b, v.Int)
		}
	}
	for (len(b)-start)%8 != 0 {
		b = append(b, 0)
	}
	return b, nil
}

// DecodePayload decodes the values described by specs from the start of b
// and returns them with the payload's length (padding included).
func DecodePayload(b []byte, specs []ArgSpec) ([]Value, int, error) {
	vals := make([]Value, len(specs))
	off := 0
	need := func(n int) error {
		if off+n > len(b) {
			return fmt.Errorf("payload truncated: need %d bytes at offset %d, have %d", n, off, len(b)-off)
		}
		return nil
	}
	for i, a := range specs {
		if a.isString() {
			if err := need(2); err != nil {
				return nil, 0, err
			}
			n := int(binary.LittleEndian.Uint16(b[off:]))
			if err := need(2 + n); err != nil {
				return nil, 0, err
			}
			vals[i].Str = string(b[off+2 : off+2+n])
			off = (off + 2 + n + 3) &^ 3
			continue
		}
		n := a.storedSize()
		if err := need(n); err != nil {
			return nil, 0, err
		}
		switch {
		case a.Fmt == 'c':
			vals[i].Int = uint64(b[off])
		case a.Fmt == 'f' || a.Kind == FloatArg:
			if n == 4 {
				vals[i].Float = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[off:])))
			} else if n == 12 {
				vals[i].Str = string(b[off : off+F80Size])
				vals[i].Float = F80ToFloat64(b[off:])
			} else {
				vals[i].Float = math.Float64frombits(binary.LittleEndian.Uint64(b[off:]))
			}
		case a.Fmt == 't':
			vals[i].Str = string(b[off : off+n])
		case n == 4:
			vals[i].Int = uint64(binary.LittleEndian.Uint32(b[off:]))
		default:
			vals[i].Int = binary.LittleEndian.Uint64(b[off:])
		}
		off += n
	}
	off = (off + 7) &^ 7
	if off > len(b) {
		return nil, 0, fmt.Errorf("payload truncated: padding needs %d bytes, have %d", off, len(b))
	}
	return vals, off, nil
}
