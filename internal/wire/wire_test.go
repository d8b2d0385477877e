package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"rtrace/internal/trace"
	"rtrace/internal/uftrace"
)

func sample() []trace.Item {
	return []trace.Item{
		&trace.Header{Version: Version, Arch: "x86_64", Time: time.Unix(1700000000, 123000), Process: "./leaky", Pid: 42, Depth: 10, OutDir: "out", PostOpts: "-l -c", Functions: true, Binary: true},
		&trace.Module{ID: 0, Name: "main", Major: 1, Minor: 0},
		&trace.Module{ID: 1, Name: "memory", Major: 1, Minor: 2},
		&trace.Resource{ID: 1, Name: "memory", Desc: "memory allocation in bytes"},
		&trace.Resource{ID: 2, Name: "segment", Desc: "shm", Refcount: true},
		&trace.Context{ID: 1, Name: "ctx"},
		&trace.Library{Name: "*"},
		&trace.Mapping{From: 0x400000, To: 0x401000, Path: "/bin/leaky"},
		&trace.Call{Index: 1, Time: 13*time.Hour + 1234567891, Tid: 43, Res: 1, Alloc: true, Name: "malloc", Size: 5 << 32, ID: 0x5555aaaa0000,
			Args: []trace.Arg{{Name: "path", Value: "/tmp/x"}, {Name: "flags", Value: ""}}, Frames: []trace.Frame{{Addr: 0x401234}, {Addr: 0x7fff00001111}}},
		&trace.Call{Index: 2, Time: 13 * time.Hour, Tid: 43, Res: 1, Name: "free", ID: 0x5555aaaa0000},
		// 3.2's batches: a backtrace and a function named again, a call
		// without a time, a context, another thread, times going back.
		&trace.Call{Index: 3, Time: 13*time.Hour + 5, Tid: 43, Res: 1, Alloc: true, Name: "malloc", Size: 16, ID: 0x5555aaaa0010, Frames: []trace.Frame{{Addr: 0x401234}, {Addr: 0x7fff00001111}}},
		&trace.Call{Index: 4, Time: -1, Tid: 43, Res: 2, Alloc: true, Name: "shmget", Size: 1, ID: 7, Context: 3},
		&trace.Call{Index: 5, Time: 12 * time.Hour, Tid: 47, Res: 1, Name: "free", ID: 0x5555aaaa0010, Frames: []trace.Frame{{Addr: 0x401238}}},
		&trace.Task{Time: 99, Tid: 44, Pid: 42},
		&trace.Probe{Time: 100, Tid: 44, Name: "app:step", Args: []string{"1", "0x10"}},
		&trace.Lost{Count: 7},
		&trace.Usage{Pid: 42, PeakRSS: 17 << 20},
		&trace.HeapRegions{Pid: 42, Regions: []trace.HeapRegion{{Start: 0x404000, End: 0x405000}, {Start: 0x7ffc0010, End: 0x7ffd0000, Kind: trace.RegionStack}, {Start: 0x5000000, End: 0x5021000, Kind: trace.RegionHeap}}},
		// Registers (at 0), then addresses up; values anywhere.
		&trace.HeapWords{Pid: 42, Words: []trace.HeapWord{{At: 0, Val: 0x5000010}, {At: 0, Val: 0x5000010}, {At: 0x404010, Val: 0x5020ff0}, {At: 0x404018, Val: 0x5000010}, {At: 0x7ffcfff8, Val: ^uint64(0)}}},
		&trace.File{Name: "heap", Path: "heap.txt"},
		&trace.PageMap{Pid: 42, Maps: "5000000-5003000 rw-p 00000000 00:00 0 [heap]\n"},
		&trace.PageFlags{Pid: 42, At: 0x5000000, Pages: []trace.Page{{}, {Info: trace.PageMemory | trace.PageZero}, {Info: trace.PageMemory | trace.PageExclusive, Kernel: true, KFlags: 1<<4 | 1<<14, KCount: 1}}},
		// Function traces (3.1).
		&trace.Session{Time: 5, Pid: 42, SID: "0123456789abcdef", Exe: "/bin/fib", Maps: []byte("55d0-55d1 r-xp 0 08:01 1 /bin/fib\n7ffc-7ffd rw-p 0 00:00 0 [stack]\n")},
		&trace.Maps{SID: "0123456789abcdef", Maps: []byte("a\n")},
		&trace.Task{Time: 6, Tid: 45, Pid: 45, PPid: 42},
		&trace.Dlopen{Time: 7, Tid: 42, SID: "0123456789abcdef", Base: 0x7f0000000000, Path: "/lib/libplug.so"},
		&trace.Symbols{SID: "0123456789abcdef", Funcs: []trace.Func{{Addr: 0x55d0, Name: "main"}, {Addr: 0x55e0, Name: "_ZN3geo5Shape4areaEv"}}},
		&trace.EventName{ID: 1000000, Name: "app:step"},
		&trace.Records{Tid: 42, Recs: []trace.Rec{
			{Record: uftrace.Record{Time: 10, Type: uftrace.Entry, Depth: 0, Addr: 0x55d0}},
			{Record: uftrace.Record{Time: 11, Type: uftrace.Entry, Depth: 1, Addr: 0x55e0, More: true}, Payload: []byte{1, 2, 3, 4, 5, 6, 7, 8}},
			{Record: uftrace.Record{Time: 12, Type: uftrace.Exit, Depth: 1, Addr: 0x55e0}},
			{Record: uftrace.Record{Time: 13, Type: uftrace.Exit, Depth: 0, Addr: 0x55d0, More: true}, Payload: make([]byte, 16)},
		}},
		&trace.Info{Info: uftrace.Info{ExeName: "/bin/fib", Cmdline: "rtrace record ./fib", TaskIDs: []int{42}, PatternType: "regex", ExitStatus: new(int), MaxStack: 1024}},
		// A recorder's info at its start has no task yet.
		&trace.Info{Info: uftrace.Info{ExeName: "/bin/fib", PatternType: "regex", MaxStack: 1024}},
	}
}

