package launcher

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"rtrace/internal/pprofout"
	"rtrace/internal/rtext"
	"rtrace/internal/trace"
	"rtrace/internal/uftrace"
	"rtrace/internal/wire"
	"rtrace/postproc"
	"rtrace/preproc"
	"rtrace/resolver"
)

// Output formats of a resource trace (-O).
const (
	FormatText  = "text"
	FormatWire  = "wire"
	FormatPprof = "pprof"
	// FormatWire20 is sp-rtrace's own binary stream (protocol 2.0), which
	// sp-rtrace-postproc reads (wire.NewWriter20).
	FormatWire20 = "wire-2.0"
)

var errFuncOnStream = errors.New("-F, -N, -D, -t, --max-stack and --tid filter function traces; they apply to a uftrace.data directory, not a resource trace")

// Stage is one run of the postproc or resolve verb: what it reads, what
// it writes, and what it does to each input, the same for one input and
// for a batch.
type Stage struct {
	Verb   string // "postproc" or "resolve"
	Input  string // -i: a file or a uftrace.data directory; "" or "-": Stdin
	Output string // -o: a file, a directory or "-"; a batch's output directory
	Data   string // postproc -d: the filtered uftrace.data directory to write
	Inputs []string
	Jobs   int    // inputs of a batch processed at a time
	Format string // -O: FormatText, FormatWire or FormatPprof; "": text
	Pprof  string // postproc --pprof FILE

	// Opts are the filters; Opts.Resolver is made per input. ResFlag
	// names the first resource-trace option given ("--compress"), for
	// the error on a uftrace.data input.
	Opts      postproc.Options
	ResFlag   string
	FullPaths bool // resolve -p

	Stdin          io.Reader
	Stdout, Stderr io.Writer

	funcs   postproc.FuncOptions
	warn    io.Writer
	summary io.Writer // a line per resolved uftrace.data directory (single input)
}

// newResolver makes a resolver for one input: it holds that process's
// mappings and is not safe for concurrent use.
func (j *Stage) newResolver() *resolver.Resolver {
	return resolver.New(resolver.Options{FullPaths: j.FullPaths, Warn: j.warn})
}

// stream post-processes the resource trace rd into out in j's format.
func (j *Stage) stream(rd trace.Reader, out io.Writer) error {
	if j.funcs.Active() {
		return errFuncOnStream
	}
	opts := j.Opts
	// open64 called, open64 shown: the same resolver names the frames.
	callees := j.newResolver()
	opts.Callees = callees
	if opts.Flame != "" { // checkFormat refused another format
		opts.Resolver = callees // names the frames
		return postproc.FlameGraph(rd, out, opts, opts.Flame)
	}
	if opts.Summary && opts.Diff != "" {
		f, err := os.Open(opts.Diff) // named by the user: a pipe too
		if err != nil {
			return fmt.Errorf("--diff: %w", err)
		}
		defer f.Close()
		base, err := postproc.NewReader(f)
		if err != nil {
			return fmt.Errorf("--diff %s: %w", opts.Diff, err)
		}
		return postproc.DiffSummary(base, rd, out, opts, func() postproc.Resolver { return j.newResolver() })
	}
	if opts.Summary {
		opts.Resolver = j.newResolver() // names the frames (-r) and locates them for the suppressions
		return postproc.Summarize(rd, out, opts)
	}
	if opts.HTML {
		return postproc.HTMLPage(rd, out, opts, func() postproc.Resolver { return j.newResolver() })
	}
	var res *resolver.Resolver
	if opts.Resolve || j.Format == FormatPprof || opts.Leaks {
		res = callees // one resolver reads each module once
	}
	if opts.Resolve || opts.Leaks {
		opts.Resolver = res // -l: locates the frames its suppressions match
	}
	var w trace.Writer
	switch j.Format {
	case FormatWire:
		w = wire.NewWriter(out)
	case FormatWire20:
		w = wire.NewWriter20(out)
	case FormatPprof:
		w = pprofout.NewWriter(out, res)
	default:
		w = rtext.NewWriter(out)
	}
	return postproc.Run(rd, w, opts)
}

