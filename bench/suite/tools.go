package suite

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"rtrace/internal/elfx"
)

// Tool is one way of running a workload: untraced, rtrace, or a peer as
// its users run it.
type Tool struct {
	Name string
	Kind Kind
	Bin  string // the command it needs ("" for the program itself)
	Pkg  string // the Debian package that has it
	PG   bool   // runs the -pg build (uftrace's compiler instrumentation)
	// Argv runs prog with args, writing any trace into out (a new empty
	// directory); bin is the tool's path.
	Argv func(bin, prog string, args []string, out string) []string
	// Dir says the trace is a uftrace.data directory out/data.
	Dir bool
	Env []string // added to the environment
	// Skip, when set, says why the tool cannot measure prog ("": it can).
	Skip func(prog string) string
}

// untraced is the baseline every row is compared with.
var untraced = Tool{Name: "untraced", Argv: func(_, prog string, args []string, _ string) []string {
	return append([]string{prog}, args...)
}}

func with(prog string, args []string, argv ...string) []string {
	return append(append(argv, prog), args...)
}

// Tools lists the tools of both kinds, rtrace first. rtrace is the binary
// the bench measures.
func Tools(rtrace string) []Tool {
	return []Tool{
		{Name: "rtrace", Kind: Functions, Bin: rtrace, Dir: true, Argv: func(bin, prog string, args []string, out string) []string {
			return with(prog, args, bin, "record", "-q", "--engine=fast", "-d", filepath.Join(out, "data"), "--")
		}},
		{Name: "rtrace int3", Kind: Functions, Bin: rtrace, Dir: true, Argv: func(bin, prog string, args []string, out string) []string {
			return with(prog, args, bin, "record", "-q", "--engine=int3", "-d", filepath.Join(out, "data"), "--")
		}},
		{Name: "uftrace -pg", Kind: Functions, Bin: "uftrace", Pkg: "uftrace", PG: true, Dir: true, Argv: func(bin, prog string, args []string, out string) []string {
			return with(prog, args, bin, "record", "-d", filepath.Join(out, "data"))
		}},
		{Name: "uftrace -P .", Kind: Functions, Bin: "uftrace", Pkg: "uftrace", Dir: true, Argv: func(bin, prog string, args []string, out string) []string {
			return with(prog, args, bin, "record", "-P", ".", "-d", filepath.Join(out, "data"))
		}},
		{Name: "ltrace -x", Kind: Functions, Bin: "ltrace", Pkg: "ltrace", Argv: func(bin, prog string, args []string, out string) []string {
			return with(prog, args, bin, "-x", "*@MAIN", "-o", filepath.Join(out, "ltrace.txt"))
		}},
		{Name: "bpftrace", Kind: Functions, Bin: "bpftrace", Pkg: "bpftrace", Argv: bpftraceArgv, Skip: bpftraceSkip,
			Env: []string{fmt.Sprintf("BPFTRACE_MAX_PROBES=%d", 2*maxUprobeFuncs)}},
		// -v for its line on the backtraces that needed a stop; a fixed
		// layout (setarch -R: sp-rtrace has no --no-randomize-addr) so that
		// its backtraces' addresses are rtrace remote's.
		{Name: "rtrace", Kind: Memory, Bin: rtrace, Argv: spRtrace, Env: []string{"RTRACE_RES_UNWIND="}},
		// Every backtrace taken at a stop by rtrace's remote unwinder: the
		// reference the in-process walks must equal, address for address.
		{Name: "rtrace remote", Kind: Memory, Bin: rtrace, Argv: spRtrace, Env: []string{"RTRACE_RES_UNWIND=remote"}},
		{Name: "ltrace -e", Kind: Memory, Bin: "ltrace", Pkg: "ltrace", Argv: func(bin, prog string, args []string, out string) []string {
			return with(prog, args, bin, "-e", "malloc+free", "-o", filepath.Join(out, "ltrace.txt"))
		}},
		{Name: "heaptrack", Kind: Memory, Bin: "heaptrack", Pkg: "heaptrack", Argv: func(bin, prog string, args []string, out string) []string {
			return with(prog, args, bin, "-o", filepath.Join(out, "heaptrack"))
		}},
		{Name: "memcheck", Kind: Memory, Bin: "valgrind", Pkg: "valgrind", Argv: func(bin, prog string, args []string, out string) []string {
			return with(prog, args, bin, "--tool=memcheck", "--leak-check=full", "--log-file="+filepath.Join(out, "memcheck.txt"))
		}},
		{Name: "bpftrace", Kind: Memory, Bin: "bpftrace", Pkg: "bpftrace", Argv: bpftraceMemArgv, Skip: bpftraceMemSkip},
		// A big program's start-up: its allocations (sp-rtrace -x, as its
		// users start a program), and every function entry and exit.
		{Name: "rtrace", Kind: Startup, Bin: rtrace, Argv: func(bin, prog string, args []string, out string) []string {
			return with(prog, args, bin, "sp-rtrace", "-v", "-e", "memory", "-s", "-o", out, "-x")
		}},
		{Name: "rtrace record", Kind: Startup, Bin: rtrace, Dir: true, Argv: func(bin, prog string, args []string, out string) []string {
			return with(prog, args, bin, "record", "-q", "-d", filepath.Join(out, "data"), "--")
		}},
		{Name: "heaptrack", Kind: Startup, Bin: "heaptrack", Pkg: "heaptrack", Argv: func(bin, prog string, args []string, out string) []string {
			return with(prog, args, bin, "-o", filepath.Join(out, "heaptrack"))
		}},
	}
}

