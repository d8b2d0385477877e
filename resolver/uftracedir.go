package resolver

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"rtrace/internal/elfx"
	"rtrace/internal/regular"
	"rtrace/internal/uftrace"
)

// ModuleOptions configure WriteModuleFiles.
type ModuleOptions struct {
	// DebugDirs are searched for separate debug files (by build id, then
	// by .gnu_debuglink). nil means {"/usr/lib/debug"}.
	DebugDirs []string
	// Warn receives one line per module written without source lines or
	// not written at all. nil discards them.
	Warn io.Writer
}

// ModuleReport is what WriteModuleFiles did, module by module, in the
// order of the session maps.
type ModuleReport struct {
	Written []ModuleFiles
	Skipped []SkippedModule
}

// ModuleFiles describes the files written for one module.
type ModuleFiles struct {
	Path string // as the session map names it
	Name string // the files are <Name>.sym and <Name>.dbg
	// Symbols counts the .sym lines that name code (end markers left out).
	Symbols int
	// DebugFuncs counts the function blocks of the .dbg written; 0: no
	// .dbg was written.
	DebugFuncs int
	// DebugFile is the separate debug file that gave symbols or DWARF,
	// "" for none.
	DebugFile string
	// KeptDbg: an existing .dbg with argument specs was left as it was,
	// since the trace's argument records are decoded by those exact specs.
	KeptDbg bool
	// Warning is why part of the module was unusable (corrupt DWARF, an
	// unreadable debug file); it was also written to Warn.
	Warning error
}

// SkippedModule is a module that WriteModuleFiles wrote nothing for; any
// file of it already in the directory is left as it was.
type SkippedModule struct {
	Path string
	Err  error
}

// WriteModuleFiles writes <name>.sym and <name>.dbg into the uftrace.data
// directory dir for every file-backed executable module of every session
// map (sid-*.map), libraries included, and for every library of a DLOP
// line of task.txt, so that uftrace shows their function names and
// `replay --srcline` their source lines without opening the modules.
//
// Files are named as uftrace 0.13 looks them up: <basename> for one module
// of each basename, <basename>-<suffix> for the others (see nameFiles).
// Each readable module's files are rewritten, from the module and, when it
// is stripped or has no DWARF, its separate debug file found through
// DebugDirs. Modules that are gone, not ELF, corrupt, or changed since the
// recording (build id differs from the map's) are skipped with one warning
// each, and their existing files are never removed. An existing .dbg with
// argument specs (A:/R: lines) is kept, as the argument records of the
// trace are decoded by those exact specs. The .dbg files carry no build id:
// uftrace ignores a .dbg whose build id the map line does not repeat, and
// rtrace's maps carry none.
//
// The error is for a directory that cannot be read or written; problems of
// single modules are in the report.
func WriteModuleFiles(dir string, opts ModuleOptions) (ModuleReport, error) {
	if opts.DebugDirs == nil {
		opts.DebugDirs = []string{"/usr/lib/debug"}
	}
	var rep ModuleReport
	mods, err := traceModules(dir)
	if err != nil {
		return rep, err
	}
	auto := autoArgs(dir)
	for i := range mods {
		mods[i].load(opts.DebugDirs, auto)
	}
	nameFiles(dir, mods)
	for i := range mods {
		m := &mods[i]
		if m.err != nil {
			rep.Skipped = append(rep.Skipped, SkippedModule{Path: m.path, Err: m.err})
			warn(opts.Warn, m.path, m.err, "no .sym or .dbg written for it")
			continue
		}
		files, err := m.write(dir)
		if err != nil {
			return rep, err
		}
		if files.Warning != nil {
			warn(opts.Warn, m.path, files.Warning, "its files may lack symbols or source lines")
		}
		rep.Written = append(rep.Written, *files)
	}
	return rep, nil
}

// traceModule is a file-backed executable module of a trace, and what
// its files are made from.
type traceModule struct {
	path string
	// id is the build id uftrace compares the module's files with: the
	// one its map line carries (uftrace's recorder appends one, rtrace's
	// maps have none) or, for a library of a DLOP line only, the file's
	// own (uftrace reads it in session_add_dlopen).
	id     string
	dlopen bool
	// exe: the executable of a session. Stripped, with no debug file that
	// has a symbol table, its functions are the FDEs' (elfx.FrameFuncs), as
	// the tracer traced them.
	exe bool

	md       *moduleData
	dbg      []uftrace.DebugFunc
	dwarfErr error  // corrupt DWARF: no .dbg
	name     string // its files are <name>.sym and <name>.dbg
	err      error  // why no file is written for it
}

