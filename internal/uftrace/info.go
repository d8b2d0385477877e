package uftrace

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// Feature bits of the info header (uftrace.h, enum uftrace_feat_bits).
const (
	FeatPLTHook        uint64 = 1 << 0
	FeatTaskSession    uint64 = 1 << 1
	FeatKernel         uint64 = 1 << 2
	FeatArgument       uint64 = 1 << 3
	FeatRetval         uint64 = 1 << 4
	FeatSymRelAddr     uint64 = 1 << 5
	FeatMaxStack       uint64 = 1 << 6
	FeatEvent          uint64 = 1 << 7
	FeatPerfEvent      uint64 = 1 << 8
	FeatAutoArgs       uint64 = 1 << 9
	FeatDebugInfo      uint64 = 1 << 10
	FeatEstimateReturn uint64 = 1 << 11

	// BaseFeatures is what every rtrace directory sets.
	BaseFeatures = FeatTaskSession | FeatSymRelAddr | FeatMaxStack
)

// Info mask bits: each one announces a group of info lines, in this order.
const (
	InfoExeName uint64 = 1 << iota
	InfoBuildID
	InfoExitStatus
	InfoCmdline
	InfoCPU
	InfoMem
	InfoOS
	InfoTask
	InfoUsage
	InfoLoad
	InfoArgSpec
	InfoRecordDate
	InfoPatternType
	InfoVersion
)

const (
	infoMagic      = "Ftrace!\x00"
	infoVersion    = 4
	infoHeaderSize = 40
	// DefaultMaxStack is the reader's shadow-stack size when nothing else is set.
	DefaultMaxStack = 1024
)

// Usage is the target's resource usage (usageinfo lines).
type Usage struct {
	SysTime, UsrTime  float64 // seconds
	CtxSwVol, CtxSwIn int64
	MaxRSS            int64 // KiB
	MajFlt, MinFlt    int64
	InBlock, OutBlock int64
}

// ArgSpecLine is one line of the argspec group, e.g. Key "argspec",
// Value "add@arg1,arg2". Key "auto-args" has Value "1".
type ArgSpecLine struct{ Key, Value string }

// Info is the content of the info file. Each optional group is written only
// when its field is set; TaskIDs is always written.
type Info struct {
	Features uint64
	MaxStack uint16

	ExeName     string
	BuildID     string // 40 hex digits
	ExitStatus  *int   // raw wait status
	Cmdline     string
	CPUOnline   int
	CPUPossible int
	CPUDesc     string
	MemInfo     string // "<free> / <total> GB (free / total)"
	Kernel      string
	Hostname    string
	Distro      string // with quotes, as os-release has it
	TaskIDs     []int
	Usage       *Usage
	LoadInfo    string // "a / b / c"
	ArgSpecs    []ArgSpecLine
	RecordDate  string // ctime form
	Elapsed     string // "<s>.<ns> sec"
	PatternType string
	Version     string
}

// mask returns the info mask the set fields call for.
func (in *Info) mask() uint64 {
	var m uint64
	set := func(bit uint64, ok bool) {
		if ok {
			m |= bit
		}
	}
	set(InfoExeName, in.ExeName != "")
	set(InfoBuildID, in.BuildID != "")
	set(InfoExitStatus, in.ExitStatus != nil)
	set(InfoCmdline, in.Cmdline != "")
	set(InfoCPU, in.CPUOnline > 0)
	set(InfoMem, in.MemInfo != "")
	set(InfoOS, in.Kernel != "")
	m |= InfoTask
	set(InfoUsage, in.Usage != nil)
	set(InfoLoad, in.LoadInfo != "")
	set(InfoArgSpec, len(in.ArgSpecs) > 0)
	set(InfoRecordDate, in.RecordDate != "")
	set(InfoPatternType, in.PatternType != "")
	set(InfoVersion, in.Version != "")
	return m
}

