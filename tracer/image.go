package tracer

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"

	"golang.org/x/sys/unix"

	"rtrace/internal/elfx"
	"rtrace/internal/timeline"
	"rtrace/internal/uftrace"
	"rtrace/internal/withsyms"
	"rtrace/tracer/bp"
	"rtrace/tracer/ptrace"
	"rtrace/tracer/unwind"
)

// fn is a traced function.
type fn struct {
	name string
	addr uint64 // runtime address
	// Argument and return-value specs (-A, -R, -a), in payload order.
	args, rets []uftrace.ArgSpec
	// jump: setjmp, which returns twice. Its entry and exit are recorded
	// at the call and its return address is left alone: setjmp saves it in
	// the jmp_buf, where a hijacked one would send the longjmp to the
	// return breakpoint.
	jump bool
	// personality: a personality routine, called by the unwinder.
	personality bool
	// reads: the counters read at its entry and return (Config.Reads).
	reads uftrace.ReadKind
	// res: a resource function of a module (-e); its calls are reported.
	res *resFn
	// stub: the fast engine's stub of the function (0: none); redirects
	// the call sites aimed at it, armed and disarmed with its entry.
	stub      uint64
	redirects []redirect
	// argStub: the stub records args and rets itself (args.S): a stop at
	// its int3 entry goes there too.
	argStub bool
}

// libcallSkip are library functions whose calls are not recorded, as
// uftrace's PLT hooks skip them (libmcount/plthook.c): the start-up call
// that never returns, and the C++ runtime calls that exceptions unwind
// through. Their effect on the stack is followed by the hooks instead.
// Nor the calls that switch contexts (ucontext(3)): swapcontext may
// return in another context, setcontext does not return; a hijacked
// return of swapcontext's popped another context's frame, and the program
// went wrong (docs/RELIABILITY.md). getcontext is recorded, as uftrace
// records it; its second return, when a setcontext resumes it, is not
// followed.
var libcallSkip = map[string]bool{
	"__libc_start_main": true, "__cxa_finalize": true, "__cxa_throw": true,
	"__cxa_rethrow": true, "__cxa_begin_catch": true, "__cxa_end_catch": true,
	"_Unwind_Resume": true, "_mcleanup": true, "mcount": true, "_mcount": true,
	"__fentry__": true, "__gnu_mcount_nc": true,
	"__cyg_profile_func_enter": true, "__cyg_profile_func_exit": true,
	"swapcontext": true, "setcontext": true,
}

// cand is code setupImage instruments: a function of the executable or a
// PLT stub (libcall).
type cand struct {
	name        string
	value, size uint64 // link-time address and size
	libcall     bool
	res         *resFn
}

// specValue is the address Config.Specs finds c's DWARF specs by: its
// link-time address, 0 for a library call (a stub has no DWARF).
func (c cand) specValue() uint64 {
	if c.libcall {
		return 0
	}
	return c.value
}

// image is one address space: the breakpoints and scratch page planted in
// it. A forked child shares its parent's image (its memory is a copy).
type image struct {
	exe  string
	elf  *elfx.File
	bias uint64
	// unwinders are the runtime address ranges of the unwinder functions
	// hooked (hookUnwind), [start, end).
	unwinders [][2]uint64
	// bare: one of Config.Untraced, with no function traced, only its
	// resources (-e).
	bare    bool
	retAddr uint64 // the shared return breakpoint: the first byte of the scratch mapping
	// rets are the return breakpoints: retAddr, and one at the start of
	// each library's scratch mapping (a detour's trampoline must reach
	// its return breakpoint with a rel32).
	rets  []uint64
	entry uint64 // the program's entry point (internal breakpoint)
	bps   *bp.Table
	funcs []fn
	named int // funcs[:named] were announced to the function sink
	// text is the executable's code (runtime addresses): the unwinder's
	// calls of the personality routine come from elsewhere.
	textLo, textHi uint64
	probes         []probeSite // by Breakpoint.Site of Probe breakpoints
	// mods are the libraries mapped, by path; nil until the entry point.
	mods map[string]*module
	// gotCalls are the imports the executable calls through their GOT slot
	// (-fno-plt); their slots are redirected once the loader has filled them.
	gotCalls []elfx.Import
	// Scratch room for hook breakpoints planted after setup.
	hookNext, hookEnd uint64
	// scratch are the scratch mappings rtrace made, [lo, hi) each;
	// semaphores the USDT semaphores it bumped: what a detach undoes.
	scratch    [][2]uint64
	semaphores []uint64
	// unwinder computes backtraces (nil without -e): it knows the CFI of
	// every module mapped.
	unwinder *unwind.Unwinder
	// fast is the fast engine's state of the address space (nil: the int3
	// engine).
	fast *fastImage
	// keepScratch: at a detach, something may still run rtrace's code (a
	// thread that did not leave it): the scratch mappings stay.
	keepScratch bool
	// byAddr indexes funcs by address (fnAt), for the first byAddrN.
	byAddr  map[uint64]int
	byAddrN int
}

