package pprofout

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"rtrace/internal/testutil"
	"rtrace/internal/trace"
)

// leakyTrace: allocations at two stacks and one without backtrace, a
// release, a release of nothing, an ID taken over, a descriptor.
func leakyTrace(end ...trace.Item) []trace.Item {
	items := append(head(false),
		alloc(1, 0x10, 100, addrA, addrMain),
		alloc(1, 0x20, 200, addrA, addrMain),
		alloc(1, 0x30, 50, addrB, addrMain),
		free(1, 0x20),
		alloc(1, 0x40, 7),
		free(1, 0x999),
		alloc(1, 0x10, 30, addrB, addrMain), // takes 0x10 over: the 100 stay in use
		free(1, 0x10),                       // frees the 30
		alloc(2, 3, 1, addrA, addrMain),     // a descriptor at the same stack
	)
	return append(items, end...)
}

// TestValues checks the six values of each stack, the sample types, the
// resource label and what the locations say.
func TestValues(t *testing.T) {
	p, _ := encode(t, newFake(), leakyTrace(exited)...)
	checkStacks(t, p, map[string][]int64{
		"memory: alloc_a;main":          {2, 300, 1, 100, 1, 100},
		"memory: alloc_b;main":          {2, 80, 1, 50, 1, 50},
		"memory: [no backtrace]":        {1, 7, 1, 7, 1, 7},
		"file descriptor: alloc_a;main": {1, 1, 1, 1, 1, 1},
	})
	var types []string
	for _, st := range p.SampleType {
		types = append(types, st.Type+"/"+st.Unit)
	}
	want := []string{"alloc_objects/count", "alloc_space/bytes", "inuse_objects/count", "inuse_space/bytes", "leak_objects/count", "leak_space/bytes"}
	if !slices.Equal(types, want) || p.DefaultSampleType != "inuse_space" {
		t.Errorf("sample types %v default %q, want %v default inuse_space", types, p.DefaultSampleType, want)
	}
	if c := strings.Join(p.Comments, "\n"); !strings.Contains(c, "process end seen") {
		t.Errorf("comments %q do not say the process end was seen", c)
	}
	if len(p.Location) != 4 || len(p.Function) != 4 {
		t.Errorf("%d locations, %d functions; want 4 of each (3 addresses, no backtrace)", len(p.Location), len(p.Function))
	}
	for _, l := range p.Location {
		if l.Address != addrA {
			continue
		}
		ln := l.Line[0]
		if l.Mapping == nil || l.Mapping.File != "/bin/leaky" || l.Mapping.Offset != 0x1000 || !l.Mapping.HasFunctions {
			t.Errorf("location %#x: mapping %+v, want /bin/leaky at offset 0x1000, symbolized", l.Address, l.Mapping)
		}
		if ln.Function.Name != "alloc_a" || ln.Function.Filename != "/src/leaky.c" || ln.Line != 10 {
			t.Errorf("location %#x: %s %s:%d, want alloc_a /src/leaky.c:10", l.Address, ln.Function.Name, ln.Function.Filename, ln.Line)
		}
	}
}

// TestNoProcessEnd: without the exit of the traced process (a thread's
// does not count) nothing is a leak, though it is in use.
func TestNoProcessEnd(t *testing.T) {
	threadExit := &trace.Task{Tid: pid + 1, Pid: pid, Exit: true}
	p, _ := encode(t, newFake(), leakyTrace(threadExit)...)
	checkStacks(t, p, map[string][]int64{
		"memory: alloc_a;main":          {2, 300, 1, 100, 0, 0},
		"memory: alloc_b;main":          {2, 80, 1, 50, 0, 0},
		"memory: [no backtrace]":        {1, 7, 1, 7, 0, 0},
		"file descriptor: alloc_a;main": {1, 1, 1, 1, 0, 0},
	})
	if c := strings.Join(p.Comments, "\n"); !strings.Contains(c, "process end not seen") {
		t.Errorf("comments %q do not say the process end was not seen", c)
	}
}

// TestRefcount runs the same calls on a type with and without reference
// counting: a second allocation of a live ID is a reference, or takes the
// ID over.
func TestRefcount(t *testing.T) {
	calls := []trace.Item{
		alloc(1, 1, 10, addrA), alloc(1, 1, 10, addrB), free(1, 1),
		alloc(1, 2, 5, addrA), alloc(1, 2, 5, addrB), free(1, 2), free(1, 2),
		free(1, 2), // nothing left to release
		exited,
	}
	for _, c := range []struct {
		refcount bool
		want     map[string][]int64
	}{
		// id 1 keeps a reference; id 2 is gone.
		{true, map[string][]int64{"memory: alloc_a": {2, 15, 1, 10, 1, 10}, "memory: alloc_b": {2, 15, 0, 0, 0, 0}}},
		// The allocations at b took the IDs over and were freed; those
		// at a were never released.
		{false, map[string][]int64{"memory: alloc_a": {2, 15, 2, 15, 2, 15}, "memory: alloc_b": {2, 15, 0, 0, 0, 0}}},
	} {
		p, _ := encode(t, newFake(), append(head(c.refcount), calls...)...)
		t.Logf("refcount %v", c.refcount)
		checkStacks(t, p, c.want)
	}
}

// TestBounded: the Writer keeps live allocations and stacks, not calls.
func TestBounded(t *testing.T) {
	w := NewWriter(&bytes.Buffer{}, newFake())
	for _, it := range head(false) {
		w.Write(it)
	}
	for i := range uint64(10000) {
		w.Write(alloc(1, i, 16, []uint64{addrA, addrB}[i%2], addrMain))
		w.Write(free(1, i))
	}
	if w.live.Len() != 0 || len(w.order) != 2 || len(w.locs.locations) != 3 {
		t.Errorf("after 10000 freed allocations: %d live, %d stacks, %d locations; want 0, 2, 3", w.live.Len(), len(w.order), len(w.locs.locations))
	}
}

// TestGoToolPprof reads the profile with `go tool pprof -top`: the
// function names and in-use bytes of the resolver's stacks.
func TestGoToolPprof(t *testing.T) {
	goTool := testutil.RequireTool(t, "go")
	_, data := encode(t, newFake(), leakyTrace(exited)...)
	dir := t.TempDir()
	file := filepath.Join(dir, "leaky.pb.gz")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goTool, "tool", "pprof", "-top", "-sample_index=inuse_space", file)
	cmd.Dir = dir // outside the module: no toolchain switch
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go tool pprof: %v\n%s", err, stderr.String())
	}
	// flat flat% sum% cum cum% name: alloc_a holds 100 bytes and a
	// descriptor's 1, alloc_b 50, the call without backtrace 7; main
	// holds them all but only cumulatively.
	for _, re := range []string{
		`(?m)^\s*101B .*\s101B .* alloc_a$`,
		`(?m)^\s*50B .*\s50B .* alloc_b$`,
		`(?m)^\s*7B .*\s7B .* \[no backtrace\]$`,
		`(?m)^\s*0 .*\s151B .* main$`,
	} {
		if !regexp.MustCompile(re).Match(out) {
			t.Errorf("go tool pprof -top output has no line matching %s:\n%s", re, out)
		}
	}
	if strings.Contains(stderr.String(), "symbolization failed") {
		t.Errorf("pprof tried to symbolize resolved mappings:\n%s", stderr.String())
	}
}
