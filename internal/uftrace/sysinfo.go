package uftrace

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// FillSystemInfo sets the cpuinfo, meminfo, osinfo and loadinfo fields of in
// from this machine, the way uftrace record does. Missing sources leave
// their fields empty (the groups are then left out of the info file).
func FillSystemInfo(in *Info) {
	in.CPUOnline = runtime.NumCPU()
	in.CPUPossible = in.CPUOnline
	if b, err := os.ReadFile("/sys/devices/system/cpu/possible"); err == nil {
		if n := parseCPURange(string(b)); n > 0 {
			in.CPUPossible = n
		}
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		in.CPUDesc = parseCPUDesc(b)
	}
	if in.CPUDesc == "" {
		in.CPUDesc = runtime.GOARCH
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		in.MemInfo = parseMemInfo(b)
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		in.Kernel = unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:])
		in.Hostname = unix.ByteSliceToString(u.Nodename[:])
		in.Distro = `"Linux"`
		if b, err := os.ReadFile("/etc/os-release"); err == nil {
			if d := parseDistro(b); d != "" {
				in.Distro = d
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			in.LoadInfo = f[0] + " / " + f[1] + " / " + f[2]
		}
	}
}

// parseCPURange counts the CPUs of a list like "0-3,5".
func parseCPURange(s string) int {
	n := 0
	for _, part := range strings.Split(strings.TrimSpace(s), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0
			}
		}
		n += b - a + 1
	}
	return n
}

func parseCPUDesc(b []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func parseMemInfo(b []byte) string {
	var total, free float64
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "MemTotal:":
			total = v
		case "MemAvailable:":
			free = v
		}
	}
	if total == 0 {
		return ""
	}
	const gb = 1024 * 1024 // kB per GB
	return fmt.Sprintf("%.1f / %.1f GB (free / total)", free/gb, total/gb)
}

func parseDistro(b []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "PRETTY_NAME="); ok && !strings.ContainsAny(v, "\n") {
			if !strings.HasPrefix(v, `"`) {
				v = `"` + v + `"`
			}
			return v
		}
	}
	return ""
}

// UsageFromRusage converts a child's rusage into usageinfo values.
func UsageFromRusage(ru *unix.Rusage) *Usage {
	return &Usage{
		SysTime:  float64(ru.Stime.Sec) + float64(ru.Stime.Usec)/1e6,
		UsrTime:  float64(ru.Utime.Sec) + float64(ru.Utime.Usec)/1e6,
		CtxSwVol: ru.Nvcsw, CtxSwIn: ru.Nivcsw,
		MaxRSS: ru.Maxrss,
		MajFlt: ru.Majflt, MinFlt: ru.Minflt,
		InBlock: ru.Inblock, OutBlock: ru.Oublock,
	}
}