// MarshalBinary encodes the info file: the 40-byte header, then the lines.
func (in *Info) MarshalBinary() ([]byte, error) {
	maxStack := in.MaxStack
	if maxStack == 0 {
		maxStack = DefaultMaxStack
	}
	b := make([]byte, 0, 1024)
	b = append(b, infoMagic...)
	b = binary.LittleEndian.AppendUint32(b, infoVersion)
	b = binary.LittleEndian.AppendUint16(b, infoHeaderSize)
	b = append(b, 1, 2) // little endian, 64-bit class
	b = binary.LittleEndian.AppendUint64(b, in.Features)
	mask := in.mask()
	b = binary.LittleEndian.AppendUint64(b, mask)
	b = binary.LittleEndian.AppendUint16(b, maxStack)
	b = append(b, 0, 0, 0, 0, 0, 0)

	line := func(format string, args ...any) {
		b = fmt.Appendf(b, format, args...)
		b = append(b, '\n')
	}
	for _, s := range []string{in.ExeName, in.Cmdline, in.CPUDesc, in.Kernel, in.Hostname, in.Distro, in.RecordDate, in.Version} {
		if strings.ContainsAny(s, "\n") {
			return nil, fmt.Errorf("info value %q contains a newline", s)
		}
	}
	if mask&InfoExeName != 0 {
		line("exename:%s", in.ExeName)
	}
	if mask&InfoBuildID != 0 {
		line("build_id:%s", in.BuildID)
	}
	if mask&InfoExitStatus != 0 {
		line("exit_status:%d", *in.ExitStatus)
	}
	if mask&InfoCmdline != 0 {
		line("cmdline:%s", in.Cmdline)
	}
	if mask&InfoCPU != 0 {
		line("cpuinfo:lines=2")
		line("cpuinfo:nr_cpus=%d / %d (online/possible)", in.CPUOnline, in.CPUPossible)
		line("cpuinfo:desc=%s", in.CPUDesc)
	}
	if mask&InfoMem != 0 {
		line("meminfo:%s", in.MemInfo)
	}
	if mask&InfoOS != 0 {
		line("osinfo:lines=3")
		line("osinfo:kernel=%s", in.Kernel)
		line("osinfo:hostname=%s", in.Hostname)
		line("osinfo:distro=%s", in.Distro)
	}
	line("taskinfo:lines=2")
	line("taskinfo:nr_tid=%d", len(in.TaskIDs))
	tids := make([]string, len(in.TaskIDs))
	for i, t := range in.TaskIDs {
		tids[i] = strconv.Itoa(t)
	}
	line("taskinfo:tids=%s", strings.Join(tids, ","))
	if u := in.Usage; u != nil {
		line("usageinfo:lines=6")
		line("usageinfo:systime=%.6f", u.SysTime)
		line("usageinfo:usrtime=%.6f", u.UsrTime)
		line("usageinfo:ctxsw=%d / %d (voluntary / involuntary)", u.CtxSwVol, u.CtxSwIn)
		line("usageinfo:maxrss=%d", u.MaxRSS)
		line("usageinfo:pagefault=%d / %d (major / minor)", u.MajFlt, u.MinFlt)
		line("usageinfo:iops=%d / %d (read / write)", u.InBlock, u.OutBlock)
	}
	if mask&InfoLoad != 0 {
		line("loadinfo:%s", in.LoadInfo)
	}
	if mask&InfoArgSpec != 0 {
		line("argspec:lines=%d", len(in.ArgSpecs))
		for _, a := range in.ArgSpecs {
			if strings.ContainsAny(a.Value, "\n") {
				return nil, fmt.Errorf("argspec value %q contains a newline", a.Value)
			}
			line("%s:%s", a.Key, a.Value)
		}
	}
	if mask&InfoRecordDate != 0 {
		line("record_date:%s", in.RecordDate)
		line("elapsed_time:%s", in.Elapsed)
	}
	if mask&InfoPatternType != 0 {
		line("pattern_type:%s", in.PatternType)
	}
	if mask&InfoVersion != 0 {
		line("uftrace_version:%s", in.Version)
	}
	return b, nil
}

// InfoError reports an info file that breaks the format; Line is 0 for the header.
type InfoError struct {
	Line int
	Msg  string
}

