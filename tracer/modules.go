package tracer

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"rtrace/internal/elfx"
	"rtrace/internal/timeline"
	"rtrace/internal/uftrace"
	"rtrace/tracer/bp"
)

// module is a library mapped in an image, and what rtrace planted there.
type module struct {
	base, end uint64 // its mappings
	code      uint64 // the start of its code (the unwinder's key)
	lo, hi    int    // its traced functions: image.funcs[lo:hi]
}

// systemLibs are the libraries whose own PLT calls --nest-libcall does not
// record, as uftrace's does not (libmcount/plthook.c skip_libs): the C
// runtime's internals are noise, and the unwinder's calls break hooks.
var systemLibs = []string{"libc.so", "libc-2.", "libgcc_s.so", "libpthread.so", "libpthread-2.", "ld-linux", "libdl.so", "libdl-2.", "linux-vdso.so"}

func systemLib(base string) bool {
	for _, p := range systemLibs {
		if strings.HasPrefix(base, p) {
			return true
		}
	}
	return false
}

// syncModules brings what rtrace planted in th's image in line with its
// maps, and hands the sink the maps when they changed: at the program's
// entry point (the loader has mapped the
// libraries) and at each loader rendezvous (dlopen, dlclose). A new
// library gets its hooks, the functions -P selects, its PLT stubs with
// --nest-libcall, and its .sym; one loaded after the entry point also a
// DLOP line. A library gone has its breakpoints dropped: its memory is
// unmapped, there is nothing to restore.
func (t *Tracer) syncModules(th *thread, ts uint64) {
	// The first sync ends the set-up, however it ends.
	if ready := t.cfg.Ready; ready != nil {
		t.cfg.Ready = nil
		defer ready()
	}
	p := th.proc
	im := p.image
	maps, err := readMaps(p.pid)
	if err != nil {
		return
	}
	mm, err := uftrace.ParseMaps(bytes.NewReader(maps))
	if err != nil {
		return
	}
	mem, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", th.tid), os.O_RDWR, 0)
	if err != nil {
		return
	}
	defer mem.Close()
	atEntry := im.mods == nil
	changed := atEntry
	if atEntry {
		im.mods = map[string]*module{}
		t.hookModule(mem, im, im.elf, im.bias)
		t.patchGOT(mem, im)
	}
	seen := map[string]bool{}
	for _, mod := range uftrace.Modules(mm) {
		if mod.Path == im.exe {
			continue
		}
		seen[mod.Path] = true
		if im.mods[mod.Path] != nil {
			continue
		}
		f, err := t.library(mod.Path)
		if err != nil {
			continue // not an ELF object (a locale archive, a data file)
		}
		bias := f.Bias(mod.Base)
		m := &module{base: mod.Base, end: mod.End, lo: len(im.funcs)}
		if im.unwinder != nil {
			lo, hi := execRange(f, bias)
			im.unwinder.AddModule(mod.Path, bias, lo, hi)
			m.code = lo
		}
		t.hookModule(mem, im, f, bias)
		if im.fast == nil || !im.fast.disabled {
			t.traceLibrary(th.tid, mem, im, f, bias, !atEntry)
		}
		t.plantProbes(mem, im, f, bias)
		timeline.Mark("lib %s done", mod.Path)
		m.hi = len(im.funcs)
		if !t.on {
			t.arm(mem, im, m.lo, m.hi, false)
		}
		im.mods[mod.Path] = m
		changed = true
		if !atEntry {
			tid, sid, path := th.tid, p.sid, mod.Path
			t.sinks(func(s Sink) error { return s.Dlopen(ts, tid, sid, bias, path) })
		}
	}
	for path, m := range im.mods {
		if seen[path] {
			continue
		}
		var gone []uint64
		im.bps.All(func(b *bp.Breakpoint) {
			if b.Func >= m.lo && b.Func < m.hi || b.Addr >= m.base && b.Addr < m.end {
				gone = append(gone, b.Addr)
			}
		})
		for _, a := range gone {
			im.bps.Remove(a)
		}
		if im.unwinder != nil {
			im.unwinder.RemoveModule(m.code)
		}
		delete(im.mods, path)
		changed = true
	}
	timeline.Mark("modules synced")
	if changed {
		t.announce(p)
		t.sinks(func(s Sink) error { return s.Maps(p.sid, maps) })
		t.publishIndex(p) // the walker's modules are the unwinder's
	}
}

// traceLibrary instruments the functions of library f (loaded at bias)
// that -P selects (or, dlopened after the program started, that the
// executable's rules keep), and its PLT stubs with --nest-libcall, in
// scratch memory mapped next to it.
func (t *Tracer) traceLibrary(tid int, mem *os.File, im *image, f *elfx.File, bias uint64, dlopened bool) {
	sel, nest := &t.cfg.Select, t.cfg.NestLibcall
	if im.bare {
		sel, nest = &Selection{}, false // selects no library function
	}
	if im.bare || t.funcs == nil {
		dlopened = false // no function trace: a plugin's functions are not traced either
	}
	cands := libCands(f, sel, dlopened, nest, t.cfg.Modules, t.resIDs)
	if len(cands) == 0 {
		return
	}
	size := scratchSize(len(cands))
	if t.drain != nil {
		size += cloneRoom
	}
	scratch, _, err := t.plantFuncs(tid, mem, im, scanModule(mem, f, bias, t.cfg.Events), cands, size)
	if err != nil {
		fmt.Fprintf(t.cfg.Warn, "rtrace: warning: cannot trace functions of %s: %v\n", f.Path, err)
		return
	}
	im.rets = append(im.rets, scratch)
}
