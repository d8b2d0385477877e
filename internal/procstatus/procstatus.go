// Package procstatus reads what rtrace needs of /proc/PID/status
// (proc(5)).
package procstatus

import (
	"bytes"
	"strconv"
)

// HWM finds the "VmHWM:    1234 kB" line of a status file, the process's
// peak resident set size, and returns it in bytes; false when there is
// none (a kernel thread) or it is not a size in kB up to 2^40 kB.
func HWM(status []byte) (int64, bool) {
	for line := range bytes.Lines(status) {
		rest, found := bytes.CutPrefix(line, []byte("VmHWM:"))
		if !found {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil || kb < 0 || kb > 1<<40 {
			return 0, false
		}
		return kb << 10, true
	}
	return 0, false
}