func (e *InfoError) Error() string {
	if e.Line == 0 {
		return "header: " + e.Msg
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
}

// ParseInfo decodes an info file. It accepts every line group uftrace v0.13
// writes and fails, naming the line, on a group of the wrong shape.
func ParseInfo(data []byte) (*Info, error) {
	if len(data) < infoHeaderSize {
		return nil, &InfoError{0, fmt.Sprintf("%d bytes, want at least %d", len(data), infoHeaderSize)}
	}
	if string(data[:8]) != infoMagic {
		return nil, &InfoError{0, fmt.Sprintf("bad magic %q", data[:8])}
	}
	if v := binary.LittleEndian.Uint32(data[8:]); v < 3 || v > infoVersion {
		return nil, &InfoError{0, fmt.Sprintf("unsupported version %d", v)}
	}
	hsize := int(binary.LittleEndian.Uint16(data[12:]))
	if hsize < infoHeaderSize || hsize > len(data) {
		return nil, &InfoError{0, fmt.Sprintf("bad header size %d", hsize)}
	}
	if data[14] != 1 || data[15] != 2 {
		return nil, &InfoError{0, fmt.Sprintf("unsupported endian/class %d/%d (want little-endian 64-bit)", data[14], data[15])}
	}
	in := &Info{
		Features: binary.LittleEndian.Uint64(data[16:]),
		MaxStack: binary.LittleEndian.Uint16(data[32:]),
	}
	mask := binary.LittleEndian.Uint64(data[24:])
	p := &infoParser{sc: bufio.NewScanner(bytes.NewReader(data[hsize:]))}
	p.sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	if err := p.parse(in, mask); err != nil {
		return nil, err
	}
	return in, nil
}

type infoParser struct {
	sc   *bufio.Scanner
	line int
}

// next returns the value of the next line, which must start with prefix.
func (p *infoParser) next(prefix string) (string, error) {
	if !p.sc.Scan() {
		if err := p.sc.Err(); err != nil {
			return "", &InfoError{p.line + 1, err.Error()}
		}
		return "", &InfoError{p.line + 1, fmt.Sprintf("missing %q line", prefix)}
	}
	p.line++
	s := p.sc.Text()
	if !strings.HasPrefix(s, prefix) {
		return "", &InfoError{p.line, fmt.Sprintf("want %q line, got %q", prefix, truncate(s, 60))}
	}
	return s[len(prefix):], nil
}

// lines reads a "<group>:lines=N" line and returns N.
func (p *infoParser) lines(group string, max int) (int, error) {
	v, err := p.next(group + ":lines=")
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > max {
		return 0, &InfoError{p.line, fmt.Sprintf("bad %s line count %q", group, v)}
	}
	return n, nil
}

func (p *infoParser) scan(prefix, format string, args ...any) error {
	v, err := p.next(prefix)
	if err != nil {
		return err
	}
	if _, err := fmt.Sscanf(v, format, args...); err != nil {
		return &InfoError{p.line, fmt.Sprintf("%s%s: %v", prefix, truncate(v, 60), err)}
	}
	return nil
}

func (p *infoParser) parse(in *Info, mask uint64) error {
	var err error
	if mask&InfoExeName != 0 {
		if in.ExeName, err = p.next("exename:"); err != nil {
			return err
		}
	}
	if mask&InfoBuildID != 0 {
		if in.BuildID, err = p.next("build_id:"); err != nil {
			return err
		}
	}
	if mask&InfoExitStatus != 0 {
		var st int
		if err := p.scan("exit_status:", "%d", &st); err != nil {
			return err
		}
		in.ExitStatus = &st
	}
	if mask&InfoCmdline != 0 {
		if in.Cmdline, err = p.next("cmdline:"); err != nil {
			return err
		}
	}
	if mask&InfoCPU != 0 {
		n, err := p.lines("cpuinfo", 64)
		if err != nil {
			return err
		}
		if n != 2 {
			return &InfoError{p.line, fmt.Sprintf("cpuinfo has %d lines, want 2", n)}
		}
		if err := p.scan("cpuinfo:nr_cpus=", "%d / %d (online/possible)", &in.CPUOnline, &in.CPUPossible); err != nil {
			return err
		}
		if in.CPUDesc, err = p.next("cpuinfo:desc="); err != nil {
			return err
		}
	}
	if mask&InfoMem != 0 {
		if in.MemInfo, err = p.next("meminfo:"); err != nil {
			return err
		}
	}
	if mask&InfoOS != 0 {
		n, err := p.lines("osinfo", 64)
		if err != nil {
			return err
		}
		if n != 3 {
			return &InfoError{p.line, fmt.Sprintf("osinfo has %d lines, want 3", n)}
		}
		if in.Kernel, err = p.next("osinfo:kernel="); err != nil {
			return err
		}
		if in.Hostname, err = p.next("osinfo:hostname="); err != nil {
			return err
		}
		if in.Distro, err = p.next("osinfo:distro="); err != nil {
			return err
		}
	}
	if mask&InfoTask != 0 {
		if err := p.parseTasks(in); err != nil {
			return err
		}
	}
	if mask&InfoUsage != 0 {
		n, err := p.lines("usageinfo", 64)
		if err != nil {
			return err
		}
		if n != 6 {
			return &InfoError{p.line, fmt.Sprintf("usageinfo has %d lines, want 6", n)}
		}
		u := &Usage{}
		for _, f := range []struct {
			prefix, format string
			args           []any
		}{
			{"usageinfo:systime=", "%f", []any{&u.SysTime}},
			{"usageinfo:usrtime=", "%f", []any{&u.UsrTime}},
			{"usageinfo:ctxsw=", "%d / %d (voluntary / involuntary)", []any{&u.CtxSwVol, &u.CtxSwIn}},
			{"usageinfo:maxrss=", "%d", []any{&u.MaxRSS}},
			{"usageinfo:pagefault=", "%d / %d (major / minor)", []any{&u.MajFlt, &u.MinFlt}},
			{"usageinfo:iops=", "%d / %d (read / write)", []any{&u.InBlock, &u.OutBlock}},
		} {
			if err := p.scan(f.prefix, f.format, f.args...); err != nil {
				return err
			}
		}
		in.Usage = u
	}
	if mask&InfoLoad != 0 {
		if in.LoadInfo, err = p.next("loadinfo:"); err != nil {
			return err
		}
	}
	if mask&InfoArgSpec != 0 {
		n, err := p.lines("argspec", 1024)
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if !p.sc.Scan() {
				return &InfoError{p.line + 1, fmt.Sprintf("argspec: %d of %d lines present", i, n)}
			}
			p.line++
			k, v, ok := strings.Cut(p.sc.Text(), ":")
			switch {
			case !ok:
				return &InfoError{p.line, "argspec line without ':'"}
			case k == "argspec" || k == "retspec" || k == "argauto" || k == "retauto" || k == "enumauto" || k == "auto-args":
			default:
				return &InfoError{p.line, fmt.Sprintf("unknown argspec key %q", truncate(k, 40))}
			}
			in.ArgSpecs = append(in.ArgSpecs, ArgSpecLine{k, v})
		}
	}
	if mask&InfoRecordDate != 0 {
		if in.RecordDate, err = p.next("record_date:"); err != nil {
			return err
		}
		if in.Elapsed, err = p.next("elapsed_time:"); err != nil {
			return err
		}
	}
	if mask&InfoPatternType != 0 {
		if in.PatternType, err = p.next("pattern_type:"); err != nil {
			return err
		}
	}
	if mask&InfoVersion != 0 {
		if in.Version, err = p.next("uftrace_version:"); err != nil {
			return err
		}
	}
	return nil
}

