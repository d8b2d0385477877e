package bench

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"rtrace/internal/rtext"
	"rtrace/internal/testutil"
	"rtrace/internal/trace"
	"rtrace/internal/wire"
	"rtrace/postproc"
	"rtrace/resolver"
)

// Resolve input: frames per malloc, and how many distinct addresses the
// frames are drawn from.
const (
	resolveDepth    = 10
	resolveDistinct = 2000
	leakyBase       = 0x555555554000
)

// BenchmarkResolveFrames times the resolve stage over a generated raw trace
// of N backtrace frames (N from RTRACE_BENCH_RESOLVE_FRAMES, default
// 1,000,000): mallocs of 10 frames each, each followed by a free, the
// frames drawn from 2000 distinct return addresses, a quarter in the
// functions of testdata/leaky.c (-O2 -g, mapped as a PIE) and the rest in
// libc. It reports
//   - frames/s: `rtrace resolve -i IN -o OUT` from start to exit, N over its
//     wall time (module loading and the first lookup of each address
//     included);
//   - warm-frames/s: the same, less a run over each distinct address once
//     (cold-ms), which is the one-time cost: the steady rate of a long trace;
//   - inproc-frames/s: the stage in this process, postproc.Run with a new
//     resolver.Resolver from the stream in memory to sp-rtrace text in
//     memory, with no process start-up nor file I/O.
//
// The output must resolve every frame (leaky.c's to "at leaky.c:LINE") and
// match the in-process text, or the benchmark fails.
func BenchmarkResolveFrames(b *testing.B) {
	n := 1000000
	if s := os.Getenv("RTRACE_BENCH_RESOLVE_FRAMES"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < resolveDistinct || n > 100000000 {
			b.Fatalf("RTRACE_BENCH_RESOLVE_FRAMES=%q: want a number from %d to 100000000", s, resolveDistinct)
		}
	}
	leaky := testutil.BuildC(b, "leaky.c", "-O2", "-g")
	tmp := b.TempDir()
	rtrace, err := testutil.BuildRtrace(tmp)
	if err != nil {
		b.Fatal(err)
	}
	prog, err := loadModule(leaky, leakyBase, leakyFuncs)
	if err != nil {
		b.Fatal(err)
	}
	libc, err := loadModule(findLibc(b), libcBase, nil)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	addrs := prog.returnAddrs(rng, resolveDistinct/4)
	inProg := len(addrs)
	addrs = append(addrs, libc.returnAddrs(rng, resolveDistinct-inProg)...)
	mods := []*module{prog, libc}

	// The cold input has each address once, the full one n frames drawn
	// from them.
	cold := append([]uint64(nil), addrs...)
	rng.Shuffle(len(cold), func(i, j int) { cold[i], cold[j] = cold[j], cold[i] })
	full := make([]uint64, n)
	for i := range full {
		full[i] = addrs[rng.IntN(len(addrs))]
	}
	coldIn, fullIn := filepath.Join(tmp, "cold.rtrace"), filepath.Join(tmp, "full.rtrace")
	if err := writeResolveInput(coldIn, mods, cold); err != nil {
		b.Fatal(err)
	}
	if err := writeResolveInput(fullIn, mods, full); err != nil {
		b.Fatal(err)
	}
	fullData, err := os.ReadFile(fullIn)
	if err != nil {
		b.Fatal(err)
	}
	isProg := map[uint64]bool{}
	for _, a := range addrs[:inProg] {
		isProg[a] = true
	}

	var coldT, fullT, inprocT time.Duration
	for i := 0; i < b.N; i++ {
		coldT = runResolve(b, rtrace, coldIn, filepath.Join(tmp, "cold.txt"))
		out := filepath.Join(tmp, "full.txt")
		fullT = runResolve(b, rtrace, fullIn, out)
		sum := checkResolved(b, out, n, isProg)

		var text bytes.Buffer
		text.Grow(len(fullData) * 3)
		start := time.Now()
		rd, err := postproc.NewReader(bytes.NewReader(fullData))
		if err != nil {
			b.Fatal(err)
		}
		opts := postproc.Options{Resolve: true, Keep: true, Resolver: resolver.New(resolver.Options{})}
		if err := postproc.Run(rd, rtext.NewWriter(&text), opts); err != nil {
			b.Fatal(err)
		}
		inprocT = time.Since(start)
		if sha256.Sum256(text.Bytes()) != sum {
			b.Fatalf("resolving in this process gives other text than rtrace resolve (%d bytes)", text.Len())
		}
	}

	perSec := func(frames int, d time.Duration) float64 { return float64(frames) / d.Seconds() }
	warm := perSec(n-len(cold), fullT-coldT)
	b.ReportMetric(perSec(n, fullT), "frames/s")
	b.ReportMetric(warm, "warm-frames/s")
	b.ReportMetric(float64(coldT.Microseconds())/1000, "cold-ms")
	b.ReportMetric(perSec(n, inprocT), "inproc-frames/s")
	b.Logf("resolve %d frames (%d distinct: %d in leaky, %d in libc; %.1f MiB of stream)\n"+
		"  rtrace resolve: %v, %.0f frames/s; %d frames once (cold): %v; warm %.0f frames/s\n"+
		"  in process:     %v, %.0f frames/s",
		n, len(addrs), inProg, len(addrs)-inProg, float64(len(fullData))/(1<<20),
		fullT.Round(time.Millisecond), perSec(n, fullT), len(cold), coldT.Round(time.Millisecond), warm,
		inprocT.Round(time.Millisecond), perSec(n, inprocT))
}

