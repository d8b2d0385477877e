package suite

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"rtrace/bench"
	"rtrace/internal/trace"
	"rtrace/internal/uftrace"
	"rtrace/postproc"
	"rtrace/resolver"
)

// Row is what one tool cost on one workload.
type Row struct {
	Tool string
	Stats
	// Main is how long main() lasted in the tool's trace: beside the
	// untraced run's wall time, how far its durations are from the truth.
	Main time.Duration
	// PerEvent is the nanoseconds per event above the untraced run, the
	// tool's start-up included; counted is the events it divides by.
	PerEvent float64
	counted  int64
	// HotAvg is the average time of a call of the workload's Hot function
	// in the tool's trace.
	HotAvg time.Duration

	// Walks is how many backtraces rtrace's resource tracing took, and
	// WalkStops how many of them needed a stop of the program (its -v
	// line); Walks is 0 when not known.
	Walks, WalkStops int64
	// EveryStop: rtrace recorded every resource call at a stop (no
	// function on the fast path: rtrace remote).
	EveryStop bool

	unreleased int       // rtrace: the allocations never freed
	ownLeaks   int       // rtrace: those the workload's LeakFrom made
	memcheck   *Memcheck // memcheck: its heap summary
	stderr     string    // the last run's error output
}

// Report is one workload's table.
type Report struct {
	W    *Workload
	Rows []Row
	// Floor is the bare ptrace stop (int3 → wait4 → PTRACE_CONT), in ns:
	// the int3 engine's lower bound per event.
	Floor float64
	Notes []string // lines under the table
}

// Runner runs the workloads.
type Runner struct {
	Tools    []Tool
	Runs     int
	Scratch  string    // where traces go; emptied between runs
	Log      io.Writer // progress
	FloorBin string    // testdata/int3loop.c built, "" for no floor row
	// Budget bounds a tool's runs on one workload: once a run took longer,
	// the median is of the runs so far and the row says so.
	Budget time.Duration
	// Timeout stops a run that takes longer (a peer that would take an
	// hour on a workload): its row is skipped with the reason.
	Timeout time.Duration
}