func (p *infoParser) parseTasks(in *Info) error {
	n, err := p.lines("taskinfo", 64)
	if err != nil {
		return err
	}
	if n != 2 {
		return &InfoError{p.line, fmt.Sprintf("taskinfo has %d lines, want 2", n)}
	}
	var nr int
	if err := p.scan("taskinfo:nr_tid=", "%d", &nr); err != nil {
		return err
	}
	v, err := p.next("taskinfo:tids=")
	if err != nil {
		return err
	}
	for _, f := range strings.Split(v, ",") {
		if f == "" && nr == 0 {
			break // no task yet (the info a recorder streams at its start)
		}
		tid, err := strconv.Atoi(f)
		if err != nil || tid <= 0 {
			return &InfoError{p.line, fmt.Sprintf("bad tid %q", truncate(f, 20))}
		}
		in.TaskIDs = append(in.TaskIDs, tid)
	}
	if len(in.TaskIDs) != nr {
		return &InfoError{p.line, fmt.Sprintf("nr_tid=%d but %d tids listed", nr, len(in.TaskIDs))}
	}
	return nil
}

// DbgSpecs reports whether argspec lines take specs from the .dbg A:/R:
// lines: auto-args:1, or an argspec or retspec pattern without '@' (-A
// FUNC, -R FUNC: the specs DWARF gives FUNC).
func DbgSpecs(lines []ArgSpecLine) bool {
	for _, a := range lines {
		switch a.Key {
		case "auto-args":
			if a.Value == "1" {
				return true
			}
		case "argspec", "retspec":
			for _, part := range strings.Split(a.Value, ";") {
				if strings.TrimSpace(part) != "" && !strings.Contains(part, "@") {
					return true
				}
			}
		}
	}
	return false
}

// AutoArgs reports whether the argspec lines enable .dbg argument specs (auto-args:1).
func (in *Info) AutoArgs() bool {
	for _, a := range in.ArgSpecs {
		if a.Key == "auto-args" && a.Value == "1" {
			return true
		}
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// Cmdline is a command line as uftrace 0.13 writes it in info: the words
// joined by spaces, newlines made spaces, double quotes escaped (cmds/info.c,
// fill_cmdline; utils/utils.c, json_quote), so that uftrace dump --chrome
// can put it in a JSON string.
func Cmdline(argv []string) string {
	s := strings.ReplaceAll(strings.Join(argv, " "), "\n", " ")
	return strings.ReplaceAll(s, `"`, `\"`)
}
