package launcher

import (
	"fmt"
	"io"

	"rtrace/internal/elfx"
	"rtrace/internal/uftrace"
	"rtrace/resolver"
	"rtrace/tracer"
)

// uftraceSink writes what the tracer sees into a uftrace.data directory,
// with the resolver's .sym and .dbg files for each executable.
type uftraceSink struct {
	w       *uftrace.Writer
	warn    io.Writer
	modules map[string]bool
	// autoArgs: write each function's DWARF argument specs into its .dbg.
	autoArgs bool
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
	name := s.w.SymName(path, f.BuildID)
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
