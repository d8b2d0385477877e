package launcher

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"golang.org/x/sys/unix"

	"rtrace/internal/uftrace"
	"rtrace/tracer"
)

// AttachOptions are the options of `rtrace attach`.
type AttachOptions struct {
	Pid       int
	Modules   []string      // -e
	OutDir    string        // -o: raw resource traces
	PostOpts  string        // -P
	Backtrace int           // -b
	Dir       string        // -d: a uftrace.data directory of the function calls ("" with -e: none)
	Filter    []string      // -F
	NoTrace   []string      // -N
	Duration  time.Duration // detach after this long (0: at Ctrl-C or when the process ends)
	Stderr    io.Writer
	Version   string
	Cmdline   string
}

// Attach traces a running process until Ctrl-C, the duration or its end,
// then detaches and leaves it running as it was.
func Attach(o AttachOptions) error {
	mods, err := tracer.ResolveModules(o.Modules)
	if err != nil {
		return &UsageError{"-e: " + err.Error()}
	}
	filter, err := compile("-F", o.Filter)
	if err != nil {
		return err
	}
	notrace, err := compile("-N", o.NoTrace)
	if err != nil {
		return err
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", o.Pid)); err != nil {
		return fmt.Errorf("pid %d: no such process", o.Pid)
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", o.Pid))
	if err != nil {
		return fmt.Errorf("pid %d: cannot read its executable (a kernel thread, or not yours): %w", o.Pid, err)
	}
	resOnly := len(mods) > 0 && o.Dir == ""
	if o.Dir == "" {
		o.Dir = "uftrace.data"
	}
	con := &console{w: o.Stderr}
	var sink tracer.Sink = nopSink{}
	var us *uftraceSink
	if !resOnly {
		info := uftrace.Info{ExeName: exe, Cmdline: o.Cmdline, Version: "rtrace " + o.Version}
		if us, err = newUftraceSink(o.Dir, info, con, false); err != nil {
			return err
		}
		sink = us
	}
	var rs *resStream
	if len(mods) > 0 {
		rs = &resStream{mods: mods, depth: o.Backtrace, outDir: o.OutDir, postOpts: o.PostOpts, manage: true, start: true}
		if o.PostOpts != "" {
			if rs.post, err = postFunc(o.PostOpts); err != nil {
				return &UsageError{fmt.Sprintf("-P %q: %v", o.PostOpts, err)}
			}
		}
		sink = resSink{sink, rs}
	}
	tr := tracer.New(tracer.Config{Filter: filter, NoTrace: notrace, Libcalls: true, Warn: con,
		NoFuncs: resOnly, Modules: mods, Start: true, Backtrace: o.Backtrace}, sink)

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, unix.SIGINT, unix.SIGTERM, unix.SIGHUP)
	defer signal.Stop(sigs)
	done := make(chan struct{})
	go func() {
		var timer <-chan time.Time
		if o.Duration > 0 {
			timer = time.After(o.Duration)
		}
		asked := false
		for {
			select {
			case s := <-sigs:
				if asked && s == unix.SIGINT {
					fmt.Fprintln(o.Stderr, "rtrace: interrupted twice, aborting (the process may be left stopped)")
					os.Exit(128 + int(unix.SIGINT))
				}
				asked = true
				tr.Detach()
			case <-timer:
				tr.Detach()
			case <-done:
				return
			}
		}
	}()
	start := time.Now()
	res, runErr := tr.Attach(o.Pid)
	close(done)
	var errs []error
	if runErr != nil {
		errs = append(errs, runErr)
	}
	if us != nil {
		errs = append(errs, us.close(), finish(us.w, res, start))
		fmt.Fprintf(o.Stderr, "rtrace: detached from pid %d, function trace saved in %s\n", o.Pid, o.Dir)
	}
	if rs != nil {
		files, err := rs.close()
		errs = append(errs, err)
		for _, f := range files {
			fmt.Fprintf(o.Stderr, "rtrace: detached from pid %d, resource trace written to %s\n", o.Pid, f)
		}
	}
	return errors.Join(errs...)
}
