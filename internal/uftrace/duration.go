package uftrace

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseTime reads a time threshold as uftrace does (utils/utils.c
// parse_time): a number, with or without decimals, and a unit: ns/nsec,
// us/usec, ms/msec, s/sec or m/min, any case; a bare number is
// nanoseconds. It returns nanoseconds. Unlike uftrace, which warns and
// goes on, an unknown unit is an error.
func ParseTime(s string) (uint64, error) {
	num := strings.TrimRightFunc(s, func(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' })
	unit := strings.ToLower(s[len(num):])
	scale := map[string]float64{"": 1, "ns": 1, "nsec": 1, "us": 1e3, "usec": 1e3, "ms": 1e6, "msec": 1e6,
		"s": 1e9, "sec": 1e9, "m": 60e9, "min": 60e9}[unit]
	bad := func(why string) (uint64, error) {
		return 0, fmt.Errorf("time %q: %s (e.g. 500, 500ns, 20us, 1.5ms, 2s, 1m; a bare number is nanoseconds)", s, why)
	}
	if scale == 0 {
		return bad("unknown unit " + strconv.Quote(unit))
	}
	if num == "" || strings.ContainsAny(num, "eExXpP_+-") {
		return bad("not a number")
	}
	if unit == "" || scale == 1 {
		if n, err := strconv.ParseUint(num, 10, 64); err == nil {
			return n, nil
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) || v*scale >= 1<<63 {
		return bad("not a number of nanoseconds that fits in 63 bits")
	}
	return uint64(math.Round(v * scale)), nil
}

// ThresholdString writes a -t threshold of ns nanoseconds as uftrace's
// parse_time reads it back, at most 3 digits before the point ("5ms",
// "1.5us", "20s", "30m") and 3 after it (1.234567ms is "1.234ms", as
// parse_time truncates it): what uftrace record saves in default.opts.
// A threshold of 1000 minutes or more is written as 999m.
func ThresholdString(ns uint64) string {
	for _, u := range []struct {
		name  string
		scale uint64
	}{{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}, {"m", 60e9}} {
		whole := ns / u.scale
		if whole >= 1000 && u.name != "m" {
			continue
		}
		if whole >= 1000 {
			return "999m"
		}
		milli := ns % u.scale * 1000 / u.scale // 3 decimals, truncated
		if milli == 0 {
			return strconv.FormatUint(whole, 10) + u.name
		}
		return strings.TrimRight(fmt.Sprintf("%d.%03d", whole, milli), "0") + u.name
	}
	return ""
}
