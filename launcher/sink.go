package launcher

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"rtrace/internal/elfx"
	"rtrace/internal/trace"
	"rtrace/internal/uftrace"
	"rtrace/resolver"
	"rtrace/tracer"
)

// newUftraceSink creates the uftrace.data directory dir (an existing one
// is moved aside to dir.old) with info and the machine's facts.
func newUftraceSink(dir string, info uftrace.Info, warn io.Writer, autoArgs bool) (*uftraceSink, error) {
	if err := moveAside(dir); err != nil {
		return nil, err
	}
	uftrace.FillSystemInfo(&info)
	w, err := uftrace.Create(dir, info)
	if err != nil {
		return nil, err
	}
	return &uftraceSink{w: w, warn: warn, modules: map[string]bool{}, autoArgs: autoArgs}, nil
}

// uftraceSink writes what the tracer sees into a uftrace.data directory,
// with the resolver's .sym and .dbg files for each executable.
type uftraceSink struct {
	w       *uftrace.Writer
	warn    io.Writer
	modules map[string]bool
	// autoArgs: write each function's DWARF argument specs into its .dbg.
	autoArgs  bool
	probes    *bufio.Writer // usdt.txt, once a probe fired
	probeFile *os.File
}

func (s *uftraceSink) Session(ss tracer.Session) error {
	if err := s.w.Session(uftrace.TaskEvent{Time: ss.Time, Pid: ss.Pid, SID: ss.SID, Exename: ss.Exe}, ss.Maps); err != nil {
		return err
	}
	return s.module(ss.Exe, ss.ELF)
}

// module writes the .sym and .dbg files of the module at path once.
func (s *uftraceSink) module(path string, f *elfx.File) error {
	if s.modules[path] {
		return nil
	}
	s.modules[path] = true
	name := s.w.SymName(path, "") // rtrace's map lines carry no build id
	syms, end := resolver.Symbols(f)
	if err := s.w.Symbols(name, path, f.BuildID, syms, end); err != nil {
		return err
	}
	dbg, err := resolver.DebugFuncs(path, f, s.autoArgs)
	if err != nil {
		fmt.Fprintf(s.warn, "rtrace: warning: no source lines for %s: %v\n", path, err)
		return nil
	}
	if len(dbg) > 0 {
		// No build id in the .dbg header: uftrace 0.13 ignores a .dbg whose
		// build id the session map does not repeat (its recorder appends
		// " build-id:" to map lines; rtrace's maps are verbatim copies).
		return s.w.Debug(name, path, "", dbg)
	}
	return nil
}

func (s *uftraceSink) Module(sid, path string, f *elfx.File) error { return s.module(path, f) }

func (s *uftraceSink) Event(id uint64, name string) error { return s.w.AddEvent(id, name) }

// Probe appends a probe hit to usdt.txt: uftrace 0.13 rejects user events
// carrying data, so the EVENT record holds only the id and the arguments
// live here, one line per hit: time, tid, provider:name, values.
func (s *uftraceSink) Probe(ts uint64, tid int, name string, args []string) error {
	if s.probes == nil {
		f, err := os.OpenFile(filepath.Join(s.w.Dir(), "usdt.txt"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return fmt.Errorf("creating usdt.txt: %w", err)
		}
		s.probes = bufio.NewWriter(f)
		s.probeFile = f
		fmt.Fprintln(s.probes, "# USDT probe hits: time tid provider:name arguments (signed in decimal, unsigned 8-byte in hex)")
	}
	fmt.Fprintf(s.probes, "%s %d %s", uftrace.FormatTime(ts), tid, name)
	for _, a := range args {
		fmt.Fprintf(s.probes, " %s", a)
	}
	_, err := fmt.Fprintln(s.probes)
	return err
}

// close flushes usdt.txt.
func (s *uftraceSink) close() error {
	if s.probes == nil {
		return nil
	}
	err := s.probes.Flush()
	if cerr := s.probeFile.Close(); err == nil {
		err = cerr
	}
	return err
}

func (s *uftraceSink) Dlopen(ts uint64, tid int, sid string, base uint64, path string) error {
	return s.w.Dlopen(ts, tid, sid, base, path)
}

func (s *uftraceSink) Maps(sid string, maps []byte) error { return s.w.UpdateMaps(sid, maps) }

func (s *uftraceSink) Task(ts uint64, tid, pid int) error { return s.w.Task(ts, tid, pid) }

func (s *uftraceSink) Fork(ts uint64, pid, ppid int) error { return s.w.Fork(ts, pid, ppid) }

func (s *uftraceSink) Records(tid int, recs []tracer.Rec) error {
	for _, r := range recs {
		if err := s.w.Append(tid, r.Record, r.Payload); err != nil {
			return err
		}
	}
	return nil
}

// Call and Toggle: resource calls go to the resource stream (resSink).
func (s *uftraceSink) Call(*trace.Call) error { return nil }
func (s *uftraceSink) Toggle(bool, int) error { return nil }
