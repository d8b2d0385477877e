package tracer

import (
	"path/filepath"
	"regexp"
	"strings"

	"rtrace/internal/elfx"
	"rtrace/internal/uftrace"
)

// Candidate selection: which code of a module gets instrumented. These
// functions only look at the parsed ELF file and the options; planting
// (plant.go) acts on what they return.

// crtFuncs are functions the C runtime adds to every executable (crt1.o,
// crti.o, crtbegin.o, crtend.o); uftrace's -pg recordings never show them.
var crtFuncs = map[string]bool{
	"_start": true, "_init": true, "_fini": true, "deregister_tm_clones": true,
	"register_tm_clones": true, "__do_global_dtors_aux": true, "frame_dummy": true,
	"__libc_csu_init": true, "__libc_csu_fini": true, "_dl_relocate_static_pie": true,
	"__stack_chk_fail_local": true, "atexit": true, "__libc_start_main": true,
}

// traceable reports whether fn of f may be traced: not C runtime code,
// not a part split off a function, and not a hooked runtime function (a
// hijacked return address in setjmp or the unwinder breaks what they do).
func traceable(f *elfx.File, fn elfx.Func) bool { return untraceable(f, fn) == "" }

// untraceable says why fn of f is not traced ("" when it may be).
func untraceable(f *elfx.File, fn elfx.Func) string {
	switch {
	case crtFuncs[fn.Name]:
		return "C runtime code"
	case hookNames[fn.Name] != 0:
		return "hooked runtime function"
	case strings.HasPrefix(fn.Name, "__x86.get_pc_thunk"):
		return "PC thunk"
	case isFragment(fn.Name):
		return "part split off a function"
	case !f.InExec(fn.Value):
		return "not in an executable segment"
	}
	return ""
}

// fragment matches the parts gcc splits off a function (foo.cold,
// foo.cold.3): reached by a jump from foo, never called, so their (%rsp)
// is not a return address.
var fragment = regexp.MustCompile(`\.cold(\.\d+)?$`)

func isFragment(name string) bool {
	return strings.Contains(name, ".cold") && fragment.MatchString(name)
}

// exeCands returns the code of executable f that is instrumented, in
// planting order: its traceable functions (only those at an address of own
// when own is non-nil: the DWARF subprograms of a static executable), then,
// with libcalls, its PLT stubs, except those of functions a resource module
// of mods reports (recorded inside their library, once); sel's -P, -U, -Z
// and -L rules (files: the source file of each function, by address, for
// -L) choose among them. Nothing when no function trace is recorded
// (funcs false). nfuncs counts the functions, stubs left out.
func exeCands(f *elfx.File, own map[uint64]bool, funcs, libcalls bool, mods []*ResModule, sel *Selection, files map[uint64]string) (cands []cand, nfuncs int) {
	if !funcs {
		return nil, 0
	}
	loc, locStubs := sel.locFilter(files)
	for _, fn := range f.Funcs {
		if !traceable(f, fn) || own != nil && !own[fn.Value] || !sel.keepExe(fn) || loc != nil && !loc(fn) {
			continue
		}
		cands = append(cands, cand{name: fn.Name, value: fn.Value, size: fn.Size})
	}
	nfuncs = len(cands)
	if libcalls && locStubs {
		for _, c := range stubs(f) {
			if !resName(mods, c.name) && sel.keepStub(c) {
				cands = append(cands, c)
			}
		}
	}
	return cands, nfuncs
}

// libCands returns the code of library f that is instrumented, in planting
// order: the traceable functions a -P FUNC@LIB rule of sel names (and
// sel keeps) or, for a library the program loaded with dlopen (dlopened),
// those the executable's rules keep; with nest (--nest-libcall) its PLT
// stubs unless it is a C runtime library; then the functions the resource
// modules mods report (ids numbers their resource types).
func libCands(f *elfx.File, sel *Selection, dlopened, nest bool, mods []*ResModule, ids map[*ResType]int) []cand {
	var cands []cand
	picked := map[uint64]bool{}
	var rules []Rule
	if sel != nil {
		rules = sel.Rules
	}
	if dlopened && !systemDir(f.Path) {
		for _, fn := range f.Funcs {
			if traceable(f, fn) && sel.keepDlopened(f.Path, fn) {
				picked[fn.Value] = true
				cands = append(cands, cand{name: fn.Name, value: fn.Value, size: fn.Size})
			}
		}
	}
	for _, r := range rules {
		if r.Out || r.Lib == "" || !uftrace.MatchLibName(f.Path, r.Lib) {
			continue
		}
		for _, fn := range f.Funcs {
			if picked[fn.Value] || !traceable(f, fn) || !sel.keepLib(f.Path, fn) {
				continue
			}
			if r.Func.MatchSymbol(fn.Name) {
				picked[fn.Value] = true
				cands = append(cands, cand{name: fn.Name, value: fn.Value, size: fn.Size})
			}
		}
	}
	if nest && !systemLib(filepath.Base(f.Path)) {
		for _, c := range stubs(f) {
			if !resName(mods, c.name) && sel.keepStub(c) { // a resource module's caller stub below
				cands = append(cands, c)
			}
		}
	}
	cands = append(cands, resCands(f, mods, ids, picked)...)
	return append(cands, callerCands(f, mods, ids, picked)...)
}

