package resolver

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"

	"rtrace/internal/elfx"
	"rtrace/internal/trace"
	"rtrace/internal/uftrace"
	"rtrace/internal/withsyms"
)

// ModuleStage is the resolver's stage of a function trace: as sessions
// and maps pass, it writes the .sym and .dbg file of each module (the
// executable of every session, the ELF libraries of its maps) into the
// uftrace.data directory being written, once per path, then passes every
// item on to the next stage. Files are named as uftrace.Writer.SymName
// names them: a module's basename, and for a second module of the same
// basename <basename>-<uftrace.AltSymSuffix>. Lines come from the module's
// own DWARF only: `rtrace resolve -i DIR` adds separate debug files later.
//
// A module's files are written in the background: reading its symbols and
// DWARF takes milliseconds to tens of milliseconds, and the tracer hands a
// session on while the program waits to start. Close waits for them.
type ModuleStage struct {
	// WithSyms: a module's .sym is made from the one this directory holds
	// for it, when it does (uftrace's --with-syms; withsyms.Apply).
	WithSyms string
	dir      string
	next     trace.Writer
	warn     io.Writer
	autoArgs bool              // the trace records every function's arguments (-a)
	lines    bool              // write .dbg files (-a needs them too)
	owners   map[string]string // file name -> the module path owning it
	done     map[string]bool   // module paths handled
	writing  sync.WaitGroup    // the modules' files being written
	mu       sync.Mutex
	filesErr error    // the first error writing a module's files
	warnings []string // from the .dbg writers, printed at Close
}

// NewModuleStage returns the stage writing into dir, passing items on to
// next. lines: write each module's .dbg (source lines), as uftrace record
// --srcline does; a trace with -a gets them anyway (its specs are there).
// Warnings (a module without usable DWARF) go to warn (nil: none).
func NewModuleStage(dir string, lines bool, warn io.Writer, next trace.Writer) *ModuleStage {
	return &ModuleStage{dir: dir, lines: lines, next: next, warn: warn, owners: map[string]string{}, done: map[string]bool{}}
}

// Write handles one item and passes it on.
func (s *ModuleStage) Write(it trace.Item) error {
	switch v := it.(type) {
	case *trace.Info:
		s.autoArgs = s.autoArgs || uftrace.DbgSpecs(v.ArgSpecs)
	case *trace.Session:
		if err := s.module(v.Exe, true); err != nil {
			return err
		}
		if err := s.maps(v.SID, v.Maps); err != nil {
			return err
		}
	case *trace.Maps:
		if err := s.maps(v.SID, v.Maps); err != nil {
			return err
		}
	}
	return s.next.Write(it)
}

// maps writes the files of the modules of a session's maps not done yet.
func (s *ModuleStage) maps(sid string, maps []byte) error {
	mm, err := uftrace.ParseMaps(bytes.NewReader(maps))
	if err != nil {
		return fmt.Errorf("maps of session %s: %w", sid, err)
	}
	for _, m := range uftrace.Modules(mm) {
		if err := s.module(m.Path, false); err != nil {
			return err
		}
	}
	return nil
}

// Close waits for the .dbg files and closes the next stage.
func (s *ModuleStage) Close() error {
	s.writing.Wait()
	if s.warn != nil {
		for _, w := range s.warnings {
			fmt.Fprint(s.warn, w)
		}
	}
	err := s.next.Close()
	if s.filesErr != nil {
		return s.filesErr
	}
	return err
}

// module writes the files of the module at path once, in the background
// (Close waits): parsing libc's symbols takes milliseconds, and the tracer
// hands maps on while the program waits. A library that is not an ELF
// object (a data file mapped executable) is left out; the executable must
// be readable.
func (s *ModuleStage) module(path string, exe bool) error {
	if s.done[path] || !filepath.IsAbs(path) {
		return nil
	}
	s.done[path] = true
	name := filepath.Base(path)
	if owner, ok := s.owners[name]; ok && owner != path {
		name += "-" + uftrace.AltSymSuffix(path, "") // rtrace's map lines carry no build id
	}
	s.owners[name] = path
	s.writing.Add(1)
	go func(auto bool) {
		defer s.writing.Done()
		err := s.files(path, name, exe, auto)
		s.mu.Lock()
		defer s.mu.Unlock()
		var w *warning
		switch {
		case errors.As(err, &w):
			s.warnings = append(s.warnings, w.msg)
		case err != nil && s.filesErr == nil:
			s.filesErr = err
		}
	}(s.autoArgs)
	return nil
}

// files writes the .sym and the .dbg file of the module at path, named
// name.
func (s *ModuleStage) files(path, name string, exe, auto bool) error {
	f, err := elfx.Open(path)
	if err != nil {
		if exe {
			return fmt.Errorf("symbols of %s: %w", path, err)
		}
		return nil
	}
	if wf, err := withsyms.Apply(s.WithSyms, f); err == nil {
		f = wf // the tracer warned of an error
	}
	if exe && f.Stripped {
		// The functions the tracer traced: its FDEs', named func_<address>.
		// `rtrace resolve -i` names them from a debug file later. With
		// unreadable FDEs the tracer kept .dynsym's, and so does the .sym.
		if funcs, err := elfx.FrameFuncs(f); err == nil {
			xf := *f // f is elfx.Open's, shared
			xf.Funcs = funcs
			f = &xf
		}
	}
	syms, end := Symbols(f)
	var sym bytes.Buffer
	if err := uftrace.WriteSyms(&sym, path, f.BuildID, syms, end); err != nil {
		return fmt.Errorf("symbols of %s: %w", path, err)
	}
	if err := writeAtomic(filepath.Join(s.dir, name+".sym"), sym.Bytes()); err != nil {
		return err
	}
	if !s.lines && !auto {
		return nil // reading the DWARF was most of a large module's cost
	}
	return s.debugFile(path, name, f, auto)
}

// warning is what debugFile has to say that is not an error.
type warning struct{ msg string }

func (w *warning) Error() string { return w.msg }

// debugFile writes the .dbg file of the module f at path, named name.
func (s *ModuleStage) debugFile(path, name string, f *elfx.File, auto bool) error {
	dbg, err := DebugFuncs(path, f, auto)
	if err != nil {
		return &warning{fmt.Sprintf("rtrace: warning: no source lines for %s: %v\n", path, err)}
	}
	if len(dbg) == 0 {
		return nil
	}
	// No build id in the .dbg header: uftrace 0.13 ignores a .dbg whose
	// build id the session map does not repeat (its recorder appends
	// " build-id:" to map lines; rtrace's maps are verbatim copies).
	var b bytes.Buffer
	if err := uftrace.WriteDebug(&b, path, "", dbg); err != nil {
		return fmt.Errorf("debug info of %s: %w", path, err)
	}
	return writeAtomic(filepath.Join(s.dir, name+".dbg"), b.Bytes())
}
