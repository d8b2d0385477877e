package tracer

import (
	"fmt"
	"os"

	"rtrace/internal/procstatus"
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
	if n, ok := procstatus.HWM(b); ok {
		th.proc.peakRSS = max(th.proc.peakRSS, uint64(n))
	}
}