// fnAt returns the traced function at runtime address addr, nil if none.
func (im *image) fnAt(addr uint64) *fn {
	if im.byAddr == nil || im.byAddrN != len(im.funcs) {
		im.byAddr = make(map[uint64]int, len(im.funcs))
		for i, f := range im.funcs {
			im.byAddr[f.addr] = i
		}
		im.byAddrN = len(im.funcs)
	}
	if i, ok := im.byAddr[addr]; ok {
		return &im.funcs[i]
	}
	return nil
}

// fork returns the image of a forked child: a copy, since its memory is a
// copy. A library it loads or closes, and the scratch it maps, are its own.
func (im *image) fork() *image {
	c := *im
	c.bps = im.bps.Clone()
	c.funcs = slices.Clip(im.funcs)
	c.rets = slices.Clip(im.rets)
	c.probes = slices.Clone(im.probes) // their warned flags are per process
	c.scratch = slices.Clip(im.scratch)
	c.semaphores = slices.Clip(im.semaphores)
	if im.mods != nil {
		c.mods = maps.Clone(im.mods)
	}
	return &c
}

// isRet reports whether addr is one of the image's return breakpoints.
func (im *image) isRet(addr uint64) bool {
	for _, r := range im.rets {
		if r == addr {
			return true
		}
	}
	return false
}

// execRange is the runtime range of f's executable segments, loaded at bias.
func execRange(f *elfx.File, bias uint64) (lo, hi uint64) {
	lo = ^uint64(0)
	for _, l := range f.Loads {
		if l.Exec {
			lo, hi = min(lo, l.Vaddr+bias), max(hi, l.Vaddr+l.Memsz+bias)
		}
	}
	return lo, hi
}

// Skip is a function rtrace could not trace, with the reason.
type Skip struct {
	Func   string
	Reason string
	// Res: a resource module's function (-e): its calls are missing
	// from the resource trace, which rtrace says in a warning.
	Res bool
}

// Refusal is a target rtrace will not trace because the result would be
// wrong or the kernel would not allow it.
type Refusal struct{ Reason string }

func (r *Refusal) Error() string { return r.Reason }

// checkTraceable refuses programs rtrace cannot trace safely: Go
// programs, and setuid, setgid or setcap ones when rtrace lacks
// CAP_SYS_PTRACE, which they would run without their privileges under.
func checkTraceable(f *elfx.File) error {
	if f.IsGo {
		return &Refusal{fmt.Sprintf("%s is a Go program: its runtime moves goroutine stacks and rejects rewritten return addresses, so rtrace cannot trace it safely", f.Path)}
	}
	if (f.Setuid || f.FileCaps) && !capSysPtrace() {
		what, verb := "is setuid/setgid", "drops its privileges"
		if !f.Setuid {
			what, verb = "has file capabilities (setcap)", "does not grant them"
		}
		return &Refusal{fmt.Sprintf("%s %s: the kernel %s under a tracer without CAP_SYS_PTRACE, so it would not run as it does without rtrace (run rtrace as root, or give it CAP_SYS_PTRACE, to trace it with its privileges)", f.Path, what, verb)}
	}
	return nil
}