// Selection narrows the functions traced, as uftrace's -P, -U and -Z
// narrow what it patches. The zero Selection keeps every function.
type Selection struct {
	// Rules are the -P (in) and -U (out) patterns in command-line order:
	// the last rule matching a function decides, as in uftrace. Without
	// any in rule, all of the executable's functions are in (as -P .),
	// with one, only those a rule puts in (-P naming only libraries
	// leaves the executable out, as uftrace on a plain build); a
	// library's only when an in rule names the library (FUNC@LIB).
	Rules []Rule
	// MinSize: functions of fewer bytes are not traced (-Z).
	MinSize uint64
	// Locs (-L) select the executable's functions by the source file DWARF
	// declares them in, in command-line order (the last rule matching a
	// file decides).
	Locs []LocRule
}

// LocRule is one -L pattern: the functions declared in a file it matches
// are traced, and those only (PATTERN@hide: are not).
type LocRule struct {
	File uftrace.Pattern
	Hide bool
}

// locFilter returns what the -L rules keep of the functions whose source
// files files gives (by address), as uftrace record -L does: with a rule
// that matches a file of them, only the functions it names (and no library
// call: stubs false); with none, every function but those a @hide rule
// names. nil: no -L rule.
func (s *Selection) locFilter(files map[uint64]string) (keep func(elfx.Func) bool, stubs bool) {
	if s == nil || len(s.Locs) == 0 {
		return nil, true
	}
	in := false
	for _, r := range s.Locs {
		for _, file := range files {
			in = in || !r.Hide && r.File.Match(file)
		}
	}
	return func(fn elfx.Func) bool {
		file, ok := files[fn.Value]
		keep := !in
		for _, r := range s.Locs {
			if ok && r.File.Match(file) {
				keep = !r.Hide
			}
		}
		return keep
	}, !in
}

// Rule is one -P or -U pattern.
type Rule struct {
	Func uftrace.Pattern
	Lib  string // "": the executable; else a library (uftrace.MatchLibName)
	Out  bool   // -U
}

// keepExe says whether the executable's function fn stays traced.
func (s *Selection) keepExe(fn elfx.Func) bool {
	if s == nil {
		return true
	}
	return s.decide("", fn, s.allIn())
}

// allIn says whether a function no rule names is traced: unless an in
// rule (-P) is given, which traces only what it names.
func (s *Selection) allIn() bool {
	for _, r := range s.Rules {
		if !r.Out {
			return false
		}
	}
	return true
}

// keepDlopened says whether fn of the library at path, a plugin the
// program loaded with dlopen (systemDir), is traced: the executable's
// rules apply to it as to the executable's own functions (without -P, all
// are; -P . picks them), as uftrace traces the functions of every module
// built for it, a plugin's too, and so do the library's own FUNC@LIB
// rules. -L leaves plugins to FUNC@LIB rules.
func (s *Selection) keepDlopened(path string, fn elfx.Func) bool {
	if s == nil {
		return true
	}
	if fn.Size < s.MinSize || len(s.Locs) > 0 {
		return false
	}
	in := s.allIn()
	for _, r := range s.Rules {
		if (r.Lib == "" || uftrace.MatchLibName(path, r.Lib)) && r.Func.MatchSymbol(fn.Name) {
			in = !r.Out
		}
	}
	return in
}

// keepStub says whether the library calls of PLT stub c are recorded: -Z
// takes a stub's size as its function's, as uftrace's PLT symbols have
// their entry's (16 bytes: -Z 17 and up leave library calls out).
func (s *Selection) keepStub(c cand) bool { return s == nil || c.size >= s.MinSize }

// keepLib says whether fn of the library at path, picked by an in rule,
// stays traced.
func (s *Selection) keepLib(path string, fn elfx.Func) bool {
	return s == nil || s.decide(path, fn, true)
}

