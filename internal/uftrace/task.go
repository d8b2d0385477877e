package uftrace

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// TaskKind is the kind of a task.txt line.
type TaskKind string

// The task.txt line kinds.
const (
	KindSess TaskKind = "SESS"
	KindTask TaskKind = "TASK"
	KindFork TaskKind = "FORK"
	KindDlop TaskKind = "DLOP"
)

// TaskEvent is one line of task.txt. Which fields are meaningful depends on Kind:
//
//	SESS: Time, Pid, SID, Exename       (a process image: start or exec)
//	TASK: Time, Tid, Pid                 (a thread, or the first task of a session)
//	FORK: Time, Pid (child), PPid
//	DLOP: Time, Tid, SID, Base, Exename  (a library loaded with dlopen)
type TaskEvent struct {
	Kind    TaskKind
	Time    uint64
	Pid     int
	Tid     int
	PPid    int
	SID     string
	Exename string
	Base    uint64
}

// FormatTime renders a nanosecond timestamp as uftrace does: sec.nsec.
func FormatTime(t uint64) string {
	return fmt.Sprintf("%d.%09d", t/1e9, t%1e9)
}

// String renders the event as a task.txt line, without the newline.
func (e TaskEvent) String() string {
	ts := FormatTime(e.Time)
	switch e.Kind {
	case KindSess:
		return fmt.Sprintf("SESS timestamp=%s pid=%d sid=%s exename=\"%s\"", ts, e.Pid, e.SID, e.Exename)
	case KindTask:
		return fmt.Sprintf("TASK timestamp=%s tid=%d pid=%d", ts, e.Tid, e.Pid)
	case KindFork:
		return fmt.Sprintf("FORK timestamp=%s pid=%d ppid=%d", ts, e.Pid, e.PPid)
	case KindDlop:
		return fmt.Sprintf("DLOP timestamp=%s tid=%d sid=%s base=%x libname=\"%s\"", ts, e.Tid, e.SID, e.Base, e.Exename)
	}
	return "# unknown task event " + string(e.Kind)
}

func parseTime(s string) (uint64, error) {
	sec, nsec, ok := strings.Cut(s, ".")
	if !ok || sec == "" || nsec == "" || len(nsec) > 9 {
		return 0, fmt.Errorf("bad timestamp %q", s)
	}
	a, err := strconv.ParseUint(sec, 10, 64)
	if err != nil || a > (1<<63)/1000000000 {
		return 0, fmt.Errorf("bad timestamp %q", s)
	}
	b, err := strconv.ParseUint(nsec+strings.Repeat("0", 9-len(nsec)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad timestamp %q", s)
	}
	return a*1e9 + b, nil
}

// ParseTaskLine parses one task.txt line.
func ParseTaskLine(line string) (TaskEvent, error) {
	kind, rest, _ := strings.Cut(line, " ")
	e := TaskEvent{Kind: TaskKind(kind)}
	var need []string
	switch e.Kind {
	case KindSess:
		need = []string{"timestamp", "pid", "sid", "exename"}
	case KindTask:
		need = []string{"timestamp", "tid", "pid"}
	case KindFork:
		need = []string{"timestamp", "pid", "ppid"}
	case KindDlop:
		need = []string{"timestamp", "tid", "sid", "base", "libname"}
	default:
		return e, fmt.Errorf("unknown line type %q", truncate(kind, 20))
	}
	fields := map[string]string{}
	for rest != "" {
		k, v, ok := strings.Cut(rest, "=")
		if !ok {
			return e, fmt.Errorf("%s: field %q without '='", kind, truncate(rest, 30))
		}
		if strings.HasPrefix(v, `"`) {
			// Quoted path: runs to the last quote of the line (paths may hold spaces).
			end := strings.LastIndexByte(v, '"')
			if end == 0 {
				return e, fmt.Errorf("%s: unterminated quote in %s", kind, k)
			}
			fields[k] = v[1:end]
			rest = strings.TrimLeft(v[end+1:], " ")
			continue
		}
		v, rest, _ = strings.Cut(v, " ")
		fields[k] = v
	}
	for _, k := range need {
		if _, ok := fields[k]; !ok {
			return e, fmt.Errorf("%s: missing %s=", kind, k)
		}
	}
	var err error
	if e.Time, err = parseTime(fields["timestamp"]); err != nil {
		return e, fmt.Errorf("%s: %w", kind, err)
	}
	num := func(k string) int {
		v, ok := fields[k]
		if !ok || err != nil {
			return 0
		}
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 0 {
			err = fmt.Errorf("%s: bad %s=%q", kind, k, truncate(v, 20))
		}
		return n
	}
	for _, k := range need { // fields other kinds use are ignored
		switch k {
		case "pid":
			e.Pid = num(k)
		case "tid":
			e.Tid = num(k)
		case "ppid":
			e.PPid = num(k)
		}
	}
	if err != nil {
		return e, err
	}
	e.SID = fields["sid"]
	if e.Kind == KindDlop {
		e.Exename = fields["libname"]
		if e.Base, err = strconv.ParseUint(fields["base"], 16, 64); err != nil {
			return e, fmt.Errorf("DLOP: bad base=%q", truncate(fields["base"], 20))
		}
	} else {
		e.Exename = fields["exename"]
	}
	return e, nil
}

// ParseTaskFile parses a whole task.txt. Errors name the line number.
func ParseTaskFile(r io.Reader) ([]TaskEvent, error) {
	var out []TaskEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		e, err := ParseTaskLine(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}
