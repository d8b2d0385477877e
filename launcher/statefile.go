package launcher

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// State files (docs/RELIABILITY.md, "State files"): the files in FIFODir
// that `rtrace toggle` reads (<pid>.on, <pid>.ctl, <pid>.target) end with
// the rtrace that wrote them, its pid and its start time (proc(5),
// /proc/PID/stat field 22). An rtrace that was killed leaves its files
// behind; a reader that finds their owner gone, or another process under
// its pid, takes them for absent and removes them, whatever process
// has the target's pid now.

// ownerStamp is this rtrace's stamp: "PID START".
var ownerStamp = sync.OnceValue(func() string {
	pid := os.Getpid()
	st, _ := startTime(pid)
	return fmt.Sprintf("%d %d", pid, st)
})

// startTime is process pid's start time, in clock ticks after boot
// (/proc/PID/stat field 22): with the pid, it names one process.
func startTime(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return statStart(b)
}

// statStart reads field 22 (starttime) of a /proc/PID/stat line.
func statStart(b []byte) (uint64, error) {
	// The command name (field 2) is in parentheses and may hold anything,
	// ')' and spaces too: the fields after the last ')' start at field 3.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat line: no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc stat line: %d fields, want at least 22", len(f)+2)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// writeState writes the state file path: fields, then this rtrace's
// stamp. Whole or not at all: written beside it, then renamed over it, so
// that a reader (readState, which removes what it cannot read) never
// sees it half-written.
func writeState(path string, fields ...string) error {
	text := strings.Join(append(fields, ownerStamp()), " ") + "\n"
	tmp := path + ".tmp" + strconv.Itoa(os.Getpid())
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// readState returns the fields of the state file path before its owner's
// stamp, and false when there is none or its owner is gone: a stale file,
// removed then.
func readState(path string) ([]string, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 || !ownerLive(f[len(f)-2], f[len(f)-1]) {
		os.Remove(path)
		return nil, false
	}
	return f[:len(f)-2], true
}

// ownerLive reports whether the process of a stamp (its pid and start
// time, as text) still runs.
func ownerLive(pid, start string) bool {
	p, err1 := strconv.Atoi(pid)
	s, err2 := strconv.ParseUint(start, 10, 64)
	if err1 != nil || err2 != nil || p <= 0 {
		return false
	}
	if p == os.Getpid() {
		return true
	}
	now, err := startTime(p)
	return err == nil && now == s
}

// sweepStale removes the state files in dir whose owner is gone.
func sweepStale(dir string) {
	for _, ext := range []string{".on", ".ctl", ".target"} {
		names, _ := filepath.Glob(filepath.Join(dir, "*"+ext))
		for _, n := range names {
			readState(n)
		}
	}
}
