package launcher

import (
	"fmt"
	"io"

	"rtrace/internal/elfx"
)

// ListEvents prints the USDT probes of prog, one per line: provider:name,
// the operand string, and "(semaphore)" for a probe behind one.
func ListEvents(prog string, w io.Writer) error {
	path, err := lookPath(prog)
	if err != nil {
		return err
	}
	f, err := elfx.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", prog, err)
	}
	if f.ProbeErr != nil {
		return fmt.Errorf("%s: %w", prog, f.ProbeErr)
	}
	if len(f.Probes) == 0 {
		fmt.Fprintf(w, "# %s has no USDT probes (.note.stapsdt)\n", prog)
		return nil
	}
	for _, p := range f.Probes {
		sem := ""
		if p.Semaphore != 0 {
			sem = " (semaphore)"
		}
		fmt.Fprintf(w, "%s\t%s%s\n", p.FullName(), p.Args, sem)
	}
	return nil
}
