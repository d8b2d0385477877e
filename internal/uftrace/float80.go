package uftrace

import (
	"encoding/binary"
	"math"
)

// A long double on x86-64 is the x87 80-bit extended format: a 64-bit
// significand with an explicit integer bit, then 15 bits of exponent
// (bias 16383) and the sign (Intel SDM vol. 1, 4.2.2 "Floating-Point Data
// Types"). uftrace stores it as is, in a 12-byte slot, and prints it with
// %Lf.

// F80Size is the number of significant bytes of an x87 long double.
const F80Size = 10

// Float64ToF80 returns f in the x87 extended format; every float64 is
// exactly representable there.
func Float64ToF80(f float64) [F80Size]byte {
	var b [F80Size]byte
	bits := math.Float64bits(f)
	sign := uint16(bits>>63) << 15
	exp := int(bits>>52) & 0x7ff
	mant := bits & (1<<52 - 1)
	var se uint16
	var sig uint64
	switch {
	case exp == 0x7ff: // infinity or NaN
		se, sig = 0x7fff, 1<<63|mant<<11
	case exp == 0 && mant == 0:
	case exp == 0: // subnormal: normalise, the extended range has room
		e := -1022
		for mant&(1<<52) == 0 {
			mant <<= 1
			e--
		}
		se, sig = uint16(e+16383), mant<<11
	default:
		se, sig = uint16(exp-1023+16383), 1<<63|mant<<11
	}
	binary.LittleEndian.PutUint64(b[:8], sig)
	binary.LittleEndian.PutUint16(b[8:], sign|se)
	return b
}

// F80ToFloat64 returns the x87 extended value in b (at least F80Size
// bytes) rounded to a float64: out of range values become infinities or
// zeros, as a conversion by the FPU would.
func F80ToFloat64(b []byte) float64 {
	sig := binary.LittleEndian.Uint64(b[:8])
	se := binary.LittleEndian.Uint16(b[8:F80Size])
	neg := se>>15 != 0
	exp := int(se & 0x7fff)
	var f float64
	switch {
	case exp == 0x7fff && sig<<1 == 0:
		f = math.Inf(1)
	case exp == 0x7fff:
		return math.NaN()
	case exp == 0:
		f = math.Ldexp(float64(sig), 1-16383-63) // denormal
	default:
		f = math.Ldexp(float64(sig), exp-16383-63)
	}
	if neg {
		f = -f
	}
	return f
}
