package uftrace

import (
	"strings"
	"testing"
)

func TestThresholdString(t *testing.T) {
	for ns, want := range map[uint64]uint64{1: 1, 999: 999, 1000: 1000, 1001: 1001, 1500: 1500, 5e6: 5e6, 1234567: 1234000, 20e9: 20e9, 999999: 999999,
		1000e9: 16*60e9 + 0.666*60e9, 3600e9: 3600e9, 1e15: 999 * 60e9} {
		s := ThresholdString(ns)
		got, err := ParseTime(s)
		if i := strings.IndexByte(s, '.'); err != nil || got != want || strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }) > 3 || i > 3 {
			t.Errorf("%d: %q reads back as %d (%v)", ns, s, got, err)
		}
	}
}