// capSysPtrace reports whether rtrace holds CAP_SYS_PTRACE: the kernel
// then runs a setuid, setgid or setcap program it traces with its
// privileges (security/commoncap.c, cap_bprm_creds_from_file: the
// downgrade applies when !ptracer_capable), as untraced
// (docs/RELIABILITY.md).
func capSysPtrace() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[unix.CAP_SYS_PTRACE/32].Effective&(1<<(unix.CAP_SYS_PTRACE%32)) != 0
}

func newSID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// readMaps returns /proc/<pid>/maps.
func readMaps(pid int) ([]byte, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, fmt.Errorf("reading maps of pid %d: %w", pid, err)
	}
	return b, nil
}

// exeBias finds the load bias of exe from the maps: where its first mapping
// starts, less the page-aligned vaddr of its first PT_LOAD. Libraries get
// theirs the same way (plantHooks).
func exeBias(maps []byte, exe string, f *elfx.File) (uint64, error) {
	mm, err := uftrace.ParseMaps(bytes.NewReader(maps))
	if err != nil {
		return 0, fmt.Errorf("maps of the target: %w", err)
	}
	for _, m := range uftrace.Modules(mm) {
		if m.Path == exe {
			return f.Bias(m.Base), nil
		}
	}
	return 0, fmt.Errorf("%s is not in the maps of the target", exe)
}

