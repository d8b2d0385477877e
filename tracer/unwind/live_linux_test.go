package unwind

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"rtrace/internal/testutil"
)

// builds of testdata/unwind.c the live tests run.
var builds = []struct {
	name  string
	flags []string
}{
	{"O0", []string{"-O0", "-g"}},
	{"O2-omit-fp", []string{"-O2", "-fomit-frame-pointer", "-g"}},
	{"O2-omit-fp-nopie", []string{"-O2", "-fomit-frame-pointer", "-g", "-no-pie"}},
	{"O0-nopie", []string{"-O0", "-g", "-no-pie"}},
}

// target is the fixture stopped under ptrace. The test that starts it runs
// on a locked OS thread, the tracer thread, until it ends.
type target struct {
	pid  int
	exe  string
	mods []mapped
}

// mapped is a module's executable mapping and its symbols.
type mapped struct {
	path   string
	bias   uint64
	lo, hi uint64
	syms   []elf.Symbol // functions, by value
}

// start runs bin under ptrace to its exec stop.
func start(t testing.TB, bin string) *target {
	t.Helper()
	// Ptrace requests are accepted only from the thread that forked the
	// tracee; the test never unlocks, so the thread dies with it.
	runtime.LockOSThread()
	cmd := exec.Command(bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
	if err := cmd.Start(); err != nil {
		if errors.Is(err, syscall.EPERM) && !testutil.InCI() {
			t.Skipf("ptrace refused here: %v", err)
		}
		t.Fatalf("starting %s under ptrace: %v", bin, err)
	}
	pid := cmd.Process.Pid
	cmd.Process.Release()
	t.Cleanup(func() {
		unix.Kill(pid, unix.SIGKILL)
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, 0, nil)
	})
	if ws := wait(t, pid); !ws.Stopped() || ws.StopSignal() != unix.SIGTRAP {
		t.Fatalf("waiting for the exec stop: status %#x", ws)
	}
	// The path the kernel shows in /proc/pid/maps has no symbolic links.
	exe, err := filepath.EvalSymlinks(bin)
	if err != nil {
		t.Fatal(err)
	}
	return &target{pid: pid, exe: exe}
}

func wait(t testing.TB, pid int) unix.WaitStatus {
	t.Helper()
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, 0, nil); err != nil {
		t.Fatalf("wait4 %d: %v", pid, err)
	}
	return ws
}

// toStop continues the target to the int3 in stopme and returns the state
// of stopme's caller at the call site, as at a breakpoint on a function's
// first instruction: the return address is at [rsp].
func (tg *target) toStop(t testing.TB) Regs {
	t.Helper()
	for sig := 0; ; {
		if err := unix.PtraceCont(tg.pid, sig); err != nil {
			t.Fatalf("PTRACE_CONT: %v", err)
		}
		ws := wait(t, tg.pid)
		if !ws.Stopped() {
			t.Fatalf("waiting for stopme's int3: status %#x", ws)
		}
		if ws.StopSignal() == unix.SIGTRAP {
			break
		}
		sig = int(ws.StopSignal()) // the fixture's raise: deliver it
	}
	var r unix.PtraceRegs
	if err := unix.PtraceGetRegs(tg.pid, &r); err != nil {
		t.Fatalf("PTRACE_GETREGS: %v", err)
	}
	if tg.mods == nil {
		tg.loadMaps(t)
	}
	if name := tg.symbolize(r.Rip - 1); name != "stopme" {
		t.Fatalf("stopped at %#x (%s), not in stopme", r.Rip, name)
	}
	var ra [8]byte
	if n, err := ProcMem(tg.pid).ReadMemory(ra[:], r.Rsp); n != 8 {
		t.Fatalf("reading the return address at %#x: %v", r.Rsp, err)
	}
	return Regs{PC: binary.LittleEndian.Uint64(ra[:]), SP: r.Rsp + 8, BP: r.Rbp}
}