// spRtrace is rtrace's resource tracing of memory as sp-rtrace's users
// run it, with -v, and without address space randomization.
func spRtrace(bin, prog string, args []string, out string) []string {
	setarch, err := exec.LookPath("setarch")
	if err != nil {
		setarch = "setarch"
	}
	return with(prog, args, setarch, "x86_64", "-R", bin, "sp-rtrace", "-v", "-e", "memory", "-s", "-o", out, "--")
}

// duBytes is the size of everything under dir.
func duBytes(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return nil
	})
	return n
}

// rawTrace finds rtrace's raw resource trace in out.
func rawTrace(out string) string {
	m, _ := filepath.Glob(filepath.Join(out, "*.rtrace"))
	for _, f := range m {
		if !strings.HasSuffix(f, ".txt") {
			return f
		}
	}
	return ""
}

// bpftraceArgv counts every entry and return of the program's functions
// with uprobes and uretprobes, as a bpftrace user would. The probes are
// listed (a wildcard also takes symbols of size 0, which bpftrace refuses)
// and are on the file, so the program runs from a script (bpftrace -c
// splits its command at spaces, and arguments may hold some).
func bpftraceArgv(bin, prog string, args []string, out string) []string {
	// Its inputs go beside out: out holds what the tool writes.
	in := out + ".in"
	os.MkdirAll(in, 0o755)
	script := filepath.Join(in, "run.sh")
	quoted := []string{"exec", shellQuote(prog)}
	for _, a := range args {
		quoted = append(quoted, shellQuote(a))
	}
	os.WriteFile(script, []byte(strings.Join(quoted, " ")+"\n"), 0o755)
	var entries, exits []string
	for _, name := range uprobeFuncs(prog) {
		entries = append(entries, "uprobe:"+prog+":"+name)
		exits = append(exits, "uretprobe:"+prog+":"+name)
	}
	bt := filepath.Join(in, "count.bt")
	os.WriteFile(bt, []byte(strings.Join(entries, ",\n")+" { @calls = count(); }\n"+strings.Join(exits, ",\n")+" { @returns = count(); }\n"), 0o644)
	return []string{bin, bt, "-c", "/bin/sh " + script}
}

// bpftraceMemArgv counts the program's mallocs, by backtrace (ustack(10),
// as a bpftrace user looking for leaks would), and its frees, with a
// uprobe on each of libc's two functions: the probes are on libc, for
// every process, so they keep the program's pid only (cpid: the program
// runs from a script that execs it, as in bpftraceArgv). The counts go to
// out/bpftrace.txt at the end.
func bpftraceMemArgv(bin, prog string, args []string, out string) []string {
	in := out + ".in"
	os.MkdirAll(in, 0o755)
	script := filepath.Join(in, "run.sh")
	quoted := []string{"exec", shellQuote(prog)}
	for _, a := range args {
		quoted = append(quoted, shellQuote(a))
	}
	os.WriteFile(script, []byte(strings.Join(quoted, " ")+"\n"), 0o755)
	libc := libcPath()
	bt := filepath.Join(in, "malloc.bt")
	os.WriteFile(bt, []byte(fmt.Sprintf(`uprobe:%[1]s:malloc /pid == cpid/ { @mallocs = count(); @stacks[ustack(10)] = count(); }
uprobe:%[1]s:free /pid == cpid/ { @frees = count(); }
`, libc)), 0o644)
	return []string{bin, "-o", filepath.Join(out, "bpftrace.txt"), bt, "-c", "/bin/sh " + script}
}

// libcPath is the C library the programs run with, "" if none is found.
func libcPath() string {
	for _, p := range []string{"/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6", "/lib64/libc.so.6", "/usr/lib64/libc.so.6"} {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
	}
	return ""
}

func bpftraceMemSkip(string) string {
	switch {
	case os.Geteuid() != 0:
		return "bpftrace loads BPF programs and uprobes: it needs root"
	case libcPath() == "":
		return "no libc.so.6 found to put the uprobes on"
	}
	return ""
}

// bpftraceCounts reads the mallocs and frees bpftraceMemArgv counted;
// ok is false when its output has neither.
func bpftraceCounts(r io.Reader) (mallocs, frees int64, ok bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		for _, c := range []struct {
			prefix string
			n      *int64
		}{{"@mallocs: ", &mallocs}, {"@frees: ", &frees}} {
			if v, found := strings.CutPrefix(sc.Text(), c.prefix); found {
				if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n >= 0 {
					*c.n, ok = n, true
				}
			}
		}
	}
	return mallocs, frees, ok
}

// uprobeFuncs lists the functions of prog bpftrace can probe.
func uprobeFuncs(prog string) []string {
	f, err := elfx.Open(prog)
	if err != nil {
		return nil
	}
	var names []string
	for _, fn := range f.Funcs {
		if fn.Size > 0 && plainName.MatchString(fn.Name) {
			names = append(names, fn.Name)
		}
	}
	return names
}

// maxUprobeFuncs bounds the functions bpftrace is run on. Each uprobe is
// registered and unregistered one by one (kernel/events/uprobes.c); with
// thousands of them, attaching takes minutes, and so does the kernel's
// clean-up after a stopped bpftrace, which holds up the next runs.
const maxUprobeFuncs = 512

func bpftraceSkip(prog string) string {
	if n := len(uprobeFuncs(prog)); n > maxUprobeFuncs {
		return fmt.Sprintf("%d functions, over %d: attaching (and detaching) a uprobe and a uretprobe on each takes minutes", n, maxUprobeFuncs)
	}
	return ""
}

// plainName is a symbol bpftrace takes in a probe without quoting.
var plainName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
