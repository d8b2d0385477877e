package pprofout

import (
	"testing"

	"rtrace/internal/trace"
)

func TestParseFrame(t *testing.T) {
	for _, c := range []struct {
		text, fn, file string
		line           int
	}{
		{"small_block() at leaky.c:12", "small_block", "leaky.c", 12},
		{"__libc_start_call_main() from /usr/lib/x86_64-linux-gnu/libc.so.6", "__libc_start_call_main", "", 0},
		{"from /x/y.so", "", "", 0},
		{"in ??", "", "", 0},
		{"geo::Shape::area() const at /src/shape.cc:3", "geo::Shape::area() const", "/src/shape.cc", 3},
		{"util::count(int) from /opt/at x/lib.so", "util::count(int)", "", 0},
		{"f() at dir with: colon/x.c:7", "f", "dir with: colon/x.c", 7},
		{"f() at x.c:?", "", "", 0}, // no line: not a form the resolver writes
	} {
		fn, file, line := parseFrame(c.text)
		if fn != c.fn || file != c.file || line != c.line {
			t.Errorf("parseFrame(%q) = %q, %q, %d; want %q, %q, %d", c.text, fn, file, line, c.fn, c.file, c.line)
		}
	}
}

// TestResolvedFrames: frames with text are not resolved again; those
// naming no function keep their address and module.
func TestResolvedFrames(t *testing.T) {
	c := alloc(1, 1, 64)
	c.Frames = []trace.Frame{
		{Addr: 0x401100, Text: "small_block() at leaky.c:12"},
		{Addr: 0x7000010, Text: "from /x/y.so"},
		{Addr: 0x10, Text: "in ??"},
	}
	res := &fakeResolver{names: map[uint64]trace.Location{0x401100: {Func: "wrong"}}}
	items := append(head(false), &trace.Mapping{From: 0x7000000, To: 0x7001000, Path: "/x/y.so"}, c, exited)
	p, _ := encode(t, res, items...)
	checkStacks(t, p, map[string][]int64{"memory: small_block;?;?": {1, 64, 1, 64, 1, 64}})
	locs := p.Sample[0].Location
	if ln := locs[0].Line[0]; ln.Function.Filename != "leaky.c" || ln.Line != 12 || !locs[0].Mapping.HasLineNumbers {
		t.Errorf("small_block at %s:%d, mapping %+v; want leaky.c:12, with line numbers", ln.Function.Filename, ln.Line, locs[0].Mapping)
	}
	if m := locs[1].Mapping; locs[1].Address != 0x7000010 || m == nil || m.File != "/x/y.so" || m.HasFunctions {
		t.Errorf("frame in /x/y.so: address %#x, mapping %+v; want its own address, the mapping unsymbolized", locs[1].Address, m)
	}
	if locs[2].Address != 0x10 || locs[2].Mapping != nil {
		t.Errorf("frame in no mapping: address %#x, mapping %+v", locs[2].Address, locs[2].Mapping)
	}
}

// TestUnknownAddress: an address the resolver cannot name has no line; one
// met before its mapping is located again once the mapping comes.
func TestUnknownAddress(t *testing.T) {
	const late = 0x500100
	res := newFake()
	res.names[late] = trace.Location{Func: "late_fn", File: "/src/late.c", Line: 5}
	items := append(head(false),
		alloc(1, 1, 8, 0x401400, addrMain), // in /bin/leaky, no name
		alloc(1, 2, 16, late),              // before its mapping
		&trace.Mapping{From: 0x500000, To: 0x501000, Path: "/lib/late.so"},
		alloc(1, 3, 32, late),
		exited)
	p, _ := encode(t, res, items...)
	checkStacks(t, p, map[string][]int64{
		"memory: ?;main":  {1, 8, 1, 8, 1, 8},
		"memory: ?":       {1, 16, 1, 16, 1, 16},
		"memory: late_fn": {1, 32, 1, 32, 1, 32},
	})
	for _, l := range p.Location {
		if l.Address == 0x401400 && (len(l.Line) != 0 || l.Mapping == nil || l.Mapping.File != "/bin/leaky") {
			t.Errorf("unnamed address: lines %v, mapping %+v; want none, /bin/leaky", l.Line, l.Mapping)
		}
	}
}

// TestNilResolver: without a resolver unresolved frames are addresses.
func TestNilResolver(t *testing.T) {
	p, _ := encode(t, nil, append(head(false), alloc(1, 1, 8, addrA), exited)...)
	checkStacks(t, p, map[string][]int64{"memory: ?": {1, 8, 1, 8, 1, 8}})
}