// loadMaps reads the target's executable mappings of files, their load
// biases and their function symbols (.symtab and .dynsym).
func (tg *target) loadMaps(t testing.TB) {
	t.Helper()
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", tg.pid))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		// start-end perms offset dev inode path
		f := strings.Fields(sc.Text())
		if len(f) < 6 || !strings.HasPrefix(f[5], "/") || f[1][2] != 'x' {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		m := mapped{path: f[5]}
		m.lo, _ = strconv.ParseUint(lo, 16, 64)
		m.hi, _ = strconv.ParseUint(hi, 16, 64)
		off, _ := strconv.ParseUint(f[2], 16, 64)
		ef, err := elf.Open(m.path)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ef.Progs {
			// The PT_LOAD holding the mapping's file offset: its link-time
			// address there is Vaddr + (off - Off).
			if p.Type == elf.PT_LOAD && off >= p.Off&^0xfff && off < p.Off+p.Filesz {
				m.bias = m.lo - (p.Vaddr + off - p.Off)
				break
			}
		}
		syms, _ := ef.Symbols()
		dyn, _ := ef.DynamicSymbols()
		for _, s := range append(syms, dyn...) {
			if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 {
				m.syms = append(m.syms, s)
			}
		}
		sort.Slice(m.syms, func(i, j int) bool { return m.syms[i].Value < m.syms[j].Value })
		ef.Close()
		tg.mods = append(tg.mods, m)
	}
	if tg.module(tg.exe) == nil || tg.module("libc.so.6") == nil {
		t.Fatalf("no executable or libc mapping in\n%s", maps)
	}
}

// module returns the mapping whose path ends in name.
func (tg *target) module(name string) *mapped {
	for i := range tg.mods {
		if strings.HasSuffix(tg.mods[i].path, name) {
			return &tg.mods[i]
		}
	}
	return nil
}

// symbolize names the function holding addr: "leaf" in the executable,
// "libc:qsort_r" in libc (libc has only .dynsym: its static functions
// take the name "libc:?"), "?" elsewhere.
func (tg *target) symbolize(addr uint64) string {
	for _, m := range tg.mods {
		if addr < m.lo || addr >= m.hi {
			continue
		}
		name := "?"
		a := addr - m.bias
		for _, s := range m.syms {
			if s.Value <= a && a < s.Value+s.Size {
				name = s.Name
				if i := strings.IndexByte(name, '.'); i > 0 { // leaf.cold, cmp.isra.0
					name = name[:i]
				}
			}
		}
		if m.path == tg.exe {
			return name
		}
		return strings.TrimSuffix(filepath.Base(m.path), ".so.6") + ":" + name
	}
	return "?"
}

// unwinder registers the target's modules; noCFI names modules to register
// under a path without CFI, so that they unwind with frame pointers.
func (tg *target) unwinder(noCFI ...string) *Unwinder {
	u := New()
	for _, m := range tg.mods {
		path := m.path
		for _, n := range noCFI {
			if strings.HasSuffix(path, n) {
				path = "/nonexistent" + path
			}
		}
		u.AddModule(path, m.bias, m.lo, m.hi)
	}
	return u
}

// names symbolizes a backtrace; return addresses are looked up at pc-1.
func (tg *target) names(pcs []uint64) []string {
	var out []string
	for _, pc := range pcs {
		out = append(out, tg.symbolize(pc-1))
	}
	return out
}

// checkFrames checks that bt begins with want, in the executable, and that
// the frames after them lead through libc to _start, the outermost frame.
func checkFrames(t *testing.T, bt []string, want ...string) {
	t.Helper()
	ok := len(bt) > len(want)+1 && slices.Equal(bt[:len(want)], want) && bt[len(bt)-1] == "_start"
	// glibc 2.34+: main <- __libc_start_call_main <- __libc_start_main.
	for i := len(want); ok && i < len(bt)-1; i++ {
		ok = strings.HasPrefix(bt[i], "libc:")
	}
	if !ok {
		t.Errorf("backtrace %q, want %q, then libc frames, then _start", bt, want)
	}
}

