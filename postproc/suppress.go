package postproc

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"

	"rtrace/internal/trace"
)

// Leak suppressions (docs/REPORTS.md, "Suppressions"): leaks a report
// leaves out and counts apart. A user's file is in the LeakSanitizer
// format heaptrack reads (one "leak:PATTERN" a line, # comments). A
// pattern matches a leak when it matches the function, the source file or
// the module of any frame of its backtrace, as heaptrack matches them. The
// built-in ones are glibc's own allocations that live until the process
// ends (memcheck has glibc free them at exit, __libc_freeres, and reports
// none of them), matched on the frames' functions; they apply to memory
// only.

// builtinSuppressions are the allocating functions of glibc's (and glib's)
// buffers that live until the process ends: heaptrack's built-in list
// (src/analyze/suppressions.cpp, builtinSuppressions) and the NSS and
// stdio ones a sqlite3 shell leaves (getpwuid's static buffer, the NSS
// modules and actions, stdio's buffers).
var builtinSuppressions = []string{
	// heaptrack's
	"__nss_module_allocate", "__gconv_read_conf", "__new_exitfn", "tzset_internal", "dl_open_worker",
	"g_main_context_new", "g_thread_self",
	// glibc: freed by __libc_freeres, which memcheck runs at exit
	"__nss_action_allocate", "global_state_allocate", "_IO_file_doallocate",
	"^getpwuid$", "^getpwnam$", "^getgrgid$", "^getgrnam$", "^gethostbyname$", "^getservbyname$", "^getprotobyname$",
	// the DTV of a thread's stack glibc caches for the next thread
	// (nptl/allocatestack.c), freed by __libc_freeres too
	"_dl_allocate_tls",
}

// Suppressions are the patterns a leak report leaves out.
type Suppressions struct {
	User    []string // leak:PATTERN lines of the user's file
	Builtin bool     // glibc's own (builtinSuppressions)
}

// ParseSuppressions reads a suppression file: "leak:PATTERN" lines, "#"
// comments and blank lines; an error names the first other line.
func ParseSuppressions(b []byte) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	n := 1
	for ; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || l[0] == '#' {
			continue
		}
		p, ok := strings.CutPrefix(l, "leak:")
		if !ok || strings.TrimSpace(p) == "" {
			return nil, fmt.Errorf("line %d: %q is not a leak:PATTERN suppression (LeakSanitizer's format)", n, l)
		}
		out = append(out, strings.TrimSpace(p))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", n, err)
	}
	return out, nil
}

// Any says whether s suppresses anything.
func (s *Suppressions) Any() bool { return s != nil && (s.Builtin || len(s.User) > 0) }

// match returns the pattern that suppresses a leak with frames, each
// located by loc ("" for none); memory says whether it is a memory leak
// (the built-ins are glibc's memory).
func (s *Suppressions) match(frames []trace.Frame, memory bool, loc func(trace.Frame) trace.Location) string {
	if !s.Any() {
		return ""
	}
	for _, f := range frames {
		l := loc(f)
		if s.Builtin && memory {
			for _, p := range builtinSuppressions {
				if templateMatch(p, l.Func) {
					return p
				}
			}
		}
		for _, p := range s.User {
			if templateMatch(p, l.Func) || templateMatch(p, l.File) || templateMatch(p, l.Module) {
				return p
			}
		}
	}
	return ""
}

// builtin says whether a built-in suppression matches a memory block
// with frames: one of glibc's own, which memcheck's __libc_freeres frees
// before its leak check (the leak kinds leave them out of the scan).
func (s *Suppressions) builtin(frames []trace.Frame, loc func(trace.Frame) trace.Location) bool {
	if s == nil || !s.Builtin {
		return false
	}
	for _, f := range frames {
		l := loc(f)
		for _, p := range builtinSuppressions {
			if templateMatch(p, l.Func) {
				return true
			}
		}
	}
	return false
}

// templateMatch is LeakSanitizer's pattern match as heaptrack applies
// it (matchesSuppression: equal, or compiler-rt's TemplateMatch): the
// pattern's pieces between '*'s are found in order in str, each at its
// first place after the last; '^' first anchors the first piece at str's
// start, '$' ends the match at str's end (unless a '*' came just before).
// Without them a pattern matches anywhere in str. An empty str matches
// nothing.
func templateMatch(templ, str string) bool {
	if str == "" {
		return false
	}
	if templ == str {
		return true
	}
	start := strings.HasPrefix(templ, "^")
	if start {
		templ = templ[1:]
	}
	asterisk := false
	for templ != "" {
		switch templ[0] {
		case '*':
			templ, start, asterisk = templ[1:], false, true
			continue
		case '$':
			return str == "" || asterisk
		}
		if str == "" {
			return false
		}
		n := strings.IndexAny(templ, "*$")
		if n < 0 {
			n = len(templ)
		}
		i := strings.Index(str, templ[:n])
		if i < 0 || start && i != 0 {
			return false
		}
		str, templ = str[i+n:], templ[n:]
		start, asterisk = false, false
	}
	return true
}

// frameLocation is a frame's place from its text, as the resolver prints
// it ("name() at file.c:12", "name() from /lib/x.so", "from /lib/x.so",
// "in ??"): for a trace resolved already, when no resolver locates it.
func frameLocation(text string) trace.Location {
	var l trace.Location
	if m, ok := strings.CutPrefix(text, "from "); ok {
		l.Module = m
		return l
	}
	name := text
	if n, rest, ok := strings.Cut(text, " at "); ok {
		name = n
		l.File, _, _ = strings.Cut(rest, ":")
	} else if n, rest, ok := strings.Cut(text, " from "); ok {
		name, l.Module = n, rest
	}
	if strings.HasPrefix(name, "in ") {
		name = ""
	}
	l.Func = strings.TrimSuffix(name, "()")
	return l
}
