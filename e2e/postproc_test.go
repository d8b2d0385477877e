package e2e_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"rtrace/internal/testutil"
)

// TestPostprocUftraceFilters: `rtrace postproc OPTS -i full -d out` on a
// recorded uftrace.data directory must show in uftrace exactly what
// uftrace's own replay-time filters show of the full trace, durations
// included.
func TestPostprocUftraceFilters(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	for _, fx := range []struct {
		src  string
		args []string
		opts [][]string
	}{
		{"slow.c", nil, [][]string{
			{"-F", "slow"},
			{"-N", "slow", "-D", "2"},
			{"-t", "5ms"},
			{"-F", "main", "-D", "2"},
			{"-F", "^(mid|slow)$", "-N", "usleep"},
			{"-F", "slow", "-t", "10us"},
			{"-H", "mid"},
			{"-H", "slow", "-D", "2"},
			{"--caller-filter", "fast"},
			{"--caller-filter", "usleep", "-t", "1ms"},
			{"-T", "slow@depth=1"},
			{"-T", "slow@notrace"},
			{"-T", "mid@filter"},
			{"-T", "slow@time=1ms"},
			{"-T", "slow@hide"},
			{"-T", "slow@trace_off"},
			{"-t", "5ms", "-T", "mid@trace"},
		}},
		{"chain.c", nil, [][]string{
			{"--caller-filter", "c"},
			{"-H", "c"},
			{"-T", "b@filter,depth=2"},
			{"-T", "b@caller", "-H", "a"},
		}},
		// Each fib matching -F starts the -D count again.
		{"fib.c", []string{"6"}, [][]string{
			{"-F", "fib", "-D", "2"},
			{"-D", "3"},
			{"-N", "fib"},
		}},
	} {
		prog := testutil.BuildC(t, fx.src, "-O0")
		tmp := t.TempDir()
		if r := runCmd(t, tmp, rtraceBin, append([]string{"record", "-d", "full", "--", prog}, fx.args...)...); r.code != 0 && !(fx.src == "chain.c" && r.code == 18%7) {
			t.Fatalf("record: exit %d\n%s", r.code, r.stderr)
		}
		full := testutil.Run(t, tmp, uft, "replay", "-d", "full")
		for i, opts := range fx.opts {
			t.Run(fx.src+" "+strings.Join(opts, " "), func(t *testing.T) {
				out := fmt.Sprintf("f%d", i)
				args := append(append([]string{"postproc"}, opts...), "-i", "full", "-d", out)
				if r := runCmd(t, tmp, rtraceBin, args...); r.code != 0 {
					t.Fatalf("postproc: exit %d\n%s", r.code, r.stderr)
				}
				want := testutil.Run(t, tmp, uft, append([]string{"replay", "-d", "full"}, opts...)...)
				got := testutil.Run(t, tmp, uft, "replay", "-d", out)
				// Calls that tracing was switched off in have no exit in
				// the filtered trace: uftrace lists them after it.
				if i := strings.Index(got, "uftrace stopped tracing with remaining functions"); i >= 0 && opts[0] == "-T" {
					got = strings.TrimRight(got[:i], "\n") + "\n"
				}
				if got != want {
					t.Errorf("uftrace replay of the filtered trace:\n%s\nuftrace replay %v of the full one:\n%s", got, opts, want)
				}
				if got == full || strings.Count(got, "\n") < 3 {
					t.Errorf("the filter kept everything or nothing:\n%s", got)
				}
			})
		}
	}
}