// load reads the module and its DWARF (with argument specs when auto).
func (m *traceModule) load(dirs []string, auto bool) {
	m.err = elfx.Guard(func() (err error) {
		if m.md, err = loadModule(m.path, dirs, m.exe); err != nil {
			return err
		}
		if m.md.dwarf != "" {
			m.dbg, m.dwarfErr = DebugFuncs(m.md.dwarf, m.md.file, auto)
		}
		return nil
	})
	if m.err != nil {
		return
	}
	id := m.md.file.BuildID
	if m.dlopen {
		m.id = id
	}
	if m.id != "" && id != "" && m.id != id {
		m.err = fmt.Errorf("changed since the trace was recorded: build id %s, the session map says %s", id, m.id)
	}
}

// write writes the files of the loaded module m into dir.
func (m *traceModule) write(dir string) (*ModuleFiles, error) {
	files := &ModuleFiles{Path: m.path, Name: m.name, DebugFile: m.md.debug}
	problem := errors.Join(m.md.warn, m.dwarfErr)
	dbgPath := filepath.Join(dir, m.name+".dbg")
	var dbg bytes.Buffer
	switch {
	case hasArgSpecs(dbgPath):
		files.KeptDbg = true
	case len(m.dbg) > 0:
		if err := uftrace.WriteDebug(&dbg, m.path, "", m.dbg); err != nil {
			problem = errors.Join(problem, err)
			dbg.Reset()
		} else {
			files.DebugFuncs = len(m.dbg)
		}
	}
	all, end := Symbols(m.md.file)
	syms := all[:0]
	for _, s := range all {
		if s.Name == "" || strings.ContainsAny(s.Name, " \t\n") {
			continue // a line uftrace could not split
		}
		syms = append(syms, s)
		if s.Type != '?' {
			files.Symbols++
		}
	}
	var sym bytes.Buffer
	if err := uftrace.WriteSyms(&sym, m.path, m.md.file.BuildID, syms, end); err != nil {
		return nil, fmt.Errorf("symbols of %s: %w", m.path, err)
	}
	if err := writeAtomic(filepath.Join(dir, m.name+".sym"), sym.Bytes()); err != nil {
		return nil, err
	}
	if dbg.Len() > 0 {
		if err := writeAtomic(dbgPath, dbg.Bytes()); err != nil {
			return nil, err
		}
	}
	files.Warning = problem
	return files, nil
}

// nameFiles names the files of each loaded module as uftrace 0.13 looks
// them up (load_module_symbol in utils/symbol.c; load_debug_file in
// utils/dwarf.c for .dbg): it opens <basename>.sym and, only when that
// exists and its "# path name:" (or build id) names another module,
// <basename>-<uftrace.AltSymSuffix>.sym. So the plain name goes to the module an
// existing <basename>.sym names (kept even if rtrace cannot rewrite it),
// else to the one an existing <basename>.dbg names, else to the first
// loaded module of the basename; the others take the suffix.
func nameFiles(dir string, mods []traceModule) {
	var bases []string
	groups := map[string][]*traceModule{}
	for i := range mods {
		b := filepath.Base(mods[i].path)
		if groups[b] == nil {
			bases = append(bases, b)
		}
		groups[b] = append(groups[b], &mods[i])
	}
	taken := map[string]string{}
	for _, b := range bases {
		owner := headerPath(filepath.Join(dir, b+".sym"))
		if !slices.ContainsFunc(groups[b], func(m *traceModule) bool { return m.path == owner }) {
			owner = headerPath(filepath.Join(dir, b+".dbg"))
			if !slices.ContainsFunc(groups[b], func(m *traceModule) bool { return m.path == owner && m.err == nil }) {
				owner = ""
			}
		}
		for _, m := range groups[b] {
			if m.err != nil {
				continue
			}
			if owner == "" {
				owner = m.path
			}
			name := b
			if m.path != owner {
				name = b + "-" + uftrace.AltSymSuffix(m.path, m.id)
			}
			if other, ok := taken[name]; ok {
				m.err = fmt.Errorf("its files would be named %s.sym, as those of %s (uftrace tells modules of one basename apart by build id or path)", name, other)
				continue
			}
			taken[name] = m.path
			m.name = name
		}
	}
}

// warn reports a problem with the module at path, and its effect, to w.
func warn(w io.Writer, path string, err error, effect string) {
	if w == nil {
		return
	}
	msg := strings.ReplaceAll(err.Error(), "\n", "; ")
	if !strings.Contains(msg, path) {
		msg = path + ": " + msg
	}
	fmt.Fprintf(w, "warning: resolver: %s; %s\n", msg, effect)
}

// writeAtomic replaces path with data (uftrace.WriteFileAtomic), its
// error naming path.
func writeAtomic(path string, data []byte) error {
	if err := uftrace.WriteFileAtomic(path, data); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// hasArgSpecs reports whether the .dbg file at path has A: or R: lines.
func hasArgSpecs(path string) bool {
	f, err := regular.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "A: ") || strings.HasPrefix(l, "R: ") {
			return true
		}
	}
	return false
}