// setupImage plants the scratch page and the function breakpoints of the
// executable in the stopped tracee tid, right after an exec. Called on the
// tracer thread.
func (t *Tracer) setupImage(tid int) (*image, []byte, error) {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", tid))
	if errors.Is(err, os.ErrPermission) && !capSysPtrace() {
		// The exec made it another user's, not dumpable (a setuid or
		// setcap program that kept its privileges: its caller may set
		// its uid), and rtrace may not look at it.
		return nil, nil, &Refusal{fmt.Sprintf("pid %d execed a setuid/setgid or setcap program that runs as another user, which rtrace may not inspect without CAP_SYS_PTRACE (run rtrace as root, or give it CAP_SYS_PTRACE, to trace it with its privileges)", tid)}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading the executable of pid %d: %w", tid, err)
	}
	f, err := elfx.Open(exe)
	if err != nil {
		return nil, nil, err
	}
	if err := checkTraceable(f); err != nil {
		return nil, nil, err
	}
	elfx.Prefetch(f)
	f = t.withSyms(f)
	maps, err := readMaps(tid)
	if err != nil {
		return nil, nil, err
	}
	bias, err := exeBias(maps, exe, f)
	if err != nil {
		return nil, nil, err
	}
	im := &image{exe: exe, elf: f, bias: bias, bps: bp.NewTable(), entry: f.Entry + bias}
	im.textLo, im.textHi = execRange(f, bias)
	if len(t.cfg.Modules) > 0 && t.cfg.Backtrace > 0 {
		im.unwinder = unwind.New()
		im.unwinder.Warn = t.cfg.Warn
		im.unwinder.AddModule(exe, bias, im.textLo, im.textHi)
	}
	// A static executable holds libc too. When it has DWARF, trace the
	// functions DWARF describes: the program's own code (Debian's libc.a
	// has no debug info), as uftrace -pg would show them.
	var own map[uint64]bool
	var files map[uint64]string // for -L
	if f.Static() || len(t.cfg.Select.Locs) > 0 {
		if subs, err := elfx.SubprogramLines(exe); err == nil && len(subs) > 0 {
			own, files = map[uint64]bool{}, map[uint64]string{}
			for _, s := range subs {
				own[s.Low], files[s.Low] = true, s.File
			}
		}
		if !f.Static() {
			own = nil
		}
	}
	if f.Stripped && t.funcs != nil && !t.untraced(exe) {
		f = withFrameFuncs(f, t.cfg.Warn)
		im.elf = f
	}
	mem, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", tid), os.O_RDWR, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("opening the memory of pid %d: %w", tid, err)
	}
	defer mem.Close()
	if t.drain != nil {
		if im.fast, err = newFastImage(tid); err != nil {
			return nil, nil, err
		}
		// Only for a process rtrace attached to: a launched one dies with
		// rtrace (PTRACE_O_EXITKILL, docs/RELIABILITY.md).
		var lerr error
		if t.attached && t.keeper == nil && t.keeperErr == nil {
			t.keeper, t.keeperErr = newKeeper() // on the tracer thread
		}
		if t.attached {
			lerr = t.keeperErr
			if lerr == nil {
				im.fast.life, lerr = newLifePage(t.keeper, tid, im.fast.memfdName())
			}
		}
		if lerr != nil && !t.warnedLife {
			t.warnedLife = true
			fmt.Fprintf(t.cfg.Warn, "rtrace: warning: pid %d: no lifeline (%v): should rtrace be killed, the process may die of SIGTRAP\n", tid, lerr)
		}
		if f.Static() { // a live process at an attach has its base: left alone
			if err := im.fast.setPreTLS(tid); err != nil {
				return nil, nil, fmt.Errorf("setting the %%fs base of pid %d before its TLS: %w", tid, err)
			}
		}
	}
	cm := scanModule(mem, f, bias, t.cfg.Events)
	cm.markColdParts()
	im.bare = t.untraced(exe)
	funcs := t.funcs != nil && !im.bare
	cands, nfuncs := exeCands(f, own, funcs, t.cfg.Libcalls, t.cfg.Modules, &t.cfg.Select, files)
	cands = append(cands, exeResCands(f, t.cfg.Modules, t.resIDs, cands)...)
	if f.Stripped && funcs {
		t.result.Unwound = append(t.result.Unwound, unwound(f, cands))
	}
	// Only a stripped program without unwind tables has no function to
	// trace: with none selected (-P naming only libraries), nothing is said.
	if nfuncs == 0 && funcs && f.Stripped && !slices.ContainsFunc(f.Funcs, func(fn elfx.Func) bool { return traceable(f, fn) }) {
		what := "no calls will be recorded"
		if len(cands) > 0 {
			what = "only its calls into libraries will be recorded"
		}
		fmt.Fprintf(t.cfg.Warn, "rtrace: warning: %s has no function symbols and no unwind tables: %s\n", exe, what)
	}
	// Scratch: the return breakpoint, then one slot per function, then the
	// room for hooks and GOT trampolines planted later.
	size := scratchSize(len(cands) + len(f.Imports) + hookSlots)
	if t.drain != nil {
		size += cloneRoom
	}
	if _, locStubs := t.cfg.Select.locFilter(files); funcs && t.cfg.Libcalls && locStubs {
		im.gotCalls = gotCalls(f, cm)
	}
	scratch, end, err := t.plantFuncs(tid, mem, im, cm, cands, size)
	timeline.Mark("exe planted")
	if err != nil {
		return nil, nil, err
	}
	im.retAddr = scratch
	im.rets = []uint64{scratch}
	im.hookNext, im.hookEnd = end, scratch+size
	t.plantProbes(mem, im, f, bias)
	buf := make([]byte, 1)
	// A temporary breakpoint at the entry point tells when the loader has
	// mapped the libraries; it is removed when hit.
	if t.attached {
		// Attached: the program is long past its entry point.
	} else if b := im.bps.At(im.entry); b != nil {
		b.Kind |= bp.Internal
	} else if _, err := mem.ReadAt(buf, int64(im.entry)); err == nil {
		im.bps.Add(&bp.Breakpoint{Addr: im.entry, Orig: buf[0], Kind: bp.Internal, Func: -1})
		if _, err := mem.WriteAt([]byte{bp.Int3}, int64(im.entry)); err != nil {
			return nil, nil, fmt.Errorf("planting the entry breakpoint: %w", err)
		}
	}
	if !t.on {
		t.arm(mem, im, 0, len(im.funcs), false)
	}
	return im, maps, nil
}

// untraced reports whether the executable at path is one of
// Config.Untraced.
func (t *Tracer) untraced(path string) bool {
	if len(t.cfg.Untraced) == 0 {
		return false
	}
	st, err := os.Stat(path)
	if err != nil {
		return false
	}
	for _, u := range t.cfg.Untraced {
		if ut, err := os.Stat(u); err == nil && os.SameFile(st, ut) {
			return true
		}
	}
	return false
}