// writeResolveInput writes a raw memory trace over mods to path: a malloc
// with the next resolveDepth frames of frames (fewer for the last), then a
// free, until the frames run out.
func writeResolveInput(path string, mods []*module, frames []uint64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := wire.NewWriter(f)
	hdr := &trace.Header{Version: "3.0", Arch: "x86_64", Time: time.Date(2025, 1, 2, 10, 0, 0, 0, time.Local),
		Process: mods[0].Path, Pid: 4343, Depth: resolveDepth}
	if err := w.Write(hdr); err != nil {
		return err
	}
	if err := writeMemoryPreamble(w, mods); err != nil {
		return err
	}
	clock := 10 * time.Hour
	fs := make([]trace.Frame, resolveDepth)
	for i := 0; i < len(frames); i += resolveDepth {
		chunk := frames[i:min(i+resolveDepth, len(frames))]
		for j, a := range chunk {
			fs[j] = trace.Frame{Addr: a}
		}
		id := heapBase + uint64(i)
		clock += time.Microsecond
		malloc := trace.Call{Time: clock, Tid: 4343, Res: 1, Alloc: true, Name: "malloc", Size: 32, ID: id, Frames: fs[:len(chunk)]}
		free := trace.Call{Time: clock, Tid: 4343, Res: 1, Name: "free", ID: id}
		if err := w.Write(&malloc); err != nil {
			return err
		}
		if err := w.Write(&free); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return f.Close()
}

// runResolve runs `rtrace resolve -i in -o out` and returns its wall time.
func runResolve(b *testing.B, rtrace, in, out string) time.Duration {
	b.Helper()
	os.Remove(out)
	var stderr bytes.Buffer
	cmd := exec.Command(rtrace, "resolve", "-i", in, "-o", out)
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("rtrace resolve -i %s: %v\n%s", in, err, stderr.String())
	}
	d := time.Since(start)
	if s := stderr.String(); strings.Contains(s, "warning") {
		b.Logf("rtrace resolve -i %s: %s", in, s)
	}
	return d
}

// checkResolved fails the benchmark unless the text at path has n frame
// lines, each resolved, those in leaky.c's functions (isProg) to a source
// line. It returns the text's SHA-256.
func checkResolved(b *testing.B, path string, n int, isProg map[uint64]bool) [32]byte {
	b.Helper()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	sc := bufio.NewScanner(io.TeeReader(f, h))
	var frames, lines int
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "\t0x") {
			continue
		}
		frames++
		hex, text, _ := strings.Cut(line[3:], " ")
		addr, err := strconv.ParseUint(hex, 16, 64)
		if err != nil || text == "" || text == "in ??" {
			b.Fatalf("%s: frame %q is not resolved", path, line)
		}
		if isProg[addr] {
			if !strings.Contains(text, " at leaky.c:") {
				b.Fatalf("%s: frame %q in leaky.c has no source line", path, line)
			}
			lines++
		}
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	if frames != n || lines == 0 {
		b.Fatalf("%s: %d frames (%d at leaky.c lines), want %d", path, frames, lines, n)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}
