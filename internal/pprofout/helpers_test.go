package pprofout

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"rtrace/internal/trace"
)

// fakeResolver names the addresses of its table once a mapping holds them.
type fakeResolver struct {
	maps  []trace.Mapping
	names map[uint64]trace.Location
}

func (f *fakeResolver) AddMapping(m trace.Mapping) { f.maps = append(f.maps, m) }

func (f *fakeResolver) Locate(addr uint64) trace.Location {
	for _, m := range f.maps {
		if addr >= m.From && addr < m.To {
			l := f.names[addr]
			l.Module, l.Start, l.Limit, l.Offset = m.Path, m.From, m.To, 0x1000
			return l
		}
	}
	return trace.Location{}
}

// Addresses in /bin/leaky the fake resolver names.
const (
	addrA    = 0x401100
	addrB    = 0x401200
	addrMain = 0x401300
	pid      = 100
)

func newFake() *fakeResolver {
	return &fakeResolver{names: map[uint64]trace.Location{
		addrA:    {Func: "alloc_a", File: "/src/leaky.c", Line: 10},
		addrB:    {Func: "alloc_b", File: "/src/leaky.c", Line: 20},
		addrMain: {Func: "main", File: "/src/leaky.c", Line: 30},
	}}
}

// head is the start of a trace: header, resource types, the mapping.
func head(refcount bool) []trace.Item {
	return []trace.Item{
		&trace.Header{Version: "3.0", Process: "leaky", Pid: pid, Time: time.Unix(1700000000, 0)},
		&trace.Resource{ID: 1, Name: "memory", Refcount: refcount},
		&trace.Resource{ID: 2, Name: "file descriptor"},
		&trace.Mapping{From: 0x401000, To: 0x402000, Path: "/bin/leaky"},
	}
}

func alloc(res int, id, size uint64, addrs ...uint64) *trace.Call {
	c := &trace.Call{Res: res, Alloc: true, ID: id, Size: size}
	for _, a := range addrs {
		c.Frames = append(c.Frames, trace.Frame{Addr: a})
	}
	return c
}

func free(res int, id uint64) *trace.Call { return &trace.Call{Res: res, ID: id} }

var exited = &trace.Task{Tid: pid, Pid: pid, Exit: true}

// encode writes items through a Writer and parses the profile back.
func encode(t *testing.T, res Resolver, items ...trace.Item) (*profile.Profile, []byte) {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, res)
	for _, it := range items {
		if err := w.Write(it); err != nil {
			t.Fatalf("Write(%T): %v", it, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	p, err := profile.Parse(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("parsing the profile: %v", err)
	}
	if err := p.CheckValid(); err != nil {
		t.Fatalf("CheckValid: %v", err)
	}
	return p, buf.Bytes()
}

// byStack returns the sample values keyed by "resource: leaf;caller;...".
func byStack(t *testing.T, p *profile.Profile) map[string][]int64 {
	t.Helper()
	out := map[string][]int64{}
	for _, s := range p.Sample {
		var names []string
		for _, l := range s.Location {
			name := "?"
			if len(l.Line) > 0 {
				name = l.Line[0].Function.Name
			}
			names = append(names, name)
		}
		k := strings.Join(s.Label["resource"], ",") + ": " + strings.Join(names, ";")
		if _, dup := out[k]; dup {
			t.Errorf("two samples for %s", k)
		}
		out[k] = s.Value
	}
	return out
}

func checkStacks(t *testing.T, p *profile.Profile, want map[string][]int64) {
	t.Helper()
	got := byStack(t, p)
	for k, w := range want {
		if !slices.Equal(got[k], w) {
			t.Errorf("%s: values %v, want %v", k, got[k], w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected sample %s: %v", k, g)
		}
	}
}
