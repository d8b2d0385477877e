package uftrace

import (
	"encoding/hex"
	"math"
	"testing"
)

// The x87 encodings of a few values, as gcc stores long double constants
// (little endian: significand, then sign and exponent).
func TestFloat64ToF80(t *testing.T) {
	for _, c := range []struct {
		f    float64
		want string
	}{
		{1, "0000000000000080ff3f"},
		{-2, "000000000000008000c0"},
		{0.5, "0000000000000080fe3f"},
		{3, "00000000000000c00040"},
		{0, "00000000000000000000"},
		{math.Copysign(0, -1), "00000000000000000080"},
		{math.Inf(1), "0000000000000080ff7f"},
		{math.SmallestNonzeroFloat64, "0000000000000080cd3b"},
	} {
		b := Float64ToF80(c.f)
		want, _ := hex.DecodeString(c.want)
		if string(b[:]) != string(want) {
			t.Errorf("%g: % x, want % x", c.f, b, want)
		}
	}
}

// Every float64 survives the trip through the extended format.
func TestF80RoundTrip(t *testing.T) {
	for _, f := range []float64{1, -1, 0.1, -0.000002, 1e300, -1e-300, math.MaxFloat64,
		math.SmallestNonzeroFloat64, 5e-320, math.Inf(-1), 123456789.125} {
		b := Float64ToF80(f)
		if g := F80ToFloat64(b[:]); g != f || math.Signbit(g) != math.Signbit(f) {
			t.Errorf("%g came back as %g (% x)", f, g, b)
		}
	}
	nan := Float64ToF80(math.NaN())
	if g := F80ToFloat64(nan[:]); !math.IsNaN(g) {
		t.Errorf("NaN came back as %g", g)
	}
	// Beyond a float64's range: infinity and zero.
	if g := F80ToFloat64([]byte{0, 0, 0, 0, 0, 0, 0, 0x80, 0xfe, 0x7f}); !math.IsInf(g, 1) {
		t.Errorf("2^16383 as %g", g)
	}
	if g := F80ToFloat64([]byte{0, 0, 0, 0, 0, 0, 0, 0x80, 0x01, 0x80}); g != 0 || !math.Signbit(g) {
		t.Errorf("-2^-16382 as %g", g)
	}
}

// A long double is stored in 12 bytes: its 10 bytes as read, else Float's.
func TestPayloadF80(t *testing.T) {
	specs := []ArgSpec{{Kind: IntArg, Index: 1}, {Kind: FloatArg, Index: 1, Fmt: 'f', Size: 10}}
	raw := Float64ToF80(-2000000)
	for _, v := range []Value{{Float: -2000000}, {Str: string(raw[:])}} {
		b, err := AppendPayload(nil, specs, []Value{{Int: 4}, v})
		if err != nil || len(b) != 24 || string(b[8:18]) != string(raw[:]) {
			t.Fatalf("payload % x, %v", b, err)
		}
		got, n, err := DecodePayload(b, specs)
		if err != nil || n != 24 || got[1].Float != -2000000 || got[1].Str != string(raw[:]) {
			t.Errorf("decoded %+v %d %v", got, n, err)
		}
	}
}