func encode(t testing.TB, items []trace.Item) []byte {
	var b bytes.Buffer
	w := NewWriter(&b)
	for _, it := range items {
		if err := w.Write(it); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func decodeAll(data []byte) ([]trace.Item, error) {
	r, err := NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	var out []trace.Item
	for {
		it, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, it)
	}
}

func TestRoundTrip(t *testing.T) {
	in := sample()
	data := encode(t, in)
	if len(data)%4 != 0 {
		t.Errorf("stream of %d bytes is not 4-aligned", len(data))
	}
	out, err := decodeAll(data)
	if err != nil {
		t.Fatal(err)
	}
	// The header loses sub-microsecond time; compare the rest as is.
	if len(out) != len(in) {
		t.Fatalf("got %d items, want %d", len(out), len(in))
	}
	for i := range in {
		if !reflect.DeepEqual(in[i], out[i]) {
			t.Errorf("item %d:\n got %+v\nwant %+v", i, out[i], in[i])
		}
	}
}

func TestTruncated(t *testing.T) {
	data := encode(t, sample())
	for cut := 17; cut < len(data); cut += 7 {
		out, err := decodeAll(data[:cut])
		if err == nil {
			// A cut at a packet boundary is a whole (shorter) stream.
			continue
		}
		if !strings.Contains(err.Error(), "offset") {
			t.Errorf("cut at %d: error %q does not name the offset", cut, err)
		}
		if len(out) == 0 {
			t.Errorf("cut at %d: no items before the error", cut)
		}
	}
}

// TestSpRtrace20 reads a stream laid out as sp-rtrace 2.0 writes it on
// i686: 4-byte pointers, no CEXT, HINF skipped, zero dwords for empty
// strings.
func TestSpRtrace20(t *testing.T) {
	var b bytes.Buffer
	b.Write([]byte{0xF0, 10, 2, 0, 4, 'i', '6', '8', '6', 0, 4, 0})
	pkt := func(typ uint32, fields ...any) {
		var p []byte
		for _, f := range fields {
			switch v := f.(type) {
			case uint32:
				p = binary.LittleEndian.AppendUint32(p, v)
			case string:
				n := len(v)
				if n == 0 {
					p = append(p, 0, 0, 0, 0)
					continue
				}
				pad := (4 - (2+n)%4) % 4
				p = binary.LittleEndian.AppendUint16(p, uint16(n+pad))
				p = append(p, v...)
				p = append(p, make([]byte, pad)...)
			}
		}
		b.Write(binary.LittleEndian.AppendUint32(nil, typ))
		b.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(p))))
		b.Write(p)
	}
	pkt(OCFG, "", "")
	pkt(PINF, uint32(17913), uint32(1308228588), uint32(0), uint32(10), "../bin/shmseg_test")
	pkt(MINF, uint32(1), uint32(1<<16), "shmsysv")
	pkt(RESR, uint32(1), uint32(1), "segment", "shared memory segment")
	pkt(NLIB, "*")
	pkt(HINF, uint32(1), uint32(2), uint32(3))
	pkt(CALL, uint32(1), uint32(0), uint32(53666319), uint32(2), "shmget", uint32(1024), uint32(0x1088018))
	pkt(ARGS, uint32(1), "shmid", "0x1088018")
	pkt(BTRC, uint32(2), uint32(0x8048526), uint32(0x80485b5))
	pkt('Z'|'Z'<<8|'Z'<<16|'Z'<<24, uint32(1)) // unknown: skipped
	pkt(CALL, uint32(1), uint32(0), uint32(53666320), uint32(1), "shmdt", uint32(0), uint32(0x1088018))
	pkt(BTRC, uint32(0))
	out, err := decodeAll(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	want := []trace.Item{
		&trace.Header{Version: "2.0", Arch: "i686", Time: time.Unix(1308228588, 0), Process: "../bin/shmseg_test", Pid: 17913, Depth: 10, Binary: true},
		&trace.Module{ID: 1, Name: "shmsysv", Major: 1},
		&trace.Resource{ID: 1, Name: "segment", Desc: "shared memory segment", Refcount: true},
		&trace.Library{Name: "*"},
		&trace.Call{Index: 1, Time: 53666319 * time.Millisecond, Res: 1, Alloc: true, Name: "shmget", Size: 1024, ID: 0x1088018,
			Args: []trace.Arg{{Name: "shmid", Value: "0x1088018"}}, Frames: []trace.Frame{{Addr: 0x8048526}, {Addr: 0x80485b5}}},
		&trace.Call{Index: 2, Time: 53666320 * time.Millisecond, Res: 1, Name: "shmdt", ID: 0x1088018},
	}
	if !reflect.DeepEqual(out, want) {
		for i := range max(len(out), len(want)) {
			var g, w trace.Item
			if i < len(out) {
				g = out[i]
			}
			if i < len(want) {
				w = want[i]
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("item %d:\n got %+v\nwant %+v", i, g, w)
			}
		}
	}
}

