package postproc

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"rtrace/internal/rtext"
	"rtrace/internal/trace"
	"rtrace/internal/wire"
)

// TestTextFromWire: a binary stream is told from text by its first byte
// and post-processed into text.
func TestTextFromWire(t *testing.T) {
	var stream bytes.Buffer
	w := wire.NewWriter(&stream)
	for _, it := range []trace.Item{
		&trace.Header{Version: "3.0", Arch: "x86_64", Time: time.Date(2024, 3, 5, 7, 8, 9, 0, time.Local), Process: "./leaky", Pid: 42, Depth: 10},
		&trace.Module{ID: 1, Name: "memory", Major: 1},
		&trace.Resource{ID: 1, Name: "memory", Desc: "memory allocation in bytes"},
		&trace.Library{Name: "*"},
		&trace.Mapping{From: 0x400000, To: 0x401000, Path: "/tmp/leaky"},
		&trace.Call{Index: 1, Time: 5 * time.Millisecond, Res: 1, Alloc: true, Name: "malloc", Size: 16, ID: 0x1000, Frames: []trace.Frame{{Addr: 0x400100}}},
		&trace.Call{Index: 2, Time: 6 * time.Millisecond, Res: 1, Alloc: true, Name: "malloc", Size: 32, ID: 0x2000, Frames: []trace.Frame{{Addr: 0x400200}}},
		&trace.Call{Index: 3, Time: 7 * time.Millisecond, Res: 1, Name: "free", ID: 0x1000},
	} {
		if err := w.Write(it); err != nil {
			t.Fatalf("encoding %T: %v", it, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Text(&stream, &out, Options{Leaks: true}); err != nil {
		t.Fatal(err)
	}
	want := "version=" + wire.Version + ", arch=x86_64, timestamp=2024.3.5 07:08:09, process=./leaky, pid=42, filter=leaks, backtrace depth=10, \n" +
		"<1> : memory (memory allocation in bytes)\n: /tmp/leaky => 0x400000-0x401000\n" +
		"## total runtime: 0.00s.\n## calls to allocation functions: 2 (1000/s)\n## temporary memory allocations: 0 (0/s)\n" +
		"## peak heap memory consumption: 48B after 0.001s\n## peak RSS (including rtrace overhead): unknown (the trace does not say)\n" +
		"## total memory leaked: 32B in 1 blocks\n## total heap usage: 2 allocs, 1 frees, 48 bytes allocated\n" +
		"## tracing module: [1] memory (1.0)\n" +
		"2. [00:00:00.006] malloc(32) = 0x2000\n\t0x400200\n\n" +
		"# Resource - memory (memory allocation in bytes):\n# 1 block(s) leaked with total size of 32 bytes\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

func TestTextBadInput(t *testing.T) {
	var out bytes.Buffer
	if err := Text(strings.NewReader(""), &out, Options{}); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty: %v", err)
	}
	var se *rtext.SyntaxError
	if err := Text(strings.NewReader("\x7fELF\x02\x01"), &out, Options{}); !errors.As(err, &se) {
		t.Errorf("not a trace: %v", err)
	}
	if err := Text(strings.NewReader("\xf0\x01"), &out, Options{}); err == nil || !strings.Contains(err.Error(), "binary stream") {
		t.Errorf("cut handshake: %v", err)
	}
}