// traceModules lists the modules of the sessions of dir, each path once:
// those of the sid-*.map files, in name order, then the DLOP libraries.
func traceModules(dir string) ([]traceModule, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading trace directory: %w", err)
	}
	var mods []traceModule
	seen := map[string]int{} // index in mods
	add := func(m traceModule) {
		if i, ok := seen[m.path]; ok {
			mods[i].exe = mods[i].exe || m.exe
		} else if strings.HasPrefix(m.path, "/") {
			seen[m.path] = len(mods)
			mods = append(mods, m)
		}
	}
	nmaps := 0
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, "sid-") || !strings.HasSuffix(name, ".map") {
			continue
		}
		nmaps++
		path := filepath.Join(dir, name)
		data, err := regular.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading session map: %w", err)
		}
		maps, err := uftrace.ParseMaps(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		exec := map[string]bool{}
		for _, m := range maps {
			if strings.Contains(m.Perm, "x") {
				exec[m.Path] = true
			}
		}
		ids := mapBuildIDs(data)
		first := true
		for _, m := range uftrace.Modules(maps) {
			if exec[m.Path] && strings.HasPrefix(m.Path, "/") {
				// The first file of a session's maps is its executable.
				add(traceModule{path: m.Path, id: ids[m.Path], exe: first})
				first = false
			}
		}
	}
	if nmaps == 0 {
		return nil, fmt.Errorf("%s has no sid-*.map file: not a uftrace.data directory", dir)
	}
	f, err := regular.Open(filepath.Join(dir, "task.txt"))
	if errors.Is(err, os.ErrNotExist) {
		return mods, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading task list: %w", err)
	}
	defer f.Close()
	evs, err := uftrace.ParseTaskFile(f)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", f.Name(), err)
	}
	for _, e := range evs {
		if e.Kind == uftrace.KindDlop {
			add(traceModule{path: e.Exename, dlopen: true})
		}
	}
	return mods, nil
}

// mapBuildIDs returns the build ids that uftrace's recorder appends to
// its map lines (" build-id:<hex>"), by module path.
func mapBuildIDs(data []byte) map[string]string {
	ids := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		_, id, ok := strings.Cut(line, " build-id:")
		if !ok {
			continue
		}
		maps, err := uftrace.ParseMaps(strings.NewReader(line))
		if err != nil || len(maps) != 1 || maps[0].Path == "" {
			continue
		}
		if id = strings.TrimSpace(id); id != "" && !strings.ContainsAny(id, " \t") {
			ids[maps[0].Path] = id
		}
	}
	return ids
}

// headerPath returns the "# path name:" of the .sym or .dbg file at path,
// "" for none.
func headerPath(path string) string {
	f, err := regular.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, "#") {
			break
		}
		if p, ok := strings.CutPrefix(l, "# path name: "); ok {
			return p
		}
	}
	return ""
}

// autoArgs reports whether the trace in dir takes argument specs from
// the .dbg files (info argspec "auto-args:1", set by record -a).
func autoArgs(dir string) bool {
	data, err := regular.ReadFile(filepath.Join(dir, "info"))
	if err != nil {
		return false
	}
	info, err := uftrace.ParseInfo(data)
	return err == nil && uftrace.DbgSpecs(info.ArgSpecs)
}

// moduleData is what the files of one module are made from.
type moduleData struct {
	// file is the module, with its debug file's symbols when it has
	// only dynamic ones.
	file  *elfx.File
	dwarf string // the file whose DWARF gives the .dbg, "" for none
	debug string // the separate debug file used, "" for none
	warn  error  // an unusable debug file
}

// loadModule reads the module at path and, when it lacks a symbol table
// or DWARF, its separate debug file. A debug file shares the module's
// link-time addresses, so its symbols and DWARF stand for the module's.
// A stripped executable (exe) with no such symbols gets the functions
// its FDEs bound, named as the tracer named them (elfx.FrameFuncs).
func loadModule(path string, dirs []string, exe bool) (*moduleData, error) {
	m, err := openModule(path, dirs)
	if err != nil {
		return nil, err
	}
	defer m.close()
	xf := *m.main.File
	md := &moduleData{file: &xf, warn: m.warn}
	if m.main.hasDWARF {
		md.dwarf = path
	}
	if d := m.debug; d != nil {
		if !m.main.hasSymtab && d.hasSymtab {
			xf.Funcs = d.Funcs
			md.debug = d.fh.Name()
		}
		if !m.main.hasDWARF && d.hasDWARF {
			md.dwarf = d.fh.Name()
			md.debug = d.fh.Name()
		}
	}
	if exe && xf.Stripped && (m.debug == nil || !m.debug.hasSymtab) {
		xf.Path = path
		funcs, err := elfx.FrameFuncs(&xf)
		if err != nil {
			md.warn = errors.Join(md.warn, err)
		} else {
			xf.Funcs = funcs
		}
	}
	return md, nil
}