func TestNotWire(t *testing.T) {
	if _, err := NewReader(strings.NewReader("version=2.0, arch=i686")); !errors.Is(err, ErrNotWire) {
		t.Errorf("text input: got %v, want ErrNotWire", err)
	}
	if _, err := NewReader(bytes.NewReader([]byte{0xF0, 10, 9, 0, 4, 'i', '6', '8', '6', 0, 4, 0})); err == nil {
		t.Error("version 9.0 accepted")
	}
}

func FuzzReader(f *testing.F) {
	f.Add(encode(f, sample()))
	for _, name := range []string{"testdata/forkleak-3.1.rtrace", "testdata/calls-3.2.rtrace"} {
		if old, err := os.ReadFile(name); err == nil {
			f.Add(old)
		}
	}
	f.Add([]byte{0xF0, 10, 2, 0, 4, 'i', '6', '8', '6', 0, 4, 0, 'B', 'T', 'R', 'C', 4, 0, 0, 0, 255, 255, 255, 255})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data))
		if err != nil {
			return
		}
		for range 100000 {
			if _, err := r.Next(); err != nil {
				return
			}
		}
		t.Fatal("no end after 100000 items")
	})
}

// TestReadsVersion31: a raw file rtrace wrote before the compact calls
// (testdata/forkleak-3.1.rtrace: CALL, CEXT and BTRC per call) still reads.
func TestReadsVersion31(t *testing.T) {
	data, err := os.ReadFile("testdata/forkleak-3.1.rtrace")
	if err != nil {
		t.Fatal(err)
	}
	items, err := decodeAll(data)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range items {
		if c, ok := it.(*trace.Call); ok {
			got = append(got, fmt.Sprintf("%d %s alloc=%v size=%d frames=%d tid=%d", c.Index, c.Name, c.Alloc, c.Size, len(c.Frames), c.Tid))
		}
	}
	want := []string{"1 free alloc=false size=0 frames=0 tid=9437", "2 malloc alloc=true size=200 frames=5 tid=9437"}
	if !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	if h := items[0].(*trace.Header); h.Version != "3.1" {
		t.Errorf("version %q", h.Version)
	}
}