// Run measures w under every tool of its kind.
func (r *Runner) Run(w *Workload) *Report {
	rep := &Report{W: w, Notes: slices.Clone(w.Notes)}
	base := r.measure(w, untraced, "")
	rep.Rows = append(rep.Rows, base)
	rtIdx := -1
	pgTrees, uftracePath := []string(nil), ""
	refErr := errors.New("uftrace -pg did not run")
	var own func(string) bool
	if w.Kind == Functions {
		var err error
		if own, err = OwnFuncs(w.Prog.Plain); err != nil {
			fmt.Fprintf(r.Log, "bench: %s: %v; comparing whole trees\n", w.Name, err)
		}
	}
	for _, t := range r.Tools {
		if t.Kind != w.Kind || len(w.Tools) > 0 && !slices.Contains(w.Tools, t.Name) {
			continue
		}
		bin := t.Bin
		if t.Pkg != "" {
			p, err := Need(t.Bin, t.Pkg, r.Log)
			if err != nil {
				rep.Rows = append(rep.Rows, Row{Tool: t.Name, Stats: Stats{Skipped: err.Error()}})
				continue
			}
			bin = p
		}
		if t.Skip != nil {
			if why := t.Skip(w.Prog.Plain); why != "" {
				rep.Rows = append(rep.Rows, Row{Tool: t.Name, Stats: Stats{Skipped: why}})
				continue
			}
		}
		row := r.measure(w, t, bin)
		out := r.out(t)
		if row.Err == nil && row.Skipped == "" {
			r.facts(w, t, out, &row)
			if t.Name == "uftrace -pg" {
				uftracePath = bin
				txt, err := Replay(bin, filepath.Join(out, "data"))
				if err != nil {
					refErr = err
				} else {
					pgTrees = uftrace.WithoutPgStartup(uftrace.ReplayTrees(txt, own))
				}
			}
		}
		rep.Rows = append(rep.Rows, row)
		if t.Name == "rtrace" {
			rtIdx = len(rep.Rows) - 1
		}
		if t.Name == "rtrace" && w.Kind == Functions && row.Err == nil && row.Skipped == "" {
			if note := r.fastFraction(w, t, bin); note != "" {
				rep.Notes = append(rep.Notes, note)
			}
		}
	}
	var rt *Row
	if rtIdx >= 0 {
		rt = &rep.Rows[rtIdx]
	}
	// The call trees of the function tracers against uftrace -pg's, from
	// each one's last run (kept in the scratch directory).
	if w.Kind == Functions {
		for i := range rep.Rows {
			row := &rep.Rows[i]
			t, ok := toolNamed(r.Tools, row.Tool, w.Kind)
			if !ok || !t.Dir || row.Tool == "uftrace -pg" || row.Err != nil || row.Skipped != "" || row.Check == "error" {
				continue
			}
			if pgTrees == nil {
				row.Check, row.Detail = "unchecked", "no reference tree: "+refErr.Error()
				continue
			}
			txt, err := Replay(uftracePath, filepath.Join(r.out(t), "data"))
			if err != nil {
				row.Check, row.Detail = "error", err.Error()
				continue
			}
			if d := CompareTrees(uftrace.ReplayTrees(txt, own), pgTrees); d != "" {
				row.Check, row.Detail = "differs", "the program's call tree vs uftrace -pg's: "+d
			} else {
				row.Check = "tree = uftrace -pg"
			}
		}
	}
	// rtrace's leak filter keeps every allocation never freed, stdio's
	// buffers too (memcheck's valgrind frees them at exit with
	// __libc_freeres); those the program's own allocator made are its
	// leaks, memcheck's definitely and indirectly lost blocks.
	if w.Kind == Memory && rt != nil && rt.Check == "" {
		rt.Check, rt.Detail = leakCheck(rt.ownLeaks, w.Leaks, nil)
		for _, row := range rep.Rows {
			if m := row.memcheck; m != nil {
				if rt.ownLeaks == m.Lost && rt.ownLeaks == w.Leaks {
					rt.Check = fmt.Sprintf("%d leaks = memcheck's lost", rt.ownLeaks)
				} else {
					rt.Check = "differs"
				}
				rt.Detail = fmt.Sprintf("%d allocations never freed, %d of them from %s; memcheck: %d lost; the program leaks %d",
					rt.unreleased, rt.ownLeaks, funcList(w.LeakFrom), m.Lost, w.Leaks)
			}
		}
	}
	// The backtraces rtrace found in the process against those its remote
	// unwinder took at a stop, in the same layout: equal, call for call.
	if rm := rowNamed(rep, "rtrace remote"); w.Kind == Memory && rt != nil && rt.Runs > 0 && rt.Err == nil && rm != nil {
		tr, _ := toolNamed(r.Tools, "rtrace", Memory)
		tm, _ := toolNamed(r.Tools, "rtrace remote", Memory)
		check, note := remoteCheck(r.out(tr), r.out(tm))
		if rt.Check != "" {
			check = rt.Check + "; " + check
		}
		rt.Check = check
		if note != "" {
			rep.Notes = append(rep.Notes, "rtrace: backtraces against rtrace remote's: "+note)
		}
	}
	// Timing fidelity of one function: its average call in rtrace's trace
	// against uftrace -pg's, the closest to the truth a trace gives.
	pg := rowNamed(rep, "uftrace -pg")
	if w.Hot != "" && pg != nil && pg.HotAvg > 0 {
		for _, name := range []string{"rtrace", "rtrace int3"} {
			if row := rowNamed(rep, name); row != nil && row.HotAvg > 0 {
				rep.Notes = append(rep.Notes, fmt.Sprintf("an average %s() call lasts %s in %s's trace, %s in uftrace -pg's (%s)",
					w.Hot, row.HotAvg, name, pg.HotAvg, ratio(float64(row.HotAvg)/float64(pg.HotAvg))))
			}
		}
	}
	events := int64(0)
	if rt != nil {
		events = rt.Events
	}
	if events == 0 {
		events = w.Calls
	}
	for i := range rep.Rows {
		row := &rep.Rows[i]
		n := row.Events
		if n == 0 {
			n = events
		}
		if n > 0 && row.Tool != "untraced" && row.Runs > 0 && base.Runs > 0 {
			row.PerEvent, row.counted = float64(row.Wall-base.Wall)/float64(n), n
		}
	}
	// The fast engine's goal: at most half of uftrace -pg's cost per event.
	if fr := rowNamed(rep, "rtrace"); fr != nil && pg != nil && fr.PerEvent > 0 && pg.PerEvent > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("rtrace costs %.0f ns per event, uftrace -pg %.0f, start-up included: %s of uftrace -pg's cost",
			fr.PerEvent, pg.PerEvent, ratio(fr.PerEvent/pg.PerEvent)))
	}
	if r.FloorBin != "" && w.Kind == Functions && events > 0 {
		if d, err := bench.Floor(r.FloorBin, int(min(events, 200000)), true); err == nil {
			rep.Floor = float64(d)
		}
	}
	return rep
}

