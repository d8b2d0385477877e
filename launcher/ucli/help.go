package ucli

import (
	"fmt"
	"io"
	"strings"
)

// Help writes `rtrace record --help` (verb "record") or `rtrace live
// --help`: uftrace's options in uftrace's groups, each with what rtrace
// does with it, then rtrace's own.
func Help(w io.Writer, verb string) {
	switch verb {
	case "script":
		fmt.Fprint(w, `Usage: rtrace script -S SCRIPT --record [OPTION...] [--] PROG [ARGS...]
       rtrace script -S SCRIPT [OPTION...]   (uftrace script on a trace)

With --record, records PROG's function calls as 'rtrace record' does, with
the options SCRIPT's "# uftrace-option: ..." lines add (Lua: "-- ..."), then
runs SCRIPT on the trace with 'uftrace script', as 'uftrace script --record'
does. Without --record it is the installed 'uftrace script'. rtrace exits
with PROG's exit code, else the script's.

  rtrace script -S count.py --record ./prog
`)
	case "live":
		fmt.Fprint(w, `Usage: rtrace live [OPTION...] [--] PROG [ARGS...]
       rtrace [OPTION...] PROG [ARGS...]

Records PROG's function calls into a temporary uftrace.data directory, as
'rtrace record' does, then shows them with 'uftrace replay' and its display
options, and removes the directory: what 'uftrace live' (and 'uftrace PROG')
does, with no -pg and no recompiling.
`)
	default:
		fmt.Fprint(w, `Usage: rtrace record [OPTION...] [--] PROG [ARGS...]

Runs PROG under ptrace and records every function entry and exit of it into
a uftrace.data directory that uftrace reads (replay, report, graph, tui,
dump): what 'uftrace record' does, with no -pg, no -finstrument-functions,
no LD_PRELOAD and no recompiling. The options are uftrace's: the same
letters with the same meaning, spelled as uftrace takes them (-D3, -P.,
--depth=3, -la, unique prefixes of long names). A PROG without a slash is
looked for in the current directory, then in PATH, as uftrace does.
Options come before PROG: the words after it are PROG's own.

Beyond uftrace: a stripped PROG is traced through the functions its
.eh_frame bounds, named func_<address> ('rtrace resolve -i DIR' names them
from a debug file when one is installed); a script PROG (#!) is traced
through the programs it runs, its interpreter left out.

rtrace exits with PROG's exit code (128+N when a signal N killed it). An
existing output directory is renamed to DIR.old. Ctrl-C or SIGTERM kills
PROG and keeps everything recorded so far.

  rtrace record -d out.data ./prog arg1 arg2
  uftrace replay -d out.data
`)
	}
	for _, g := range []group{recordGroup, commonGroup, configGroup, globalGroup, displayGroup, rtraceGroup, resourceGroup} {
		fmt.Fprintf(w, "\n %s:\n", groupTitles[g])
		for i := range table {
			o := &table[i]
			if o.group != g {
				continue
			}
			writeOption(w, o)
		}
	}
	fmt.Fprint(w, `
The options of uftrace's other commands (report's -s, --avg-total, ...) are
accepted and ignored, as uftrace record does. [not yet] marks uftrace's
options rtrace does not do yet: they are refused with the reason, as are
those that cannot apply to it. Patterns follow uftrace: a pattern with regex
characters (.?*+-^$|()[]{}) is a regular expression found anywhere in the
name; one without matches one name exactly; --match=glob makes them globs.
C++ functions match by their short demangled name or their symbol.
Resource tracing with sp-rtrace's letters (-e memory -s -b 10 -P OPTS -o DIR)
is 'rtrace sp-rtrace'.
`)
}

// writeOption writes one option's lines of --help.
func writeOption(w io.Writer, o *option) {
	var b strings.Builder
	b.WriteString("  ")
	if o.short != 0 {
		fmt.Fprintf(&b, "-%c, ", o.short)
	} else {
		b.WriteString("    ")
	}
	b.WriteString("--" + o.long)
	if o.arg != "" {
		b.WriteString("=" + o.arg)
	}
	head := b.String()
	text := o.help
	switch o.kind {
	case notYet:
		text += " [not yet: " + o.why + "]"
	case refused:
		text += " [refused: " + o.why + "]"
	case inert:
		text += " [accepted, no effect: " + o.why + "]"
	default:
		if o.why != "" {
			text += " [" + o.why + "]"
		}
	}
	lines := wrap(text, 50)
	if len(head) >= 30 {
		fmt.Fprintln(w, head)
		head = ""
	}
	for i, l := range lines {
		if i > 0 {
			head = ""
		}
		fmt.Fprintf(w, "%-30s%s\n", head, l)
	}
}

// wrap splits text into lines of at most width bytes, at spaces.
func wrap(text string, width int) []string {
	var lines []string
	var cur strings.Builder
	for _, word := range strings.Fields(text) {
		if cur.Len() > 0 && cur.Len()+1+len(word) > width {
			lines = append(lines, cur.String())
			cur.Reset()
		}
		if cur.Len() > 0 {
			cur.WriteByte(' ')
		}
		cur.WriteString(word)
	}
	if cur.Len() > 0 {
		lines = append(lines, cur.String())
	}
	return lines
}

// UsageLine is --usage's text.
func UsageLine(verb string) string {
	if verb == "script" {
		return "Usage: rtrace script -S SCRIPT --record [OPTION...] [--] PROG [ARGS...]  (rtrace script --help for the options)"
	}
	if verb == "live" {
		return "Usage: rtrace live [OPTION...] [--] PROG [ARGS...]  (rtrace live --help for the options)"
	}
	return "Usage: rtrace record [OPTION...] [--] PROG [ARGS...]  (rtrace record --help for the options)"
}

// Markdown writes the table of uftrace's options and what rtrace does
// with each, for the README (TestReadmeTable keeps the two the same).
func Markdown(w io.Writer) {
	fmt.Fprintln(w, "| option | in `rtrace record` |")
	fmt.Fprintln(w, "|---|---|")
	for _, g := range []group{recordGroup, commonGroup, configGroup, globalGroup, displayGroup, otherGroup} {
		for i := range table {
			o := &table[i]
			if o.group != g {
				continue
			}
			name := "`--" + o.long + "`"
			if o.short != 0 {
				name = fmt.Sprintf("`-%c`, %s", o.short, name)
			}
			status := "✓"
			switch {
			case o.group == displayGroup:
				status = "✓ display: `rtrace live` passes it to `uftrace replay`"
			case o.kind == inert:
				status = "✓, no effect: " + o.why
			case o.kind == notYet:
				status = "not yet: " + o.why
			case o.kind == refused:
				status = "refused: " + o.why
			case o.why != "":
				status = "✓ (" + o.why + ")"
			}
			fmt.Fprintf(w, "| %s | %s |\n", name, strings.ReplaceAll(status, "|", `\|`))
		}
	}
}