// dir processes the uftrace.data directory in: postproc writes a filtered
// copy to out; resolve writes every module's .sym and .dbg into a copy at
// out, or into in itself when out is "".
func (j *Stage) dir(in, out string) error {
	if j.ResFlag != "" {
		return fmt.Errorf("%s filters resource traces; a uftrace.data directory takes -F, -N, -D, -t, --max-stack and --tid", j.ResFlag)
	}
	if j.Verb == "postproc" && out == "" {
		return errors.New("a uftrace.data input needs -d OUTDIR, the directory to write the filtered trace into")
	}
	if out != "" {
		if err := checkNewDir(out); err != nil {
			return err
		}
		r, err := uftrace.Open(in)
		if err != nil {
			return err
		}
		var f uftrace.Filter
		if j.funcs.Active() {
			f = postproc.NewFuncFilter(j.funcs, r.Parent, postproc.Matched(r), postproc.Sizes(r))
		}
		n, err := uftrace.Copy(r, out, f)
		r.Close()
		if err != nil {
			return err
		}
		if f != nil && n == 0 {
			os.RemoveAll(out)
			return errors.New("no record passed the filters, and uftrace cannot read a trace without any; nothing written")
		}
	}
	if j.Verb != "resolve" {
		return nil
	}
	target := out
	if target == "" {
		target = in
	}
	rep, err := resolver.WriteModuleFiles(target, resolver.ModuleOptions{Warn: j.warn})
	if err != nil {
		return err
	}
	if j.summary != nil {
		lines := 0
		for _, m := range rep.Written {
			if m.DebugFuncs > 0 {
				lines++
			}
		}
		fmt.Fprintf(j.summary, "rtrace resolve: %s: symbols of %d modules, source lines of %d, %d skipped\n",
			target, len(rep.Written), lines, len(rep.Skipped))
	}
	return nil
}

// checkNewDir refuses an output directory that exists with something in it.
func checkNewDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err == nil && len(ents) > 0 {
		return fmt.Errorf("output directory %s exists and is not empty; remove it or name another", dir)
	}
	return nil
}

// isTraceDir says whether path is a uftrace.data directory, and whether it
// is a directory at all.
func isTraceDir(path string) (trace, dir bool) {
	st, err := os.Stat(path)
	if err != nil || !st.IsDir() {
		return false, false
	}
	_, err = os.Stat(filepath.Join(path, "info"))
	return err == nil, true
}

// traceDirInput says whether the input path is a uftrace.data directory;
// any other directory is an error.
func traceDirInput(verb, path string) (bool, error) {
	trace, dir := isTraceDir(path)
	if dir && !trace {
		return false, fmt.Errorf("%s: %s is a directory but not a uftrace.data directory (no info file)", verb, path)
	}
	return trace, nil
}

