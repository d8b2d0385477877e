package tracer

import (
	"reflect"
	"testing"

	"rtrace/internal/trace"
	"rtrace/internal/uftrace"
)

// The scan reads the writable mappings but rtrace's and the kernel's,
// each thread's stack from its stack pointer up (the last thread's in a
// reused stack), and takes values in the heap and anonymous mappings only.
func TestScanRegions(t *testing.T) {
	maps := []uftrace.Mapping{
		{Start: 0x400000, End: 0x401000, Perm: "r-xp", Path: "/bin/p"},
		{Start: 0x403000, End: 0x404000, Perm: "rw-p", Path: "/bin/p"},
		{Start: 0x500000, End: 0x521000, Perm: "rw-p", Path: "[heap]"},
		{Start: 0x7f0000000000, End: 0x7f0000021000, Perm: "rw-p"},
		{Start: 0x7f0000021000, End: 0x7f0000030000, Perm: "---p"},
		{Start: 0x7f1000000000, End: 0x7f1000800000, Perm: "rw-p"}, // a thread's stack
		{Start: 0x7f2000000000, End: 0x7f2000010000, Perm: "rw-s", Path: "/memfd:rtrace-thread (deleted)"},
		{Start: 0x7f3000000000, End: 0x7f3000005000, Perm: "rw-p"}, // rtrace's table, merged with a library's bss
		{Start: 0x7f4000000000, End: 0x7f4000001000, Perm: "rw-s", Path: "/dev/mydev"},
		{Start: 0x7ffc00000000, End: 0x7ffc00021000, Perm: "rw-p", Path: "[stack]"},
		{Start: 0x7ffc00100000, End: 0x7ffc00102000, Perm: "r--p", Path: "[vvar]"},
	}
	ends := []threadEnd{{sp: 0x7f10007ff003}, {sp: 0x7ffc00020000}, {sp: 0x7f10007ff100}}
	got := scanRegions(maps, ends, []uint64{0x7f3000000000, 0x7f3000003000})
	want := []trace.HeapRegion{
		{Start: 0x403000, End: 0x404000, Kind: trace.RegionRoot},
		{Start: 0x500000, End: 0x521000, Kind: trace.RegionHeap},
		{Start: 0x7f0000000000, End: 0x7f0000021000, Kind: trace.RegionAnon},
		{Start: 0x7f10007ff100, End: 0x7f1000800000, Kind: trace.RegionStack},
		{Start: 0x7f3000003000, End: 0x7f3000005000, Kind: trace.RegionAnon},
		{Start: 0x7ffc00020000, End: 0x7ffc00021000, Kind: trace.RegionStack},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("regions\n got %x\nwant %x", got, want)
	}
	targets := scanTargets(maps)
	for v, in := range map[uint64]bool{0x500000: true, 0x520fff: true, 0x521000: false, 0x7f0000020ff8: true,
		0x403010: false, 0x7f10007ff200: true, 0x7f1000000010: true, 0x7f2000000010: false, 0: false, ^uint64(0): false} {
		if inRanges(targets, v) != in {
			t.Errorf("%#x in the targets: %v, want %v", v, !in, in)
		}
	}
}

// TestOwnCut: the page map's maps leave rtrace's own mappings out: its
// memfds, and its table cut out of the anonymous mapping the kernel
// merged it into, the rest of that line kept on both sides.
func TestOwnCut(t *testing.T) {
	in := "55d0-55d1 r-xp 00000000 08:01 1 /bin/p\n" +
		"7f0000000000-7f0000104000 rw-p 00000000 00:00 0 \n" +
		"7f0000200000-7f0000201000 rw-s 00000000 00:01 9 /memfd:rtrace-threads (deleted)\n" +
		"7f0000300000-7f0000301000 rw-p 00000000 00:00 0 \n"
	got := ownCut(in, []uint64{0x7f0000001000, 0x7f0000102000, 0x7f0000300000, 0x7f0000301000})
	want := "55d0-55d1 r-xp 00000000 08:01 1 /bin/p\n" +
		"7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n" +
		"7f0000102000-7f0000104000 rw-p 00000000 00:00 0 \n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