// TestReadsVersion32: a raw file of compact calls whose ids are not
// deltas (3.2, testdata/calls-3.2.rtrace, written by the 3.2 writer: six
// mallocs of 0x5555aaaa0000 + i*64, each followed by a free of the
// blocks in the other order) still reads.
func TestReadsVersion32(t *testing.T) {
	data, err := os.ReadFile("testdata/calls-3.2.rtrace")
	if err != nil {
		t.Fatal(err)
	}
	items, err := decodeAll(data)
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for i := range 6 {
		want = append(want, fmt.Sprintf("malloc %#x %d 2", 0x5555aaaa0000+i*64, 16+i), fmt.Sprintf("free %#x 0 0", 0x5555aaaa0000+(5-i)*64))
	}
	for _, it := range items {
		if c, ok := it.(*trace.Call); ok {
			got = append(got, fmt.Sprintf("%s %#x %d %d", c.Name, c.ID, c.Size, len(c.Frames)))
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	if h := items[0].(*trace.Header); h.Version != "3.2" {
		t.Errorf("version %q", h.Version)
	}
}

// TestUnknownCallFlags: a call with a flag this reader does not know
// (a newer writer's field) is an error, not a call read wrong.
func TestUnknownCallFlags(t *testing.T) {
	items := []trace.Item{&trace.Header{Version: Version, Pid: 1},
		&trace.Call{Time: 5, Tid: 1, Res: 1, Alloc: true, Name: "malloc", Size: 16, ID: 0x5000}}
	data := encode(t, items)
	// The call's flags byte: after the CALZ's tid, count and base time.
	at := bytes.Index(data, []byte("CALZ"))
	if at < 0 {
		t.Fatal("no CALZ packet")
	}
	i := bytes.LastIndexByte(data, czAlloc|czIDDelta)
	if i < at {
		t.Fatal("no call flags byte")
	}
	data[i] |= 64
	_, err := decodeAll(data)
	if err == nil || !strings.Contains(err.Error(), "does not know") {
		t.Errorf("decoding a call with flag 64: %v, want an error naming the flags", err)
	}
}

// TestCompactCalls: a call of 3.3 takes at most 24 bytes of the stream,
// its backtrace named once.
func TestCompactCalls(t *testing.T) {
	frames := []trace.Frame{{Addr: 0x555555555222}, {Addr: 0x555555555300}, {Addr: 0x5555555553fb}, {Addr: 0x7ffff7cfb24a}, {Addr: 0x7ffff7cfb305}}
	items := []trace.Item{&trace.Header{Version: Version, Pid: 1}}
	const n = 10000
	for i := range n {
		items = append(items,
			&trace.Call{Time: time.Duration(i) * 900, Tid: 1, Res: 1, Alloc: true, Name: "malloc", Size: uint64(16 + i%4096), ID: 0x5555aaaa0000 + uint64(i)*64, Frames: frames},
			&trace.Call{Time: time.Duration(i)*900 + 400, Tid: 1, Res: 1, Name: "free", ID: 0x5555aaaa0000 + uint64(i)*64})
	}
	data := encode(t, items)
	per := float64(len(data)) / (2 * n)
	t.Logf("%.1f bytes a call", per)
	if per > 24 {
		t.Errorf("%.1f bytes a call, want at most 24", per)
	}
	sameCallsBack(t, items, data)
}

// sameCallsBack checks that data decodes to items: a header, then calls,
// each back as it went in (its Index aside, the reader's).
func sameCallsBack(t *testing.T, items []trace.Item, data []byte) {
	t.Helper()
	out, err := decodeAll(data)
	if err != nil || len(out) != len(items) {
		t.Fatalf("%d items back, %v", len(out), err)
	}
	for i := range items[1:] {
		in, got := items[1+i].(*trace.Call), *out[1+i].(*trace.Call)
		in.Index = got.Index
		if !reflect.DeepEqual(*in, got) {
			t.Fatalf("call %d: %+v, want %+v", i, got, *in)
		}
	}
}

// samePutUvarint checks putUvarint(x) against encoding/binary's varint.
func samePutUvarint(t *testing.T, x uint64) {
	t.Helper()
	p := make([]byte, binary.MaxVarintLen64)
	n := putUvarint(p, x)
	if want := binary.AppendUvarint(nil, x); !bytes.Equal(p[:n], want) {
		t.Errorf("putUvarint(%#x) = % x, want % x", x, p[:n], want)
	}
}

// TestPutUvarint: the writer's varints are encoding/binary's, at every
// length, and so are its calls' fields at their extremes (a time that goes
// back, the largest id and size).
func TestPutUvarint(t *testing.T) {
	xs := []uint64{0, 1, 1<<63 - 1, 1 << 63, ^uint64(0), 0x5555deadbeef, 0x7ffff7cfb24a}
	for k := 1; k <= 9; k++ {
		xs = append(xs, 1<<(7*k)-1, 1<<(7*k), 1<<(7*k)+1)
	}
	for _, x := range xs {
		samePutUvarint(t, x)
	}
	items := []trace.Item{&trace.Header{Version: Version, Pid: 1},
		&trace.Call{Time: 5 * time.Hour, Tid: 1, Res: 1, Alloc: true, Name: "malloc", Size: ^uint64(0), ID: ^uint64(0), Frames: []trace.Frame{{Addr: 1}}},
		&trace.Call{Time: time.Second, Tid: 1, Res: 1, Name: "free", ID: ^uint64(0)},
		&trace.Call{Time: 0, Tid: 1, Res: 1, Alloc: true, Name: "malloc", Size: 0, ID: 0x80},
		&trace.Call{Time: 1 << 62, Tid: 1, Res: 1, Alloc: true, Name: "malloc", Size: ^uint64(0), ID: ^uint64(0), Frames: []trace.Frame{{Addr: 2}}},
	}
	sameCallsBack(t, items, encode(t, items))
}

// FuzzPutUvarint: the writer's varints are encoding/binary's for any value.
func FuzzPutUvarint(f *testing.F) {
	for _, x := range []uint64{0, 0x7f, 0x80, 1 << 56, ^uint64(0)} {
		f.Add(x)
	}
	f.Fuzz(samePutUvarint)
}

// A scan's words go in packets of heapWordsMax, read back as one item
// each; words out of order are refused, not written wrong.
func TestHeapWordsSplit(t *testing.T) {
	in := &trace.HeapWords{Pid: 7}
	for i := range heapWordsMax + 3 {
		in.Words = append(in.Words, trace.HeapWord{At: 0x1000 + 8*uint64(i), Val: uint64(i) * 0x10001})
	}
	out, err := decodeAll(encode(t, []trace.Item{&trace.Header{Version: Version, Arch: "x86_64"}, in}))
	if err != nil {
		t.Fatal(err)
	}
	var got []trace.HeapWord
	for _, it := range out[1:] {
		got = append(got, it.(*trace.HeapWords).Words...)
	}
	if len(out) != 3 || !reflect.DeepEqual(got, in.Words) {
		t.Errorf("got %d items, %d words; want 2 items, the same %d words", len(out)-1, len(got), len(in.Words))
	}
	w := NewWriter(io.Discard)
	w.Write(&trace.Header{Version: Version, Arch: "x86_64"})
	if err := w.Write(&trace.HeapWords{Words: []trace.HeapWord{{At: 16}, {At: 8}}}); err == nil {
		t.Error("words out of order written without an error")
	}
}

// TestWriter20 writes sample() as sp-rtrace's own 2.0 stream: only the
// packet types sp-rtrace-postproc knows (it stops at the first other
// one), each call as CALL [ARGS] BTRC, and what 2.0 has no field for
// left out; rtrace's reader reads the calls back as 2.0 carries them.
func TestWriter20(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter20(&b)
	in := sample()
	for _, it := range in {
		if err := w.Write(it); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := b.Bytes()
	if data[0] != Magic || data[2] != 2 || data[3] != 0 {
		t.Fatalf("handshake %x: want version 2.0", data[:4])
	}
	known := map[uint32]bool{OCFG: true, PINF: true, MINF: true, RESR: true, CTXR: true, CALL: true, ARGS: true, BTRC: true, MMAP: true, FILE: true}
	var types []string
	for off := 2 + int(data[1]); off < len(data); {
		typ, n := binary.LittleEndian.Uint32(data[off:]), binary.LittleEndian.Uint32(data[off+4:])
		if !known[typ] {
			t.Errorf("packet %s at offset %d: not in sp-rtrace 2.0", typeName(typ), off)
		}
		types = append(types, typeName(typ))
		off += 8 + int(n)
	}
	if got := strings.Join(types, " "); !strings.HasPrefix(got, "OCFG PINF MINF MINF RESR RESR CTXR MMAP CALL ARGS BTRC CALL BTRC") {
		t.Errorf("packets %s", got)
	}
	out, err := decodeAll(data)
	if err != nil {
		t.Fatal(err)
	}
	var want []trace.Item
	for _, it := range in {
		switch v := it.(type) {
		case *trace.Header:
			h := *v
			h.Version, h.Functions, h.Time = "2.0", false, time.Unix(v.Time.Unix(), int64(v.Time.Nanosecond()/1000*1000))
			want = append(want, &h)
		case *trace.Module, *trace.Resource, *trace.Context, *trace.Mapping, *trace.File:
			want = append(want, it)
		case *trace.Call:
			c := *v
			c.Tid, c.Time, c.Size = 0, c.Time.Truncate(time.Millisecond), min(c.Size, 1<<32-1)
			if v.Time < 0 {
				c.Time = 0
			}
			want = append(want, &c)
		}
	}
	if len(out) != len(want) {
		t.Fatalf("got %d items, want %d:\n%v", len(out), len(want), out)
	}
	for i := range want {
		if !reflect.DeepEqual(out[i], want[i]) {
			t.Errorf("item %d:\n got %+v\nwant %+v", i, out[i], want[i])
		}
	}
}