// TestLive unwinds the fixture at its three stops, over builds with and
// without frame pointers, PIE and not: leaf's call, cmp's under libc's
// qsort (libc has no frame pointers: CFI only), and onsig's under a signal
// frame. With frame pointers, it also unwinds with the executable's CFI
// left out, which takes the rbp chain through the executable and libc's
// CFI (restoring rbp) through libc.
func TestLive(t *testing.T) {
	for _, b := range builds {
		t.Run(b.name, func(t *testing.T) {
			bin := testutil.BuildC(t, "unwind.c", b.flags...)
			tg := start(t, bin)
			regs := tg.toStop(t)
			unwinders := map[string]*Unwinder{"cfi": tg.unwinder()}
			var warn strings.Builder
			if strings.HasPrefix(b.name, "O0") {
				u := tg.unwinder(filepath.Base(bin))
				u.Warn = &warn
				unwinders["fp"] = u
			}
			for _, stop := range []struct {
				name string
				top  string // the frame under stopme
				libc string // a libc function between top and leaf
			}{
				{"leaf", "leaf", ""},
				{"qsort", "cmp", "qsort_r"},
				{"signal", "onsig", "raise"},
			} {
				if stop.name != "leaf" {
					regs = tg.toStop(t)
				}
				for name, u := range unwinders {
					bt := tg.names(u.Backtrace(ProcMem(tg.pid), regs, 64, nil))
					t.Logf("%s, %s: %q", stop.name, name, bt)
					if stop.top == "leaf" {
						checkFrames(t, bt, "leaf", "mid", "top", "main")
						continue
					}
					libc, rest := splitLibc(bt[min(1, len(bt)):])
					if len(bt) == 0 || bt[0] != stop.top || !hasFunc(libc, stop.libc) {
						t.Errorf("%s, %s: backtrace %q, want %s, then libc frames with %s, then leaf",
							stop.name, name, bt, stop.top, stop.libc)
						continue
					}
					checkFrames(t, rest, "leaf", "mid", "top", "main")
				}
			}
			if u := unwinders["fp"]; u != nil && !strings.Contains(warn.String(), filepath.Base(bin)) {
				t.Errorf("no warning about the executable's CFI: %q", warn.String())
			}
		})
	}
}

// splitLibc splits bt after its leading libc frames.
func splitLibc(bt []string) (libc, rest []string) {
	i := 0
	for i < len(bt) && strings.HasPrefix(bt[i], "libc:") {
		i++
	}
	return bt[:i], bt[i:]
}

// hasFunc reports whether frames hold libc's function fn (raise is also
// gsignal: the symbolizer may give either name).
func hasFunc(frames []string, fn string) bool {
	return slices.Contains(frames, "libc:"+fn) || fn == "raise" && slices.Contains(frames, "libc:gsignal")
}

// BenchmarkBacktrace measures one 10-frame backtrace of the live fixture
// stopped in cmp under libc's qsort (-O2 -fomit-frame-pointer: CFI all the
// way): warm, with the unwind rows of these call sites cached, and cold,
// with every row computed again from the FDEs.
func BenchmarkBacktrace(b *testing.B) {
	bin := testutil.BuildC(b, "unwind.c", "-O2", "-fomit-frame-pointer", "-g")
	tg := start(b, bin)
	tg.toStop(b)
	regs := tg.toStop(b)
	mem := ProcMem(tg.pid)
	u := tg.unwinder()
	out := make([]uint64, 0, 16)
	if n := len(u.Backtrace(mem, regs, 10, out)); n != 10 {
		b.Fatalf("%d frames, want 10", n)
	}
	b.Run("warm", func(b *testing.B) {
		for b.Loop() {
			out = u.Backtrace(mem, regs, 10, out[:0])
		}
	})
	b.Run("cold-rows", func(b *testing.B) {
		for b.Loop() {
			for _, c := range u.cfis {
				clear(c.rows)
			}
			out = u.Backtrace(mem, regs, 10, out[:0])
		}
	})
}
