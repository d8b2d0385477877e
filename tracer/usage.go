package tracer

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// A process's peak RSS for the resource reports' summary (UsageSink):
// VmHWM (proc(5)) read at each of its threads' exit events, while its
// memory is still there. Not wait4's ru_maxrss: an exec keeps the larger
// of the old and the new image's, and the image before the exec was
// rtrace's own, shared through vfork (docs/REPORTS.md, "The summary").

// noteHWM reads th's process's VmHWM at th's exit event.
func (t *Tracer) noteHWM(th *thread) {
	if t.res == nil || th.proc == nil {
		return
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", th.tid))
	if err != nil {
		return
	}
	if kb, ok := parseHWM(b); ok {
		th.proc.peakRSS = max(th.proc.peakRSS, kb<<10)
	}
}

// parseHWM finds the "VmHWM:    1234 kB" line of a status file (proc(5)).
func parseHWM(status []byte) (kb uint64, ok bool) {
	for line := range bytes.Lines(status) {
		rest, found := bytes.CutPrefix(line, []byte("VmHWM:"))
		if !found {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, false
		}
		n, err := strconv.ParseUint(string(f[0]), 10, 64)
		if err != nil || n > 1<<53 {
			return 0, false
		}
		return n, true
	}
	return 0, false
}