// TestPostprocBadUftraceUse: resource options on a uftrace.data input,
// function filters on a resource trace and a missing -d are refused with
// the reason.
func TestPostprocBadUftraceUse(t *testing.T) {
	testutil.RequireTool(t, "gcc")
	prog := testutil.BuildC(t, "slow.c", "-O0")
	tmp := t.TempDir()
	if r := runCmd(t, tmp, rtraceBin, "record", "-d", "full", "--", prog); r.code != 0 {
		t.Fatalf("record: exit %d\n%s", r.code, r.stderr)
	}
	os.WriteFile(filepath.Join(tmp, "empty.txt"), []byte("not a trace\n"), 0o644)
	os.Mkdir(filepath.Join(tmp, "plain"), 0o755)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-l", "-i", "full", "-d", "x"}, 1, "--filter-leaks filters resource traces"},
		{[]string{"-F", "a", "-i", "full"}, 1, "needs -d OUTDIR"},
		{[]string{"-F", "a", "-i", "empty.txt"}, 2, "apply to a uftrace.data directory"},
		{[]string{"-i", "plain", "-d", "x"}, 1, "not a uftrace.data directory"},
		{[]string{"-F", "a(", "-i", "full", "-d", "x"}, 2, "function pattern"},
		{[]string{"-t", "soon", "-i", "full", "-d", "x"}, 2, `time "soon"`},
		{[]string{"-i", "full", "-d", "full"}, 1, "is not empty"},
		{[]string{"-O", "svg", "-i", "empty.txt"}, 2, "the formats are"},
		{[]string{"-N", "main", "-i", "full", "-d", "none"}, 1, "no record passed the filters"},
		{[]string{"-i", "full", "-o", "x", "-d", "y"}, 2, "written to -d OUTDIR, not -o"},
		{[]string{"-i", "empty.txt", "-o", "empty.txt"}, 2, "is the input"},
		{[]string{"-c", "-O", "wire", "-i", "empty.txt"}, 2, "the binary stream has no groups"},
		{[]string{"-r", "-O", "wire", "-i", "empty.txt"}, 2, "carries addresses only"},
		{[]string{"-c", "--pprof", "p.pb.gz", "-i", "empty.txt"}, 2, "sums calls by backtrace"},
		{[]string{"--pprof", "p", "-o", "d", "a", "b"}, 2, "names one output file"},
	} {
		r := runCmd(t, tmp, rtraceBin, append([]string{"postproc"}, tc.args...)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "panic") {
			t.Errorf("postproc %v: exit %d, stderr %q; want exit %d and %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
		if b, _ := os.ReadFile(filepath.Join(tmp, "empty.txt")); string(b) != "not a trace\n" {
			t.Fatalf("postproc %v changed its input", tc.args)
		}
		if _, err := os.Stat(filepath.Join(tmp, "none")); err == nil {
			t.Errorf("postproc %v left the empty trace directory", tc.args)
		}
	}
}

// recordLeaky records the memory trace of prog (the leaky fixture) into
// tmp/D and returns the raw file and the fixture's output.
func recordLeaky(t *testing.T, tmp, prog string) (raw, out string) {
	t.Helper()
	r := runCmd(t, tmp, rtraceBin, "sp-rtrace", "-e", "memory", "--start", "-b", "10", "-o", "D", "--", prog)
	if r.code != 0 {
		t.Fatalf("record: exit %d\n%s", r.code, r.stderr)
	}
	noResWarnings(t, r.stderr)
	files := rawFiles(t, filepath.Join(tmp, "D"), ".rtrace")
	if len(files) != 1 {
		t.Fatalf("raw files %v, want one", files)
	}
	return files[0], r.stdout
}

// midPacket returns an offset inside a packet header past two thirds of
// the wire stream b: a cut there is a truncation (a cut between packets
// would leave a shorter, whole stream).
func midPacket(t *testing.T, b []byte) int {
	off := 2 + int(b[1]) // the handshake
	for off+8 <= len(b) {
		if off >= len(b)*2/3 {
			return off + 5
		}
		off += 8 + int(binary.LittleEndian.Uint32(b[off+4:]))
	}
	t.Fatalf("no packet past two thirds of %d bytes", len(b))
	return 0
}

// TestBatch: 20 traces, one of them truncated, through postproc -l -c under
// -j 2: 19 reports, each what the single-input command writes, one error
// naming the bad file and the offset, exit 1, and no output for it. Then
// resolve -o over the 19 reports.
func TestBatch(t *testing.T) {
	testutil.RequireTool(t, "gcc")
	tmp := t.TempDir()
	raw, _ := recordLeaky(t, tmp, testutil.BuildC(t, "leaky.c", "-O0", "-g"))
	data, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(tmp, "in")
	os.Mkdir(in, 0o755)
	var inputs []string
	for i := range 20 {
		b := data
		if i == 13 {
			b = data[:midPacket(t, data)]
		}
		p := filepath.Join(in, fmt.Sprintf("t%02d.rtrace", i))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, p)
	}
	r := runCmd(t, tmp, rtraceBin, append([]string{"postproc", "-l", "-c", "-o", "out", "-j", "2"}, inputs...)...)
	if r.code != 1 {
		t.Errorf("batch: exit %d, want 1\n%s", r.code, r.stderr)
	}
	bad := inputs[13]
	if !strings.Contains(r.stderr, bad+": ") || !strings.Contains(r.stderr, "offset") || strings.Count(r.stderr, in+"/") != 1 {
		t.Errorf("stderr should name %s and the offset, and no other input:\n%s", bad, r.stderr)
	}
	outs, _ := filepath.Glob(filepath.Join(tmp, "out", "*"))
	if len(outs) != 19 {
		t.Fatalf("%d outputs, want 19: %v", len(outs), outs)
	}
	want := runCmd(t, tmp, rtraceBin, "postproc", "-l", "-c", "-i", inputs[0]).stdout
	for _, o := range outs {
		if filepath.Base(o) == "t13.rtrace.txt" {
			t.Errorf("the failed input left %s", o)
		}
		if b, _ := os.ReadFile(o); string(b) != want {
			t.Errorf("%s differs from the single-input output", o)
		}
	}

	r = runCmd(t, tmp, rtraceBin, append([]string{"resolve", "-o", "res", "-j", "2"}, outs...)...)
	if r.code != 0 {
		t.Fatalf("resolve batch: exit %d\n%s", r.code, r.stderr)
	}
	want = runCmd(t, tmp, rtraceBin, "postproc", "-l", "-c", "-r", "-i", inputs[0]).stdout
	res, _ := filepath.Glob(filepath.Join(tmp, "res", "*"))
	if len(res) != 19 {
		t.Fatalf("%d resolved outputs, want 19", len(res))
	}
	for _, o := range res {
		if b, _ := os.ReadFile(o); string(b) != want {
			t.Errorf("%s differs from postproc -l -c -r", o)
		}
	}
}