// rowNamed finds the row of a tool that ran.
func rowNamed(rep *Report, name string) *Row {
	for i := range rep.Rows {
		if r := &rep.Rows[i]; r.Tool == name && r.Runs > 0 && r.Err == nil && r.Skipped == "" {
			return r
		}
	}
	return nil
}

// toolNamed finds the tool of a row.
func toolNamed(tools []Tool, name string, k Kind) (Tool, bool) {
	for _, t := range tools {
		if t.Name == name && t.Kind == k {
			return t, true
		}
	}
	return Tool{}, false
}

// slug names a tool's scratch directory.
func slug(name string) string {
	return strings.NewReplacer(" ", "_", "/", "_", ".", "dot").Replace(name)
}

func (r *Runner) out(t Tool) string { return filepath.Join(r.Scratch, slug(t.Name)) }

// fastFraction runs w once more under the fast engine with -v, for the
// share of the instrumented functions it records without a stop.
func (r *Runner) fastFraction(w *Workload, t Tool, bin string) string {
	dir, err := os.MkdirTemp(r.Scratch, "fraction-")
	if err != nil {
		return ""
	}
	defer os.RemoveAll(dir)
	argv := slices.Clone(t.Argv(bin, w.Prog.Plain, w.Args, dir))
	if i := slices.Index(argv, "-q"); i >= 0 {
		argv[i] = "-v"
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if cmd.Run() != nil {
		return ""
	}
	m := regexp.MustCompile(`fast engine: (\d+) of (\d+) instrumented functions`).FindStringSubmatch(stderr.String())
	if m == nil {
		return ""
	}
	n, _ := strconv.Atoi(m[1])
	of, _ := strconv.Atoi(m[2])
	if of == 0 {
		return ""
	}
	return fmt.Sprintf("rtrace: %d of %d instrumented functions (%.1f%%) are recorded without a stop; the others keep an int3 entry (rtrace record -v lists them with the reason)", n, of, 100*float64(n)/float64(of))
}

// measure runs w under t Runs times; the last run's trace stays.
func (r *Runner) measure(w *Workload, t Tool, bin string) Row {
	row := Row{Tool: t.Name}
	prog := w.Prog.Plain
	if t.PG {
		prog = w.Prog.PG
	}
	out := r.out(t)
	var samples []Sample
	fmt.Fprintf(r.Log, "bench: %s under %s: ", w.Name, t.Name)
	var stderr bytes.Buffer
	for i := 0; i < r.Runs; i++ {
		stderr.Reset()
		os.RemoveAll(out)
		if err := os.MkdirAll(out, 0o755); err != nil {
			row.Err = err
			break
		}
		s, err := Run(Cmd{Argv: t.Argv(bin, prog, w.Args, out), Dir: out, Env: t.Env, Prog: prog, Children: w.Children,
			Stderr: &stderr, Timeout: r.Timeout})
		if errors.Is(err, ErrTimeout) {
			row.Skipped = fmt.Sprintf("a run took over %s (the per-run limit); not measured", secs(r.Timeout))
			break
		}
		if err != nil {
			row.Err = err
			break
		}
		fmt.Fprintf(r.Log, "%.3fs ", s.Wall.Seconds())
		samples = append(samples, s)
		if r.Budget > 0 && s.Wall > r.Budget && i+1 < r.Runs {
			row.Detail = fmt.Sprintf("%d of %d runs: a run took %s, over the %s budget", i+1, r.Runs, secs(s.Wall), secs(r.Budget))
			break
		}
	}
	fmt.Fprintln(r.Log)
	if row.Err != nil || row.Skipped != "" {
		return row
	}
	detail := row.Detail
	row.Stats = Summarise(samples)
	row.Detail = detail
	row.stderr = stderr.String()
	if t.Name != "untraced" {
		row.Bytes = duBytes(out)
	}
	return row
}

// facts reads what the last run's trace says: its events, main's duration
// (function traces) and the leaks (memory traces); and, from rtrace's
// -v line, the backtraces that needed a stop.
func (r *Runner) facts(w *Workload, t Tool, out string, row *Row) {
	if found, all, ok := walkLine(row.stderr); ok {
		row.Walks, row.WalkStops = all, all-min(found, all)
	} else {
		row.EveryStop = noFastFunc.MatchString(row.stderr)
	}
	switch {
	case t.Dir:
		f, err := traceFacts(filepath.Join(out, "data"), w.Hot)
		if err != nil {
			row.Check, row.Detail = "error", err.Error()
			return
		}
		row.Events, row.Main, row.HotAvg = f.events, f.main, f.hotAvg
	case w.Kind == Memory && t.Name == "rtrace":
		leaks, own, calls, err := rtraceLeaks(rawTrace(out), w.LeakFrom)
		row.Events, row.unreleased, row.ownLeaks = calls, leaks, own
		if err != nil {
			row.Check, row.Detail = "error", err.Error()
		}
	case strings.HasPrefix(t.Name, "rtrace") && !t.Dir:
		// rtrace remote, and the start-up's raw traces: one per process
		// and exec.
		_, calls, err := callSet(out, false)
		row.Events = calls
		if err != nil {
			row.Check, row.Detail = "error", err.Error()
		} else if w.Kind == Startup {
			row.Detail = fmt.Sprintf("%d calls of the allocator in %d processes", calls, processes(rawTraces(out)))
		}
	case w.Kind == Memory && t.Name == "bpftrace":
		b, err := os.ReadFile(filepath.Join(out, "bpftrace.txt"))
		if err != nil {
			row.Check, row.Detail = "error", err.Error()
			return
		}
		mallocs, frees, ok := bpftraceCounts(bytes.NewReader(b))
		if !ok {
			row.Check, row.Detail = "error", "no counts in bpftrace's output"
			return
		}
		row.Events = mallocs + frees
		row.Detail = fmt.Sprintf("its probes counted %d mallocs and %d frees (realloc and calloc, unless they call malloc, are not probed)", mallocs, frees)
	case w.Kind == Memory && t.Name == "memcheck":
		b, err := os.ReadFile(filepath.Join(out, "memcheck.txt"))
		if err != nil {
			row.Check, row.Detail = "error", err.Error()
			return
		}
		m, ok := MemcheckLeaks(strings.NewReader(string(b)))
		if !ok {
			row.Check, row.Detail = "error", "no heap summary in memcheck's log"
			return
		}
		row.memcheck = &m
		row.Check, row.Detail = leakCheck(m.Lost, w.Leaks, nil)
	}
}

func leakCheck(got, want int, err error) (string, string) {
	switch {
	case err != nil:
		return "error", err.Error()
	case got != want:
		return "differs", fmt.Sprintf("%d leaks, the program leaks %d", got, want)
	}
	return fmt.Sprintf("%d leaks (all)", got), ""
}

// facts are what a function trace says of the run.
type facts struct {
	events   int64         // ENTRY and EXIT records
	main     time.Duration // the first main()
	hotCalls int64         // calls of the hot function, and their average
	hotAvg   time.Duration
}

// traceFacts counts a uftrace.data directory's records, finds how long
// the first main() lasted and, when hot is not "", the average time of a
// call of hot (from its entry to its exit, what it calls included).
func traceFacts(dir, hot string) (f facts, err error) {
	rd, err := uftrace.Open(dir)
	if err != nil {
		return f, err
	}
	defer rd.Close()
	var start uint64
	depth, tid := -1, 0
	open := map[int][]uint64{} // per thread, the entry times of the hot calls in progress
	var hotTotal uint64
	for {
		it, err := rd.Next()
		if err == io.EOF {
			if f.hotCalls > 0 {
				f.hotAvg = time.Duration(hotTotal / uint64(f.hotCalls))
			}
			return f, nil
		}
		if err != nil {
			return f, err
		}
		switch it.Type {
		case uftrace.Entry:
			f.events++
			if depth < 0 && it.Func == "main" {
				start, depth, tid = it.Time, it.Depth, it.Tid
			}
			if hot != "" && it.Func == hot {
				open[it.Tid] = append(open[it.Tid], it.Time)
			}
		case uftrace.Exit:
			f.events++
			if f.main == 0 && depth >= 0 && it.Tid == tid && it.Depth == depth && it.Func == "main" {
				f.main = time.Duration(it.Time - start)
			}
			if st := open[it.Tid]; hot != "" && it.Func == hot && len(st) > 0 {
				if t := st[len(st)-1]; it.Time >= t {
					hotTotal += it.Time - t
					f.hotCalls++
				}
				open[it.Tid] = st[:len(st)-1]
			}
		}
	}
}

// rtraceLeaks counts the calls of a raw memory trace, the allocations
// its leak filter keeps, and of those the ones whose backtrace passes
// through one of the functions from (the program's own leaks, not the
// buffers libc keeps to the end).
func rtraceLeaks(path string, from []string) (leaks, own int, calls int64, err error) {
	if path == "" {
		return 0, 0, 0, errors.New("rtrace wrote no raw trace")
	}
	for _, leaksOnly := range []bool{false, true} {
		f, err := os.Open(path)
		if err != nil {
			return 0, 0, 0, err
		}
		rd, err := postproc.NewReader(f)
		if err != nil {
			f.Close()
			return 0, 0, 0, err
		}
		c := &callCounter{from: from}
		opts := postproc.Options{Leaks: leaksOnly}
		if len(from) > 0 {
			opts.Resolve, opts.Resolver = true, resolver.New(resolver.Options{})
		}
		err = postproc.Run(rd, c, opts)
		f.Close()
		if err != nil {
			return 0, 0, 0, err
		}
		if leaksOnly {
			leaks, own = int(c.n), c.hits
		} else {
			calls = c.n
			// A leak check by a function never seen checks nothing.
			if len(from) > 0 && c.hits == 0 {
				return 0, 0, calls, fmt.Errorf("no allocation's backtrace passes through %s: the leak check cannot tell the program's leaks", funcList(from))
			}
		}
	}
	return leaks, own, calls, nil
}

// callCounter is a trace.Writer that counts calls, and those with a
// frame in one of the functions from.
type callCounter struct {
	n    int64
	from []string
	hits int
}

func (c *callCounter) Write(it trace.Item) error {
	call, ok := it.(*trace.Call)
	if !ok {
		return nil
	}
	c.n++
	for _, f := range call.Frames {
		if slices.ContainsFunc(c.from, func(fn string) bool { return strings.HasPrefix(f.Text, fn+"(") }) {
			c.hits++
			break
		}
	}
	return nil
}

// funcList names functions for a sentence: "f()", "f() or g()".
func funcList(fns []string) string {
	var named []string
	for _, f := range fns {
		named = append(named, f+"()")
	}
	if len(named) < 2 {
		return strings.Join(named, "")
	}
	return strings.Join(named[:len(named)-1], ", ") + " or " + named[len(named)-1]
}

func (c *callCounter) Close() error { return nil }