// withSyms is f with its functions from Config.WithSyms's .sym file for
// it, when there is one; a bad one is warned of and f kept.
func (t *Tracer) withSyms(f *elfx.File) *elfx.File {
	wf, err := withsyms.Apply(t.cfg.WithSyms, f)
	if err != nil {
		fmt.Fprintf(t.cfg.Warn, "rtrace: warning: --with-syms: %v\n", err)
	}
	return wf
}

// withFrameFuncs returns the stripped executable f with the functions its
// FDEs bound (elfx.FrameFuncs), named func_<address> unless .dynsym names
// them; rtrace resolve, and the uftrace.data's .sym files, name them from a
// separate debug file when one is installed. Unreadable FDEs leave f as it
// is, with a warning.
func withFrameFuncs(f *elfx.File, warn io.Writer) *elfx.File {
	funcs, err := elfx.FrameFuncs(f)
	if err != nil {
		fmt.Fprintf(warn, "rtrace: warning: %s has no symbol table and its unwind tables are unreadable (%v): only its calls into libraries will be recorded\n", f.Path, err)
		return f
	}
	xf := *f // f is elfx.Open's, shared
	xf.Funcs = funcs
	return &xf
}

// unwound counts the functions of the stripped executable f that its FDEs
// gave (withFrameFuncs), and those of them among cands.
func unwound(f *elfx.File, cands []cand) Unwound {
	u := Unwound{Exe: f.Path}
	planted := make(map[uint64]bool, len(cands))
	for _, c := range cands {
		planted[c.value] = true
	}
	for _, fn := range f.Funcs {
		switch {
		case !fn.Synthetic:
		case planted[fn.Value]:
			u.Traced++
		case isFragment(fn.Name):
			u.Parts++
		default:
			u.Other++
		}
	}
	return u
}

// newFn describes a traced function of module f at runtime address addr
// (link-time value; 0 for a library call), with the argument specs that
// apply to it.
func (t *Tracer) newFn(f *elfx.File, name string, addr, value uint64) fn {
	fi := fn{name: name, addr: addr}
	if t.cfg.Specs != nil {
		fi.args, fi.rets = t.cfg.Specs(f, name, value)
	}
	if t.cfg.Reads != nil {
		fi.reads = t.cfg.Reads(name)
	}
	return fi
}

// removeInternal restores the original byte of an internal-only breakpoint.
func removeInternal(tid int, b *bp.Breakpoint) error {
	return ptrace.WriteText(tid, b.Addr, []byte{b.Orig})
}

var (
	errNoStack      = errors.New("return breakpoint hit with an empty shadow stack")
	errEntryPoint   = errors.New("holds the program's entry point")
	errSymbolInside = errors.New("another symbol starts inside the detour jump")
	errBranchInside = errors.New("a branch lands inside the detour jump")
	errJump         = errors.New("setjmp returns twice: recorded at the call")
	errProbeInside  = errors.New("a USDT probe lies inside the detour jump")
	errValues       = errors.New("its arguments or return value are recorded at a stop")
	errNotELF       = errors.New("not an ELF object")
)

// textImage is the executable code of an image as read from the process.
type textImage []struct {
	start uint64
	data  []byte
}

// readText reads the executable PT_LOAD segments of f, loaded at bias.
func readText(mem *os.File, f *elfx.File, bias uint64) textImage {
	var out textImage
	for _, l := range f.Loads {
		if !l.Exec || l.Filesz == 0 || l.Filesz > 1<<30 {
			continue
		}
		buf := make([]byte, l.Filesz)
		n, _ := mem.ReadAt(buf, int64(l.Vaddr+bias))
		out = append(out, struct {
			start uint64
			data  []byte
		}{l.Vaddr + bias, buf[:n]})
	}
	return out
}

// code returns up to size bytes at addr, nil when addr is not in the text.
func (t textImage) code(addr, size uint64) []byte {
	for _, s := range t {
		if addr >= s.start && addr < s.start+uint64(len(s.data)) {
			off := addr - s.start
			return s.data[off:min(off+size, uint64(len(s.data)))]
		}
	}
	return nil
}