// TestPprof: the leaky fixture's trace as an allocation profile. go tool
// pprof -top must list each allocating function with the bytes it leaked
// (computed from the fixture's own rules), the same for live allocations,
// and the 1000 allocations made.
func TestPprof(t *testing.T) {
	goTool := testutil.RequireTool(t, "go")
	tmp := t.TempDir()
	raw, _ := recordLeaky(t, tmp, testutil.BuildC(t, "leaky.c", "-O2", "-g", "-fomit-frame-pointer"))
	if r := runCmd(t, tmp, rtraceBin, "postproc", "--pprof", "heap.pb.gz", "-i", raw); r.code != 0 {
		t.Fatalf("postproc --pprof: exit %d\n%s", r.code, r.stderr)
	}
	// The same profile from the trace's text: the process's end survives it.
	if r := runCmd(t, tmp, rtraceBin, "postproc", "-i", raw, "-o", "trace.txt"); r.code != 0 {
		t.Fatalf("postproc: exit %d\n%s", r.code, r.stderr)
	}
	if r := runCmd(t, tmp, rtraceBin, "postproc", "--pprof", "text.pb.gz", "-i", "trace.txt"); r.code != 0 {
		t.Fatalf("postproc --pprof: exit %d\n%s", r.code, r.stderr)
	}
	// leaky.c: block i is leaked when i%59 == 0; its size and allocating
	// function depend on i%3.
	want := map[string]int{}
	for i := 0; i < 1000; i += 59 {
		switch i % 3 {
		case 0:
			want["small_block"] += 16 + i%7
		case 1:
			want["zeroed_block"] += 4 * (8 + i%5)
		default:
			want["grown_block"] += 200 + i%3
		}
	}
	top := func(index, file string) string {
		return testutil.Run(t, tmp, goTool, "tool", "pprof", "-top", "-unit=B", "-sample_index="+index, file)
	}
	for _, index := range []string{"leak_space@heap.pb.gz", "inuse_space@heap.pb.gz", "leak_space@text.pb.gz"} {
		index, file, _ := strings.Cut(index, "@")
		out := top(index, file)
		for fn, bytes := range want {
			line := regexp.MustCompile(fmt.Sprintf(`(?m)^\s+%dB\s.*\s%s$`, bytes, fn))
			if !line.MatchString(out) {
				t.Errorf("%s: no line with %dB flat for %s:\n%s", index, bytes, fn, out)
			}
		}
		if !strings.Contains(out, "main") {
			t.Errorf("%s: main is not in the profile:\n%s", index, out)
		}
	}
	// Every allocation: 1000 blocks plus grown_block's 333 first mallocs;
	// realloc counts as an allocation of its own.
	out := top("alloc_objects", "heap.pb.gz")
	if m := regexp.MustCompile(`accounting for \d+B?, 100% of (\d+)B? total`).FindStringSubmatch(out); m == nil || m[1] != "1333" {
		t.Errorf("alloc_objects total %q, want 1333:\n%s", m, out)
	}
}