// decide applies the rules of the module at path ("": the executable)
// and -Z to fn, in for none matching.
func (s *Selection) decide(path string, fn elfx.Func, in bool) bool {
	if fn.Size < s.MinSize {
		return false
	}
	for _, r := range s.Rules {
		if (r.Lib == "") == (path == "") && (path == "" || uftrace.MatchLibName(path, r.Lib)) && r.Func.MatchSymbol(fn.Name) {
			in = !r.Out
		}
	}
	return in
}

// systemDirs hold the libraries the system installs: one the program loads
// with dlopen from there (libm, a Python extension module) is not a plugin
// of its own, and is traced only as -P FUNC@LIB asks.
var systemDirs = []string{"/lib/", "/lib32/", "/lib64/", "/usr/lib/", "/usr/lib32/", "/usr/lib64/"}

// systemDir says whether the library at path is installed by the system.
func systemDir(path string) bool {
	for _, d := range systemDirs {
		if strings.HasPrefix(path, d) {
			return true
		}
	}
	return false
}

// stubs returns the PLT stubs of f whose calls are recorded as library calls.
func stubs(f *elfx.File) []cand {
	var out []cand
	for _, imp := range f.Imports {
		if imp.Stub != 0 && !libcallSkip[imp.Name] {
			out = append(out, cand{name: imp.Name, value: imp.Stub, size: imp.StubSize, libcall: true})
		}
	}
	return out
}

// gotCalls returns the imports of f (scanned into cm) that its code calls
// through their GOT slot (-fno-plt): no PLT stub, a slot an indirect call
// or jump reads. A slot also read as data holds an address the program
// compares or passes on: it stays the library's. setjmp is recorded at
// the call, not through its slot.
func gotCalls(f *elfx.File, cm *codeMap) []elfx.Import {
	var out []elfx.Import
	for _, imp := range f.Imports {
		slot := imp.GOT + cm.bias
		if imp.Stub == 0 && cm.slots[slot] && !cm.loads[slot] && !libcallSkip[imp.Name] && hookNames[imp.Name] != hookSetjmp {
			out = append(out, imp)
		}
	}
	return out
}

// resCands returns the functions of library f that the resource modules
// mods report (ids numbers their resource types), skipping those already
// picked (by -P) and aliases of one address (malloc and __libc_malloc).
// It adds what it returns to picked.
func resCands(f *elfx.File, mods []*ResModule, ids map[*ResType]int, picked map[uint64]bool) []cand {
	var out []cand
	for _, m := range mods {
		for i := range m.Funcs {
			rf := &m.Funcs[i]
			if rf.AtCallers {
				continue // callerCands
			}
			for _, fn := range f.Funcs {
				if picked[fn.Value] || !rf.matchFunc(fn) || !f.InExec(fn.Value) {
					continue
				}
				picked[fn.Value] = true
				out = append(out, cand{name: fn.Name, value: fn.Value, size: fn.Size,
					res: newResFn(m, rf, ids)})
			}
		}
	}
	return out
}

// callerCands returns the PLT stubs of f through which it calls the
// functions the resource modules mods record where they are called
// (ResFunc.AtCallers), skipping those already picked.
func callerCands(f *elfx.File, mods []*ResModule, ids map[*ResType]int, picked map[uint64]bool) []cand {
	var out []cand
	for _, m := range mods {
		for i := range m.Funcs {
			rf := &m.Funcs[i]
			if !rf.AtCallers {
				continue
			}
			for _, c := range stubs(f) {
				if picked[c.value] || !rf.matchSym(c.name) {
					continue
				}
				picked[c.value] = true
				c.res = newResFn(m, rf, ids)
				out = append(out, c)
			}
		}
	}
	return out
}

// exeResCands returns the code of executable f the resource modules
// record, beside cands, its functions and stubs already instrumented: the
// functions it defines (a static program's malloc, an audited function)
// and the PLT stubs of the functions recorded at their callers.
func exeResCands(f *elfx.File, mods []*ResModule, ids map[*ResType]int, cands []cand) []cand {
	if len(mods) == 0 {
		return nil
	}
	picked := map[uint64]bool{}
	for _, c := range cands {
		picked[c.value] = true
	}
	out := resCands(f, mods, ids, picked)
	return append(out, callerCands(f, mods, ids, picked)...)
}

// resName reports whether a module of mods traces the function name.
func resName(mods []*ResModule, name string) bool {
	for _, m := range mods {
		for i := range m.Funcs {
			if m.Funcs[i].matchSym(name) {
				return true
			}
		}
	}
	return false
}
