// Package withsyms applies uftrace's --with-syms=DIR: a module's functions
// come from the .sym file DIR holds for it (a uftrace.data directory's, or
// one saved from it), named after the module's file, instead of from its
// ELF symbol table. It makes a stripped program traceable by name.
package withsyms

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"rtrace/internal/elfx"
	"rtrace/internal/uftrace"
)

// Apply returns f with its functions read from dir's .sym file for it
// (dir/<base name>.sym), not stripped; f itself when dir is "" or holds
// no such file. A file that is unreadable, or whose build id is not f's
// (the symbols of another build would put breakpoints in the middle of
// instructions), is an error, and f stays as it is.
func Apply(dir string, f *elfx.File) (*elfx.File, error) {
	if dir == "" {
		return f, nil
	}
	path := filepath.Join(dir, filepath.Base(f.Path)+".sym")
	r, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return f, err
	}
	defer r.Close()
	t, err := uftrace.ParseSyms(r)
	if err != nil {
		return f, fmt.Errorf("%s: %w", path, err)
	}
	if t.BuildID != "" && f.BuildID != "" && t.BuildID != f.BuildID {
		return f, fmt.Errorf("%s is of another build of %s (build id %s, not %s): not used", path, f.Path, t.BuildID, f.BuildID)
	}
	xf := *f // f may be elfx.Open's, shared
	xf.Funcs, xf.Stripped = Funcs(t, f.MinVaddr()), false
	return &xf, nil
}

// Funcs are the functions of t, a module's .sym whose addresses are
// relative to base: each function symbol (T, t, W, w) sized up to the next
// symbol at another address, the other names at its address its aliases.
// PLT entries are left out: they are the ELF's imports.
func Funcs(t *uftrace.SymTable, base uint64) []elfx.Func {
	var funcs []elfx.Func
	for i := 0; i < len(t.Syms); {
		s := t.Syms[i]
		j := i + 1
		for j < len(t.Syms) && t.Syms[j].Addr == s.Addr {
			j++
		}
		var fn *elfx.Func
		for _, a := range t.Syms[i:j] {
			switch a.Type {
			case 'T', 't', 'W', 'w':
			default:
				continue
			}
			if fn != nil {
				fn.Aliases = append(fn.Aliases, a.Name)
				continue
			}
			funcs = append(funcs, elfx.Func{Name: a.Name, Value: a.Addr + base, Local: a.Type == 't', Weak: a.Type == 'W' || a.Type == 'w'})
			fn = &funcs[len(funcs)-1]
			if j < len(t.Syms) {
				fn.Size = t.Syms[j].Addr - a.Addr
			}
		}
		i = j
	}
	return funcs
}