// one runs the job on the single input of -i (or stdin), writing to -o
// (a file, a directory, stdout), --pprof or -d.
func (j *Stage) one() error {
	inName := j.Input
	if inName != "" && inName != "-" {
		trace, err := traceDirInput(j.Verb, inName)
		if err != nil {
			return exit1(err.Error())
		}
		if trace {
			out := j.Output
			j.summary = j.Stderr
			if j.Verb == "postproc" {
				if j.Output != "" {
					return &UsageError{"postproc: a uftrace.data input is written to -d OUTDIR, not -o"}
				}
				out = j.Data
			}
			if err := j.dir(inName, out); err != nil {
				return exit1(fmt.Sprintf("%s: %s: %v", j.Verb, inName, err))
			}
			return nil
		}
	}
	if j.Data != "" {
		return &UsageError{fmt.Sprintf("%s: -d writes a filtered uftrace.data directory; give one with -i DIR", j.Verb)}
	}
	if j.funcs.Active() {
		return &UsageError{fmt.Sprintf("%s: %s", j.Verb, errFuncOnStream)}
	}
	if o := j.Output; o != "" && same(o, inName) {
		return &UsageError{fmt.Sprintf("%s: -o %s is the input; write the output elsewhere", j.Verb, o)}
	}
	in := j.Stdin
	if inName != "" && inName != "-" {
		f, err := os.Open(inName)
		if err != nil {
			return exit1(fmt.Sprintf("%s: cannot read the input: %v", j.Verb, err))
		}
		defer f.Close()
		in = f
	} else {
		inName = "stdin"
	}
	bad := func(err error) error {
		return exit1(fmt.Sprintf("%s: %s: %v; the input should be a raw .rtrace stream, sp-rtrace text or a uftrace.data directory", j.Verb, inName, err))
	}
	rd, err := postproc.NewReader(in)
	if err != nil {
		return bad(err)
	}
	// The header comes first: its pid names the file written into -o DIR.
	first, err := rd.Next()
	if err == io.EOF {
		err = postproc.ErrEmpty
	}
	if err != nil {
		return bad(err)
	}
	pid := 0
	if h, ok := first.(*trace.Header); ok {
		pid = h.Pid
	}
	out, outName, err := openOutput(j.Output, pid, j.ext(), j.Stdout)
	if err != nil {
		return exit1(j.Verb + ": " + err.Error())
	}
	var whole trace.Reader = &replay{first: first, rest: rd}
	if inName != "stdin" {
		outDir := ""
		if out != j.Stdout {
			outDir = filepath.Dir(outName)
		}
		whole = rebaseFiles(whole, inName, outDir)
	}
	err = j.stream(whole, out)
	if f, ok := out.(*os.File); ok && out != j.Stdout {
		if cerr := f.Close(); err == nil && cerr != nil {
			return exit1(fmt.Sprintf("%s: writing %s: %v", j.Verb, outName, cerr))
		}
		if err == nil {
			fmt.Fprintf(j.Stderr, "rtrace %s: wrote %s\n", j.Verb, outName)
		}
	}
	if err != nil {
		return exit1(fmt.Sprintf("%s: %s: %v", j.Verb, inName, err))
	}
	return nil
}

// ext is the file name extension of j's output format.
func (j *Stage) ext() string {
	switch {
	case j.Opts.Flame != "":
		return "." + j.Opts.Flame + ".svg"
	case j.Opts.HTML:
		return ".html"
	case j.Opts.Summary:
		return ".summary.txt"
	}
	switch j.Format {
	case FormatWire, FormatWire20:
		return ".rtrace"
	case FormatPprof:
		return ".pb.gz"
	}
	return ".rtrace.txt"
}

// outputName is the name of input's output in a batch: the input's own
// name with the format's extension (a uftrace.data directory keeps its).
func (j *Stage) outputName(input string, dir bool) string {
	base := filepath.Base(filepath.Clean(input))
	if dir {
		return base
	}
	ext := strings.TrimPrefix(j.ext(), ".rtrace")
	if ext == "" {
		ext = ".rtrace"
	}
	if strings.HasSuffix(base, ext) {
		return base
	}
	return base + ext
}

// exit1 is the error of a verb that failed on its input: exit status 1.
func exit1(msg string) error { return &ExitError{Code: 1, Err: errors.New(msg)} }

// openOutput opens where the output goes: stdout, a file, or a new
// <pid>-<n><ext> in a directory (n counted up from 0 until the name
// is free, as sp-rtrace names its logs: nothing is overwritten).
func openOutput(path string, pid int, ext string, stdout io.Writer) (io.Writer, string, error) {
	if path == "" || path == "-" || path == "stdout" {
		return stdout, "stdout", nil
	}
	st, err := os.Stat(path)
	if err != nil || !st.IsDir() {
		if strings.HasSuffix(path, "/") {
			return nil, "", fmt.Errorf("output directory %s: %w", path, fs.ErrNotExist)
		}
		f, err := os.Create(path)
		if err != nil {
			return nil, "", fmt.Errorf("cannot create the output: %w", err)
		}
		return f, path, nil
	}
	f, name, err := preproc.Create(path, pid, ext)
	if err != nil {
		return nil, "", fmt.Errorf("cannot create the output: %w", err)
	}
	return f, name, nil
}

