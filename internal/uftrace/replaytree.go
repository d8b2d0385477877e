package uftrace

import (
	"fmt"
	"sort"
	"strings"
)

// ReplayTrees reduces `uftrace replay -f tid` output (a duration column
// before the tid may be there too) to the shape of each task's call tree:
// its entry lines, indented by depth, one block per task, blocks sorted
// (tids and thread interleaving differ between runs). Closing lines,
// events and durations are dropped.
//
// With keep nil every call stays at its replay indentation. With keep set,
// only the calls of the functions it accepts stay, and their depths are
// recounted among them: a dropped call between two kept ones (a library
// call one tracer records and another does not) does not count.
func ReplayTrees(replay string, keep func(name string) bool) []string {
	// task is one task's tree so far, with the indents of the kept calls
	// open above the next line.
	type task struct {
		text strings.Builder
		open []int
	}
	tasks := map[string]*task{}
	for _, line := range strings.Split(replay, "\n") {
		head, body, ok := strings.Cut(line, "] | ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		tid := strings.TrimSpace(head[strings.LastIndexByte(head, '[')+1:])
		fn := strings.TrimSpace(body)
		if fn == "" || strings.HasPrefix(fn, "}") || strings.HasPrefix(fn, "/*") {
			continue
		}
		indent := len(body) - len(strings.TrimLeft(body, " "))
		fn = strings.TrimSuffix(strings.TrimSuffix(fn, " {"), ";")
		if keep != nil && !keep(strings.TrimSuffix(fn, "()")) {
			continue
		}
		tk := tasks[tid]
		if tk == nil {
			tk = &task{}
			tasks[tid] = tk
		}
		if keep != nil {
			for len(tk.open) > 0 && tk.open[len(tk.open)-1] >= indent {
				tk.open = tk.open[:len(tk.open)-1]
			}
			tk.open = append(tk.open, indent)
			indent = 2 * (len(tk.open) - 1)
		}
		fmt.Fprintf(&tk.text, "%s%s\n", strings.Repeat(" ", indent), fn)
	}
	out := make([]string, 0, len(tasks))
	for _, tk := range tasks {
		out = append(out, tk.text.String())
	}
	sort.Strings(out)
	return out
}

// WithoutPgStartup drops from the trees of a -pg build what -pg itself
// adds before main: gmon's __monstartup() and the __cxa_atexit() that
// registers _mcleanup. The result is sorted again.
func WithoutPgStartup(trees []string) []string {
	out := make([]string, len(trees))
	for i, tr := range trees {
		out[i] = strings.Replace(tr, "__monstartup()\n__cxa_atexit()\n", "", 1)
	}
	sort.Strings(out)
	return out
}
