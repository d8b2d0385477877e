package uftrace

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"rtrace/internal/regular"
)

// Filter chooses the records Copy writes. Record is given every record in
// time order and emits what is to be written (possibly changed, possibly
// later, possibly none); End is called once at the end of the input for
// what the filter still holds. Emitted records of one task must keep
// their time order.
type Filter interface {
	Record(it *Item, emit func(*Item) error) error
	End(emit func(*Item) error) error
}

// Copy writes everything r holds into a new directory dst through a Writer:
// info, task.txt, maps, symbols, debug info, events, extern data and every
// record with its payload, or with f the records f emits. It consumes r's
// records and returns how many it wrote.
func Copy(r *Reader, dst string, f Filter) (int, error) {
	info := *r.Info
	info.TaskIDs = nil
	w, err := Create(dst, info)
	if err != nil {
		return 0, err
	}
	if err := copyMeta(r, w); err != nil {
		w.Close()
		return 0, err
	}
	n := 0
	emit := func(it *Item) error {
		n++
		return w.Append(it.Tid, it.Record, it.Payload)
	}
	for {
		it, err := r.Next()
		if err == io.EOF {
			break
		}
		if err == nil {
			if f != nil {
				err = f.Record(it, emit)
			} else {
				err = emit(it)
			}
		}
		if err != nil {
			w.Close()
			return n, err
		}
	}
	if f != nil {
		if err := f.End(emit); err != nil {
			w.Close()
			return n, err
		}
	}
	// Keep the original's task order in info.
	if err := w.UpdateInfo(func(in *Info) { in.TaskIDs = append([]int(nil), r.Info.TaskIDs...) }); err != nil {
		w.Close()
		return n, err
	}
	return n, w.Close()
}

func copyMeta(r *Reader, w *Writer) error {
	sessions := map[string]*Session{}
	for _, s := range r.Sessions {
		sessions[s.SID] = s
	}
	for _, e := range r.TaskEvents {
		var err error
		switch e.Kind {
		case KindSess:
			var maps []byte
			if maps, err = regular.ReadFile(r.path("sid-" + e.SID + ".map")); err == nil {
				err = w.Session(e, maps)
			}
		case KindTask:
			err = w.Task(e.Time, e.Tid, e.Pid)
		case KindFork:
			err = w.Fork(e.Time, e.Pid, e.PPid)
		case KindDlop:
			err = w.Dlopen(e.Time, e.Tid, e.SID, e.Base, e.Exename)
		}
		if err != nil {
			return err
		}
	}
	done := map[string]bool{}
	for _, s := range r.Sessions {
		for _, m := range s.Modules {
			if m.Syms == nil || done[m.SymFile] {
				continue
			}
			done[m.SymFile] = true
			path := m.Syms.Path
			if path == "" {
				path = m.Path
			}
			w.modules[m.SymFile] = path
			if err := w.Symbols(m.SymFile, m.Syms.Path, m.Syms.BuildID, m.Syms.Syms, 0); err != nil {
				return err
			}
			if m.debugFuncs != nil {
				// The .dbg keeps its own build id, or none: the maps are
				// copied as they are, and uftrace reads a .dbg with a build
				// id only when its map line repeats it.
				if err := w.Debug(m.SymFile, m.Syms.Path, m.dbgBuildID, m.debugFuncs); err != nil {
					return err
				}
			}
		}
	}
	for id, name := range r.Events {
		if err := w.AddEvent(id, name); err != nil {
			return err
		}
	}
	if data, err := regular.ReadFile(r.path("extern.dat")); err == nil {
		if err := os.WriteFile(w.path("extern.dat"), data, 0o644); err != nil {
			return fmt.Errorf("copying extern.dat: %w", err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	// Per-CPU perf event data (schedule events) is copied as is; the Reader
	// does not decode it.
	perf, _ := filepath.Glob(filepath.Join(r.Dir, "perf-cpu*.dat"))
	for _, p := range perf {
		data, err := regular.ReadFile(p)
		if err == nil {
			err = os.WriteFile(w.path(filepath.Base(p)), data, 0o644)
		}
		if err != nil {
			return fmt.Errorf("copying %s: %w", filepath.Base(p), err)
		}
	}
	if data, err := regular.ReadFile(r.path("default.opts")); err == nil && len(data) > 0 {
		if err := os.WriteFile(w.path("default.opts"), data, 0o644); err != nil {
			return fmt.Errorf("copying default.opts: %w", err)
		}
	}
	return nil
}
