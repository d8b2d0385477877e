package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"rtrace/internal/testutil"
)

// postprocRun is one `rtrace postproc -l -c` run over a generated stream.
type postprocRun struct {
	mb         int // asked for, in MiB
	stream     leakStreamRun
	wall       time.Duration // from start to exit, the stream fed meanwhile
	user, sys  time.Duration // the child's CPU time
	maxRSS     int64         // the child's peak resident set, in KiB
	leaks      int           // leaked blocks the report shows
	leakedSize uint64
}

func (r postprocRun) mbps() float64 { return float64(r.stream.bytes) / (1 << 20) / r.wall.Seconds() }

// BenchmarkPostprocLeaks feeds `rtrace postproc -l -c` a generated raw
// memory trace (see leakStream: a window of 1000 live blocks, 200 distinct
// 10-frame stacks over the rtrace binary and libc, 50 leaks) through a
// pipe, once per size of RTRACE_BENCH_POSTPROC_MB (MiB, comma-separated;
// default 64,1024), and reports per size
//   - MB/s@<size>MB: MiB of stream per second of the run's wall time;
//   - peakRSS-MiB@<size>MB: the post-processor's peak resident set (its
//     rusage ru_maxrss);
//
// and, given two sizes or more, rss-growth, the peak RSS of the largest size
// over the smallest's: the state -l keeps is bounded, so ~1.0 is flat. The stream is built once in
// memory and replayed, so feeding costs the post-processor little of the 2
// CPUs: pipe-MB/s is that replay through a pipe into a reader that
// discards, the most the feeding could deliver. The report must
// list exactly the leaks written, in count, size and address, or the
// benchmark fails.
func BenchmarkPostprocLeaks(b *testing.B) {
	sizes := []int{64, 1024}
	if s := os.Getenv("RTRACE_BENCH_POSTPROC_MB"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || n > 1<<20 {
				b.Fatalf("RTRACE_BENCH_POSTPROC_MB=%q: want sizes in MiB from 1 to 1048576, comma-separated", s)
			}
			sizes = append(sizes, n)
		}
		sort.Ints(sizes)
	}
	tmp := b.TempDir()
	rtrace, err := testutil.BuildRtrace(tmp)
	if err != nil {
		b.Fatal(err)
	}
	prog, err := loadModule(rtrace, 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	libc, err := loadModule(findLibc(b), libcBase, nil)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	stream, err := newLeakStream(defaultLeakStream, []*module{prog, libc})
	if err != nil {
		b.Fatal(err)
	}
	gen := time.Since(start)

	runs := make([]postprocRun, len(sizes))
	for i := 0; i < b.N; i++ {
		for j, mb := range sizes {
			runs[j] = runPostprocLeaks(b, rtrace, stream, mb)
		}
	}
	pipe, err := pipeRate(stream, int64(sizes[len(sizes)-1])<<20)
	if err != nil {
		b.Fatal(err)
	}

	var sb strings.Builder
	fmt.Fprintf(&sb, "postproc -l -c over a generated stream (%d live blocks, %d stacks, %d leaks; %.1f MiB body encoded in %v, replayed)\n",
		defaultLeakStream.window, defaultLeakStream.stacks, defaultLeakStream.leaks, float64(len(stream.body))/(1<<20), gen.Round(time.Millisecond))
	fmt.Fprintf(&sb, "  the replay through a pipe to a reader that discards: %.0f MB/s\n", pipe)
	fmt.Fprintf(&sb, "  %8s %11s %8s %8s %8s %8s %10s %9s\n", "MiB", "calls", "wall s", "user s", "sys s", "MB/s", "cpu MB/s", "peak MiB")
	for _, r := range runs {
		at := fmt.Sprintf("@%dMB", r.mb)
		b.ReportMetric(r.mbps(), "MB/s"+at)
		b.ReportMetric(float64(r.maxRSS)/1024, "peakRSS-MiB"+at)
		mib := float64(r.stream.bytes) / (1 << 20)
		fmt.Fprintf(&sb, "  %8.0f %11d %8.2f %8.2f %8.2f %8.1f %10.1f %9.1f\n", mib, r.stream.calls, r.wall.Seconds(),
			r.user.Seconds(), r.sys.Seconds(), r.mbps(), mib/(r.user+r.sys).Seconds(), float64(r.maxRSS)/1024)
	}
	if len(runs) > 1 {
		b.ReportMetric(float64(runs[len(runs)-1].maxRSS)/float64(runs[0].maxRSS), "rss-growth")
	}
	b.ReportMetric(pipe, "pipe-MB/s")
	b.Log(sb.String())
}