// replay is a trace.Reader that returns first, then what rest returns.
type replay struct {
	first trace.Item
	rest  trace.Reader
}

func (r *replay) Next() (trace.Item, error) {
	if it := r.first; it != nil {
		r.first = nil
		return it, nil
	}
	return r.rest.Next()
}

// RunStage runs the postproc or resolve verb j: on -i (or stdin), or,
// with Inputs, on each of them into -o OUTDIR. A bad combination of
// options is a *UsageError, a failed input an *ExitError.
func RunStage(j *Stage) error {
	if j.Stdin == nil {
		j.Stdin = os.Stdin
	}
	j.funcs = j.Opts.Funcs
	j.warn = j.Stderr
	if err := j.checkFormat(); err != nil {
		return err
	}
	if len(j.Inputs) == 0 {
		return j.one()
	}
	if j.Input != "" {
		return &UsageError{fmt.Sprintf("%s: an input with -i and inputs after the options (%s); use one or the other", j.Verb, j.Inputs[0])}
	}
	if j.Output == "" || j.Data != "" {
		return &UsageError{fmt.Sprintf("%s: several inputs need -o OUTDIR, the directory for their outputs", j.Verb)}
	}
	if j.Jobs < 1 {
		return &UsageError{fmt.Sprintf("%s: -j %d: want 1 or more", j.Verb, j.Jobs)}
	}
	return j.batch(j.Inputs, j.Output, j.Jobs)
}

// checkFormat refuses an output format rtrace does not write, and the
// options that format cannot carry (refused, not silently dropped).
func (j *Stage) checkFormat() error {
	if j.Pprof != "" {
		if len(j.Inputs) > 0 {
			return &UsageError{j.Verb + ": --pprof names one output file; for a batch, use -O pprof -o OUTDIR"}
		}
		if j.Output != "" || j.Format != "" {
			return &UsageError{j.Verb + ": --pprof FILE names the output; it goes without -o and -O"}
		}
		j.Format, j.Output = FormatPprof, j.Pprof
	}
	switch j.Format {
	case "":
		j.Format = FormatText
	case FormatText, FormatWire, FormatWire20, FormatPprof:
	default:
		return &UsageError{fmt.Sprintf("%s: -O %q: the formats are text, wire, wire-2.0 and pprof", j.Verb, j.Format)}
	}
	o := j.Opts
	if (o.Flame != "" || o.Summary || o.HTML) && j.Format != FormatText {
		what := "--summary writes text"
		if o.Flame != "" {
			what = "--flamegraph writes SVG"
		}
		if o.HTML {
			what = "--html writes a page"
		}
		return &UsageError{fmt.Sprintf("%s: %s, not %s: drop -O/--pprof", j.Verb, what, j.Format)}
	}
	kind := j.Format
	if kind == FormatWire20 {
		kind = FormatWire // a binary stream too: what it cannot carry is the same
	}
	for _, f := range []struct {
		format, flag string
		set          bool
		why          string
	}{
		{FormatWire, "compress", o.Compress, "the binary stream has no groups"},
		{FormatWire, "resolve", o.Resolve, "the binary stream carries addresses only; resolve its text"},
		{FormatWire, "sort", o.Sort != "", "the binary stream has no groups"},
		{FormatPprof, "compress", o.Compress, "a profile sums calls by backtrace already"},
		{FormatPprof, "sort", o.Sort != "", "a profile has no groups"},
		{FormatPprof, "remove-args", o.RemoveArgs, "a profile has no arguments"},
	} {
		if kind == f.format && f.set {
			return &UsageError{fmt.Sprintf("%s: --%s with %s output: %s", j.Verb, f.flag, j.Format, f.why)}
		}
	}
	return nil
}