// TestResolveUftraceDir: rtrace resolve on a uftrace.data directory whose
// .sym and .dbg files are gone writes them again, into a copy (-o) or in
// place, so that uftrace shows the same trace, source lines included.
func TestResolveUftraceDir(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	prog := testutil.BuildC(t, "slow.c", "-O0", "-g")
	tmp := t.TempDir()
	if r := runCmd(t, tmp, rtraceBin, "record", "--srcline", "-d", "full", "--", prog); r.code != 0 {
		t.Fatalf("record: exit %d\n%s", r.code, r.stderr)
	}
	want := testutil.Run(t, tmp, uft, "replay", "--srcline", "-d", "full")
	if !strings.Contains(want, "slow.c:") {
		t.Fatalf("the recorded trace has no source lines:\n%s", want)
	}
	files, _ := filepath.Glob(filepath.Join(tmp, "full", "*.[sd][yb][mg]"))
	if len(files) < 2 {
		t.Fatalf("record wrote no .sym/.dbg files: %v", files)
	}
	for _, f := range files {
		os.Remove(f)
	}
	if got := testutil.Run(t, tmp, uft, "replay", "--srcline", "-d", "full"); got == want {
		t.Fatal("uftrace shows the same without the files: the test proves nothing")
	}
	r := runCmd(t, tmp, rtraceBin, "resolve", "-i", "full", "-o", "copy")
	if r.code != 0 || !strings.Contains(r.stderr, "symbols of ") {
		t.Fatalf("resolve -o: exit %d\n%s", r.code, r.stderr)
	}
	if got := testutil.Run(t, tmp, uft, "replay", "--srcline", "-d", "copy"); got != want {
		t.Errorf("replay of the resolved copy:\n%s\nwant:\n%s", got, want)
	}
	if r := runCmd(t, tmp, rtraceBin, "resolve", "-i", "full"); r.code != 0 {
		t.Fatalf("resolve in place: exit %d\n%s", r.code, r.stderr)
	}
	if got := testutil.Run(t, tmp, uft, "replay", "--srcline", "-d", "full"); got != want {
		t.Errorf("replay after resolving in place:\n%s\nwant:\n%s", got, want)
	}
}

// A trace whose arguments are decoded with the .dbg's specs (-a, -A FUNC)
// stays readable through postproc: the .dbg is copied with its build id
// as it was (none: uftrace reads a .dbg with one only when the map line
// repeats it, and rtrace's do not).
func TestPostprocDbgSpecs(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	prog := testutil.BuildC(t, "callers.c", "-O0", "-g")
	for _, opts := range [][]string{{"-a"}, {"-A", "c", "-R", "d"}} {
		t.Run(strings.Join(opts, " "), func(t *testing.T) {
			tmp := t.TempDir()
			if r := runCmd(t, tmp, rtraceBin, append(append([]string{"record", "-q", "-d", "full"}, opts...), prog)...); r.code != 0 {
				t.Fatalf("record: %+v", r)
			}
			if r := runCmd(t, tmp, rtraceBin, "postproc", "-F", "c", "-i", "full", "-d", "out"); r.code != 0 {
				t.Fatalf("postproc: %+v", r)
			}
			want := testutil.Run(t, tmp, uft, "replay", "-F", "c", "-d", "full")
			got := testutil.Run(t, tmp, uft, "replay", "-d", "out")
			if got != want || !strings.Contains(got, "c(1)") {
				t.Errorf("postproc -F c:\n%s\nuftrace replay -F c:\n%s", got, want)
			}
		})
	}
}
