package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"rtrace/internal/pprofout"
	"rtrace/internal/rtext"
	"rtrace/internal/trace"
	"rtrace/internal/uftrace"
	"rtrace/internal/wire"
	"rtrace/postproc"
	"rtrace/resolver"
)

// Output formats of a resource trace (-O).
const (
	formatText  = "text"
	formatWire  = "wire"
	formatPprof = "pprof"
)

var errFuncOnStream = errors.New("-F, -N, -D, -t and --tid filter function traces; they apply to a uftrace.data directory, not a resource trace")

// stageJob is what one postproc or resolve run does to each input, the
// same for one input and for a batch.
type stageJob struct {
	verb  string
	opts  postproc.Options // resource-trace filters; Resolver is made per input
	funcs postproc.FuncOptions
	// resOpts names a resource-trace option given, for the error on a
	// uftrace.data input.
	resOpts   string
	format    string
	fullPaths bool
	warn      io.Writer
	summary   io.Writer // a line per resolved uftrace.data directory (single input)
}

// newResolver makes a resolver for one input: it holds that process's
// mappings and is not safe for concurrent use.
func (j *stageJob) newResolver() *resolver.Resolver {
	return resolver.New(resolver.Options{FullPaths: j.fullPaths, Warn: j.warn})
}

// stream post-processes the resource trace rd into out in j's format.
func (j *stageJob) stream(rd trace.Reader, out io.Writer) error {
	if j.funcs.Active() {
		return errFuncOnStream
	}
	opts := j.opts
	var res *resolver.Resolver
	if opts.Resolve || j.format == formatPprof {
		res = j.newResolver()
	}
	if opts.Resolve {
		opts.Resolver = res
	}
	var w trace.Writer
	switch j.format {
	case formatWire:
		w = wire.NewWriter(out)
	case formatPprof:
		w = pprofout.NewWriter(out, res)
	default:
		w = rtext.NewWriter(out)
	}
	return postproc.Run(rd, w, opts)
}

// dir processes the uftrace.data directory in: postproc writes a filtered
// copy to out; resolve writes every module's .sym and .dbg into a copy at
// out, or into in itself when out is "".
func (j *stageJob) dir(in, out string) error {
	if j.resOpts != "" {
		return fmt.Errorf("%s filters resource traces; a uftrace.data directory takes -F, -N, -D, -t and --tid", j.resOpts)
	}
	if j.verb == "postproc" && out == "" {
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
			f = postproc.NewFuncFilter(j.funcs, r.Parent)
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
	if j.verb != "resolve" {
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
func (j *stageJob) one(c *cli.Context) error {
	inName := c.String("input")
	if inName != "" && inName != "-" {
		trace, err := traceDirInput(j.verb, inName)
		if err != nil {
			return cli.Exit(err.Error(), 1)
		}
		if trace {
			out := c.String("output")
			j.summary = c.App.ErrWriter
			if j.verb == "postproc" {
				if c.IsSet("output") {
					return cli.Exit("postproc: a uftrace.data input is written to -d OUTDIR, not -o", 2)
				}
				out = c.String("uftrace-dir")
			}
			if err := j.dir(inName, out); err != nil {
				return cli.Exit(fmt.Sprintf("%s: %s: %v", j.verb, inName, err), 1)
			}
			return nil
		}
	}
	if c.IsSet("uftrace-dir") {
		return cli.Exit(fmt.Sprintf("%s: -d writes a filtered uftrace.data directory; give one with -i DIR", j.verb), 2)
	}
	if j.funcs.Active() {
		return cli.Exit(fmt.Sprintf("%s: %s", j.verb, errFuncOnStream), 2)
	}
	if o := c.String("output"); o != "" && same(o, inName) {
		return cli.Exit(fmt.Sprintf("%s: -o %s is the input; write the output elsewhere", j.verb, o), 2)
	}
	in := io.Reader(os.Stdin)
	if inName != "" && inName != "-" {
		f, err := os.Open(inName)
		if err != nil {
			return cli.Exit(fmt.Sprintf("%s: cannot read the input: %v", j.verb, err), 1)
		}
		defer f.Close()
		in = f
	} else {
		inName = "stdin"
	}
	bad := func(err error) error {
		return cli.Exit(fmt.Sprintf("%s: %s: %v; the input should be a raw .rtrace stream, sp-rtrace text or a uftrace.data directory", j.verb, inName, err), 1)
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
	out, outName, err := openOutput(c.String("output"), pid, j.ext(), c.App.Writer)
	if err != nil {
		return cli.Exit(j.verb+": "+err.Error(), 1)
	}
	err = j.stream(&replay{first: first, rest: rd}, out)
	if f, ok := out.(*os.File); ok && f != os.Stdout {
		if cerr := f.Close(); err == nil && cerr != nil {
			return cli.Exit(fmt.Sprintf("%s: writing %s: %v", j.verb, outName, cerr), 1)
		}
		if err == nil {
			fmt.Fprintf(c.App.ErrWriter, "rtrace %s: wrote %s\n", j.verb, outName)
		}
	}
	if err != nil {
		return cli.Exit(fmt.Sprintf("%s: %s: %v", j.verb, inName, err), 1)
	}
	return nil
}

// ext is the file name extension of j's output format.
func (j *stageJob) ext() string {
	switch j.format {
	case formatWire:
		return ".rtrace"
	case formatPprof:
		return ".pb.gz"
	}
	return ".rtrace.txt"
}

// outputName is the name of input's output in a batch: the input's own
// name with the format's extension (a uftrace.data directory keeps its).
func (j *stageJob) outputName(input string, dir bool) string {
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
