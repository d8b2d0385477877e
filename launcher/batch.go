package launcher

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"rtrace/internal/tty"
	"rtrace/postproc"
)

// batchInput is one input of a batch and where its output goes.
type batchInput struct {
	path, out string
	dir       bool // a uftrace.data directory
}

// batch runs the job on every input, jobs at a time, each into outDir under
// the input's name. A failing input is reported with its name and reason
// and does not stop the others; its output is not left behind (each is
// written under a temporary name and renamed when complete). The exit
// status is 1 when any input failed.
func (j *Stage) batch(inputs []string, outDir string, jobs int) error {
	var list []batchInput
	seen := map[string]string{}
	for _, p := range inputs {
		if strings.HasPrefix(p, "-") {
			return &UsageError{fmt.Sprintf("%s: %q after the inputs: options go before the first input", j.Verb, p)}
		}
		dir, err := traceDirInput(j.Verb, p)
		if err != nil {
			return &UsageError{err.Error()}
		}
		in := batchInput{path: p, dir: dir}
		in.out = filepath.Join(outDir, j.outputName(p, dir))
		if other, ok := seen[in.out]; ok {
			return &UsageError{fmt.Sprintf("%s: %s and %s would both be written to %s; rename one", j.Verb, other, p, in.out)}
		}
		if same(in.out, p) {
			return &UsageError{fmt.Sprintf("%s: the output for %s would overwrite it; choose another -o directory", j.Verb, p)}
		}
		seen[in.out] = p
		list = append(list, in)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return exit1(fmt.Sprintf("%s: output directory: %v", j.Verb, err))
	}
	prog := newProgress(j.Stderr, j.Verb, len(list))
	j.warn = prog
	work := make(chan batchInput)
	var wg sync.WaitGroup
	for range max(1, min(jobs, len(list))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for in := range work {
				prog.done(in.path, j.batchOne(in))
			}
		}()
	}
	for _, in := range list {
		work <- in
	}
	close(work)
	wg.Wait()
	if failed := prog.finish(); failed > 0 {
		return exit1("") // the summary line said it
	}
	return nil
}

// same says whether two paths name one file.
func same(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// batchOne processes one input of a batch into a temporary name beside its
// output, then renames it into place.
func (j *Stage) batchOne(in batchInput) error {
	tmp := filepath.Join(filepath.Dir(in.out), fmt.Sprintf(".%s.tmp%d", filepath.Base(in.out), os.Getpid()))
	os.RemoveAll(tmp)
	err := j.batchWrite(in, tmp)
	if err == nil && in.dir {
		// A uftrace.data directory from an earlier run is replaced.
		if trace, _ := isTraceDir(in.out); trace {
			err = os.RemoveAll(in.out)
		}
	}
	if err == nil {
		err = os.Rename(tmp, in.out)
	}
	if err != nil {
		os.RemoveAll(tmp)
	}
	return err
}

func (j *Stage) batchWrite(in batchInput, tmp string) error {
	if in.dir {
		return j.dir(in.path, tmp)
	}
	f, err := os.Open(in.path)
	if err != nil {
		return err
	}
	defer f.Close()
	rd, err := postproc.NewReader(f)
	if err != nil {
		return err
	}
	out, err := os.Create(tmp)
	if err != nil {
		return err
	}
	err = j.stream(rebaseFiles(rd, in.path, filepath.Dir(tmp)), out)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// progress reports a batch: each failure as it happens and, on a terminal,
// a bar redrawn in place below them.
type progress struct {
	mu        sync.Mutex
	line      *tty.Line
	verb      string
	total, n  int
	failed    int
	start     time.Time
	lastDrawn time.Time
}

func newProgress(w io.Writer, verb string, total int) *progress {
	p := &progress{line: tty.NewLine(w), verb: verb, total: total, start: time.Now()}
	p.draw(true)
	return p
}

// done counts one input; err is its failure.
func (p *progress) done(input string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	if err != nil {
		p.failed++
		fmt.Fprintf(p.line, "rtrace %s: %s: %v\n", p.verb, input, err)
	}
	p.draw(err != nil || p.n == p.total)
}

// draw redraws the bar, at most ten times a second unless forced.
func (p *progress) draw(force bool) {
	if !p.line.Terminal() || !force && time.Since(p.lastDrawn) < 100*time.Millisecond {
		return
	}
	p.lastDrawn = time.Now()
	const width = 30
	fill := width * p.n / max(p.total, 1)
	bar := fmt.Sprintf("%s [%s%s] %d/%d", p.verb, strings.Repeat("#", fill), strings.Repeat(".", width-fill), p.n, p.total)
	if p.failed > 0 {
		bar += fmt.Sprintf(", %d failed", p.failed)
	}
	p.line.Show(bar + fmt.Sprintf(" %.1fs", time.Since(p.start).Seconds()))
}

// Write prints a warning of one input above the bar.
func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n, err := p.line.Write(b)
	p.draw(true)
	return n, err
}

// finish ends the bar with a summary line and returns the failures.
func (p *progress) finish() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.line, "rtrace %s: %d of %d inputs done, %d failed, in %.1fs\n", p.verb, p.n-p.failed, p.total, p.failed, time.Since(p.start).Seconds())
	return p.failed
}