// runPostprocLeaks runs `rtrace postproc -l -c` on mb MiB of stream fed
// through a pipe and checks its leak report.
func runPostprocLeaks(b *testing.B, rtrace string, s *leakStream, mb int) postprocRun {
	b.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(rtrace, "postproc", "-l", "-c")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pr, &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	pr.Close()
	type fed struct {
		run leakStreamRun
		err error
	}
	done := make(chan fed, 1)
	go func() {
		run, err := s.write(pw, int64(mb)<<20)
		if cerr := pw.Close(); err == nil {
			err = cerr
		}
		done <- fed{run, err}
	}()
	werr := cmd.Wait()
	wall := time.Since(start)
	f := <-done
	if werr != nil || f.err != nil {
		b.Fatalf("rtrace postproc -l -c on %d MiB: %v (feeding: %v)\nstderr:\n%s", mb, werr, f.err, stderr.String())
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	r := postprocRun{mb: mb, stream: f.run, wall: wall, maxRSS: ru.Maxrss,
		user: time.Duration(ru.Utime.Nano()), sys: time.Duration(ru.Stime.Nano())}
	checkLeakReport(b, stdout.Bytes(), s)
	return r
}

// pipeRate returns how many MiB/s of s go through a pipe into a reader
// that discards them, in reads of postproc's buffer size.
func pipeRate(s *leakStream, size int64) (float64, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer pr.Close()
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := s.write(pw, size)
		pw.Close()
		done <- err
	}()
	buf := make([]byte, 64<<10)
	var n int64
	for {
		k, err := pr.Read(buf)
		n += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	if err := <-done; err != nil {
		return 0, err
	}
	return float64(n) / (1 << 20) / time.Since(start).Seconds(), nil
}

var (
	leakCallLine = regexp.MustCompile(`^\d+\. \[[^]]*\] malloc\((\d+)\) = 0x([0-9a-f]+)$`)
	groupLine    = regexp.MustCompile(`^# allocation summary: (\d+) block\(s\) with total size (\d+)$`)
	totalLine    = regexp.MustCompile(`^# (\d+) block\(s\) leaked with total size of (\d+) bytes$`)
)

// checkLeakReport fails the benchmark unless the text report lists every
// leak of s and nothing else: its calls (size and address), the group
// summaries, and the memory type's final summary all agree with s.
func checkLeakReport(b *testing.B, out []byte, s *leakStream) {
	b.Helper()
	want := map[uint64]uint64{} // address → size
	var wantSize uint64
	for _, c := range s.leakCalls {
		want[c.ID] = c.Size
		wantSize += c.Size
	}
	var groups, groupSize, totals, total, totalSize uint64
	seen := map[uint64]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if m := leakCallLine.FindStringSubmatch(line); m != nil {
			size, _ := strconv.ParseUint(m[1], 10, 64)
			id, _ := strconv.ParseUint(m[2], 16, 64)
			if ws, ok := want[id]; !ok || ws != size || seen[id] {
				b.Fatalf("leak report lists %q: not a leak written, or twice", line)
			}
			seen[id] = true
		} else if m := groupLine.FindStringSubmatch(line); m != nil {
			n, _ := strconv.ParseUint(m[1], 10, 64)
			sz, _ := strconv.ParseUint(m[2], 10, 64)
			groups, groupSize = groups+n, groupSize+sz
		} else if m := totalLine.FindStringSubmatch(line); m != nil {
			total, _ = strconv.ParseUint(m[1], 10, 64)
			totalSize, _ = strconv.ParseUint(m[2], 10, 64)
			totals++
		}
	}
	n := uint64(len(want))
	if len(seen) != len(want) || groups != n || groupSize != wantSize || totals != 1 || total != n || totalSize != wantSize {
		b.Fatalf("leak report: %d leak calls, groups of %d blocks / %d bytes, %d summaries of %d blocks / %d bytes; want %d leaks of %d bytes\n%s",
			len(seen), groups, groupSize, totals, total, totalSize, n, wantSize, clipText(out))
	}
}

// clipText is the start and end of a long output, for a failure message.
func clipText(b []byte) string {
	if len(b) > 4000 {
		return string(b[:2000]) + "\n...\n" + string(b[len(b)-2000:])
	}
	return string(b)
}
