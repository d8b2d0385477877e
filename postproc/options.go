package postproc

import (
	"fmt"

	"github.com/kballard/go-shellquote"
	"os"
	"slices"
	"strconv"
	"strings"

	"rtrace/internal/trace"
)

// Options selects the filters Run applies. The zero value passes every
// item through unchanged (but for the header's filter field, see Run).
type Options struct {
	Leaks    bool   // -l: keep only allocations never released
	Compress bool   // -c: group calls by backtrace
	Sort     string // -s: order of the groups: size, size-asc (default), count, count-asc
	// Keep redoes the leaks and compress filters the input had (the
	// resolver's pass-through: its output keeps the input's form).
	Keep bool

	Context  *uint32 // -C: keep calls whose context has a bit of the mask; 0: calls without context
	Resource uint32  // -R: keep calls of these resource types (bit 1<<(ID-1)); 0: all
	Depth    *int    // -b: cut backtraces to this many frames

	Include map[int]bool // --include: keep only calls with these indexes
	Exclude map[int]bool // --exclude: drop the calls with these indexes
	// CallAddress (--call-address): keep calls whose backtrace has a frame
	// in one of the ranges.
	CallAddress []AddrRange

	RemoveArgs bool // -a: drop call arguments

	// Summary (--summary): print the heap's summary of the whole trace
	// only (summary.go), as heaptrack_print's last lines.
	Summary bool

	// Suppressions (--suppressions FILE): leak:PATTERN lines a leak
	// report leaves out (suppress.go); NoBuiltin: not glibc's own too
	// (built in, for raw inputs).
	Suppressions []string
	NoBuiltin    bool
	// LeakKinds (--leak-kinds, memcheck's --show-leak-kinds): the kinds
	// of leaks -l shows, a set of 1<<LeakKind; nil: all (leakkinds.go).
	LeakKinds *uint8

	// HTML (--html): write the trace's page instead (html.go).
	HTML bool
	// Diff (--diff BASE, with --summary): what changed from the trace
	// BASE (diff.go).
	Diff string
	// At (--at T[,T2], with --summary): the summary of the trace up to
	// T, or what changed from T to T2 (diff.go).
	At []Moment

	// Flame (--flamegraph COST): draw the allocation sites' flame graph
	// of cost (FlameCosts) as SVG instead.
	Flame string

	// Funcs are the uftrace filters (-F, -N, -D, -t, --max-stack, --tid)
	// of a uftrace.data input.
	Funcs FuncOptions

	// Resolve (-r) sets each unresolved frame's Text from Resolver and adds
	// "resolve" to the header's filter. The caller supplies the Resolver.
	Resolve  bool
	Resolver Resolver

	// Callees, when set, names a call of a function glibc exports under
	// two names (open and open64, mmap and mmap64...) by the name its
	// caller called it by, from the call instruction before its first
	// frame: rtrace's breakpoint is on the one function, which sp-rtrace's
	// preloaded wrappers of each name told apart (Aliases).
	Callees Callees
}

// Callees names the function the call instruction before a return address
// calls through its module's PLT or GOT (resolver.Resolver.Callee).
type Callees interface {
	AddMapping(m trace.Mapping)
	Callee(ret uint64) string
}

// Aliases are the groups of names glibc gives one function on x86-64
// (the *64 large-file names are the same functions there), which
// sp-rtrace's modules wrap one by one.
var Aliases = [][]string{
	{"open", "open64"}, {"openat", "openat64"}, {"creat", "creat64"},
	{"fopen", "fopen64"}, {"freopen", "freopen64"}, {"tmpfile", "tmpfile64"},
	{"mmap", "mmap64"},
}

// aliased holds the names of Aliases.
var aliased = func() map[string]bool {
	m := map[string]bool{}
	for _, g := range Aliases {
		for _, n := range g {
			m[n] = true
		}
	}
	return m
}()

// aliasOf returns the name of name's group that callee is, "" when callee
// is no other name of it.
func aliasOf(name, callee string) string {
	if callee == "" || callee == name {
		return ""
	}
	for _, g := range Aliases {
		if slices.Contains(g, name) && slices.Contains(g, callee) {
			return callee
		}
	}
	return ""
}

// Resolver turns backtrace addresses into names. It is implemented by the
// resolver stage and injected by the caller (stages do not import each
// other).
type Resolver interface {
	// AddMapping registers a mapping of the traced process.
	AddMapping(m trace.Mapping)
	// Frame is the text printed after "0x<addr> " ("main() at leaky.c:12",
	// "from /lib/libc.so.6", "in ??"); "" leaves the frame unresolved.
	Frame(addr uint64) string
}

// AddrRange is a --call-address range: Size bytes from Start, an address
// of the object Lib as nm prints it (link-time), or an absolute address
// when Lib is "".
type AddrRange struct {
	Lib         string
	Start, Size uint64
}

// Sort orders.
const (
	SortSize     = "size"      // total size, largest first
	SortSizeAsc  = "size-asc"  // total size, smallest first (the default)
	SortCount    = "count"     // number of calls, most first
	SortCountAsc = "count-asc" // number of calls, fewest first
)

// ParseOptions parses sp-rtrace-postproc options, as the pre-processor's
// -P "-l -c -r" passes them: short options alone or clustered (-lc, -C0,
// -s count), long ones (--filter-leaks, --sort=count, --include FILE).
// --include and --exclude read their file (one call index a line). An
// error names the option.
func ParseOptions(args []string) (Options, error) {
	return parseOptions(args, inP, os.ReadFile)
}

// ParseOptionString splits s into words as a shell does (quotes and
// backslashes honoured: -P "--include 'my calls.txt'") and parses them.
func ParseOptionString(s string) (Options, error) {
	args, err := shellquote.Split(s)
	if err != nil {
		return Options{}, fmt.Errorf("options %q: %w", s, err)
	}
	return ParseOptions(args)
}

// Option is one post-processor option: the table the CLI builds its flags
// from and the parsers read, so that a flag, a word of -P "OPTS" and a
// stream header's filters mean the same.
type Option struct {
	Short    byte   // 0: none
	Long     string // the name after --
	Arg      string // the value's name in help ("MASK"); "": a switch
	Usage    string
	Category string // CategoryResource or CategoryFunc
	Repeat   bool   // may be given more than once, each value kept
	Default  string // what the help says when the option is not given
	scope    scope
}

// Option categories: what kind of trace an option filters.
const (
	CategoryResource = "resource traces"
	CategoryFunc     = "uftrace.data input"
)

// scope says where an option may be written.
type scope uint8

const (
	inCLI  scope = 1 << iota // a flag of rtrace postproc
	inP                      // a word of -P "OPTS" (sp-rtrace-postproc's syntax)
	inFunc                   // a function trace stream's filters (FuncOptions.String)
)

var options = []Option{
	{Short: 'l', Long: "filter-leaks", Usage: "keep only allocations never released", Category: CategoryResource, scope: inCLI | inP},
	{Short: 'c', Long: "compress", Usage: "group calls with identical backtraces", Category: CategoryResource, scope: inCLI | inP},
	{Short: 's', Long: "sort", Arg: "ORDER", Usage: "order -c groups by `ORDER`: size, size-asc, count or count-asc", Default: "size-asc", Category: CategoryResource, scope: inCLI | inP},
	{Short: 'C', Long: "context", Arg: "MASK", Usage: "keep calls in the contexts of hex `MASK` (0: calls without context)", Category: CategoryResource, scope: inCLI | inP},
	{Short: 'R', Long: "resource", Arg: "MASK", Usage: "keep calls of the resource types of hex `MASK` (<1>, <2>, <4>...)", Category: CategoryResource, scope: inCLI | inP},
	{Short: 'b', Long: "backtrace-depth", Arg: "N", Usage: "cut backtraces to `N` frames", Category: CategoryResource, scope: inCLI | inP},
	{Long: "include", Arg: "FILE", Usage: "keep only the calls whose indexes `FILE` lists (one a line)", Category: CategoryResource, scope: inCLI | inP},
	{Long: "exclude", Arg: "FILE", Usage: "drop the calls whose indexes `FILE` lists (one a line)", Category: CategoryResource, scope: inCLI | inP},
	{Long: "call-address", Arg: "RANGE", Repeat: true, Usage: "keep calls whose backtrace passes through `LIB:START+SIZE` (hex link-time addresses, as nm prints them; repeatable)", Category: CategoryResource, scope: inCLI | inP},
	{Short: 'r', Long: "resolve", Usage: "resolve backtrace addresses to functions and source lines", Category: CategoryResource, scope: inCLI | inP},
	{Short: 'a', Long: "remove-args", Usage: "drop call arguments", Category: CategoryResource, scope: inCLI | inP},
	{Long: "suppressions", Arg: "FILE", Usage: "leave out of leak reports the leaks `FILE` names (LeakSanitizer's format, as heaptrack reads: leak:PATTERN lines matched against the functions, files and modules of each backtrace)", Category: CategoryResource, scope: inCLI | inP},
	{Long: "disable-builtin-suppressions", Usage: "report glibc's own allocations that live until the process ends too (stdio buffers, NSS modules...; memcheck has glibc free them at exit)", Category: CategoryResource, scope: inCLI | inP},
	{Long: "leak-kinds", Arg: "KINDS", Usage: "with -l, show the leaks of `KINDS` only, memcheck's --show-leak-kinds: a comma list of definite, indirect, possible, reachable, or all (the default), or none; a raw trace's leaks are classified from rtrace's scan of the program's memory at its end, as memcheck's leak check does", Category: CategoryResource, scope: inCLI | inP},
	{Long: "flamegraph", Arg: "COST", Usage: "draw a flame graph of the allocations' `COST` as self-contained SVG (hover: frame, cost, share; click: zoom): allocations, temporary, leaked or peak (bytes held at the heap's peak), heaptrack's cost types", Category: CategoryResource, scope: inCLI},
	{Long: "html", Usage: "write one self-contained HTML page of a raw trace: the summary with the leak kinds, the backtraces that leaked, peaked, churned and called most (file:line), the four flame graphs, the timeline (totals, lifetimes) and the leak report, largest first", Category: CategoryResource, scope: inCLI},
	{Long: "diff", Arg: "BASE", Usage: "with --summary: what changed from the raw trace `BASE` to this one, as heaptrack_print --diff: the totals' changes, then the backtraces (matched by function, file and line) whose leaks, peak, temporary allocations and calls grew most, then shrank", Category: CategoryResource, scope: inCLI},
	{Long: "at", Arg: "T[,T2]", Usage: "with --summary: the summary of the trace up to the moment `T` (its \"leaks\" are the blocks allocated then), or with two moments what changed from T to T2 in this one trace, as --diff shows it: what grew, by backtrace; a moment is +[HH:][MM:]SS[.sss] from the first allocation, or a time of day [HH:][MM:]SS[.sss]", Category: CategoryResource, scope: inCLI},
	{Long: "summary", Usage: "print the heap's summary, heaptrack_print's totals (calls to allocation functions, temporary allocations, peak heap, peak RSS, leaked) and memcheck's total heap usage, then the backtraces that leaked most, held most at the peak, made most temporary allocations and most calls (-r: with file:line); a leak report of a raw trace opens with the totals", Category: CategoryResource, scope: inCLI},
	{Short: 't', Long: "text", Category: CategoryResource, scope: inP},  // sp-rtrace: the output is text anyway
	{Short: 'q', Long: "quiet", Category: CategoryResource, scope: inP}, // sp-rtrace: no progress to hide
	{Short: 'F', Long: "filter", Arg: "FUNC", Repeat: true, Usage: "keep only `FUNC` and what it calls (repeatable)", Category: CategoryFunc, scope: inCLI | inFunc},
	{Short: 'N', Long: "notrace", Arg: "FUNC", Repeat: true, Usage: "drop `FUNC` and what it calls (repeatable)", Category: CategoryFunc, scope: inCLI | inFunc},
	{Short: 'D', Long: "depth", Arg: "N", Usage: "keep calls less than `N` levels deep", Category: CategoryFunc, scope: inCLI | inFunc},
	{Short: 't', Long: "time-filter", Arg: "TIME", Usage: "drop calls shorter than `TIME` (100us, 2ms, 1s; a bare number is ns)", Category: CategoryFunc, scope: inCLI | inFunc},
	{Short: 'T', Long: "trigger", Arg: "FUNC@ACT", Repeat: true, Usage: "uftrace's triggers on what is kept: `FUNC@ACT`[,ACT...] with depth=N, time=T, filter, notrace, hide, caller, trace, trace_on, trace_off, finish (repeatable)", Category: CategoryFunc, scope: inCLI | inFunc},
	{Short: 'H', Long: "hide", Arg: "FUNC", Repeat: true, Usage: "drop `FUNC` but keep what it calls, a level up (repeatable)", Category: CategoryFunc, scope: inCLI | inFunc},
	{Long: "disable", Usage: "start with tracing off, until a trace_on trigger (-T FUNC@trace_on)", Category: CategoryFunc, scope: inCLI | inFunc},
	{Long: "caller-filter", Arg: "FUNC", Repeat: true, Usage: "keep only the calls of `FUNC` and the calls they are made in (uftrace's -C; repeatable)", Category: CategoryFunc, scope: inCLI | inFunc},
	{Long: "max-stack", Arg: "N", Usage: "drop calls `N` or more recorded levels deep", Category: CategoryFunc, scope: inCLI | inFunc},
	{Long: "tid", Arg: "TID[,TID...]", Repeat: true, Usage: "keep only the threads `TID[,TID...]` (repeatable)", Category: CategoryFunc, scope: inCLI | inFunc},
	{Long: "srcline", Category: CategoryFunc, scope: inFunc},               // record --srcline: write .dbg files
	{Long: "with-syms", Arg: "DIR", Category: CategoryFunc, scope: inFunc}, // record --with-syms: .sym files from DIR
}

// Flags is the table of rtrace postproc's options, in help order.
func Flags() []Option {
	var list []Option
	for _, o := range options {
		if o.scope&inCLI != 0 {
			list = append(list, o)
		}
	}
	return list
}

// Set applies the option long (a name of Flags) with its value ("" for
// a switch), as a flag of the postproc command. Check ends the list.
func (o *Options) Set(long, val string) error {
	opt, ok := findOption(0, long, inCLI)
	if !ok {
		return fmt.Errorf("unknown option --%s", long)
	}
	name := "--" + long
	if opt.Short != 0 {
		name = "-" + string(opt.Short)
	}
	return o.set(opt, name, val, os.ReadFile)
}

// Check validates what the options say together, once all are set.
func (o *Options) Check() error {
	if n := btoi(o.Summary) + btoi(o.Flame != "") + btoi(o.HTML); n > 1 {
		return fmt.Errorf("options --summary, --flamegraph and --html write different things: give one")
	}
	if (o.Summary || o.Flame != "" || o.HTML) && (o.Leaks || o.Compress || o.Sort != "" || o.Context != nil || o.Resource != 0 || o.Depth != nil ||
		o.Include != nil || o.Exclude != nil || len(o.CallAddress) > 0 || o.RemoveArgs) {
		return fmt.Errorf("options --summary, --flamegraph and --html sum up the whole trace: they take no other resource filter but -r and the suppressions (a leak report, -l, opens with the summary)")
	}
	if o.Diff != "" && !o.Summary {
		return fmt.Errorf("option --diff compares the summaries of two traces: it needs --summary")
	}
	if o.At != nil && !o.Summary {
		return fmt.Errorf("option --at takes the summary at a moment: it needs --summary")
	}
	if o.At != nil && o.Diff != "" {
		return fmt.Errorf("options --diff and --at: --diff BASE compares two traces at their ends, --at T,T2 two moments of one trace; give one")
	}
	if o.LeakKinds != nil && !o.Leaks {
		return fmt.Errorf("option --leak-kinds chooses among the leaks: it needs -l/--filter-leaks")
	}
	if o.Sort != "" && !o.Compress {
		return fmt.Errorf("option -s/--sort orders compressed groups: it needs -c/--compress")
	}
	return nil
}

func parseOptions(args []string, in scope, readFile func(string) ([]byte, error)) (Options, error) {
	var o Options
	for i := 0; i < len(args); i++ {
		a := args[i]
		// next takes the value of an option from the following word.
		next := func(name string) (string, error) {
			if i+1 >= len(args) {
				return "", fmt.Errorf("option %s needs a value", name)
			}
			i++
			return args[i], nil
		}
		switch {
		case strings.HasPrefix(a, "--") && len(a) > 2:
			name, val, hasVal := strings.Cut(a[2:], "=")
			opt, ok := findOption(0, name, in)
			if !ok {
				return o, fmt.Errorf("unknown option --%s", name)
			}
			if opt.Arg == "" && hasVal {
				return o, fmt.Errorf("option --%s takes no value", name)
			}
			if opt.Arg != "" && !hasVal {
				v, err := next("--" + name)
				if err != nil {
					return o, err
				}
				val = v
			}
			if err := o.set(opt, "--"+name, val, readFile); err != nil {
				return o, err
			}
		case strings.HasPrefix(a, "-") && len(a) > 1 && a != "--":
			for j := 1; j < len(a); j++ {
				opt, ok := findOption(a[j], "", in)
				if !ok {
					return o, fmt.Errorf("unknown option -%c", a[j])
				}
				name, val := "-"+string(a[j]), ""
				if opt.Arg != "" {
					val = a[j+1:]
					if val == "" {
						v, err := next(name)
						if err != nil {
							return o, err
						}
						val = v
					}
					j = len(a)
				}
				if err := o.set(opt, name, val, readFile); err != nil {
					return o, err
				}
			}
		default:
			return o, fmt.Errorf("unexpected argument %q (post-processor options start with -)", a)
		}
	}
	return o, o.Check()
}

func findOption(short byte, long string, in scope) (Option, bool) {
	for _, opt := range options {
		if opt.scope&in != 0 && (short != 0 && opt.Short == short || long != "" && opt.Long == long) {
			return opt, true
		}
	}
	return Option{}, false
}

// set applies one option; name is how it was written, for errors.
func (o *Options) set(opt Option, name, val string, readFile func(string) ([]byte, error)) error {
	var err error
	switch opt.Long {
	case "filter-leaks":
		o.Leaks = true
	case "compress":
		o.Compress = true
	case "resolve":
		o.Resolve = true
	case "remove-args":
		o.RemoveArgs = true
	case "summary":
		o.Summary = true
	case "flamegraph":
		if !slices.Contains(FlameCosts, val) {
			return fmt.Errorf("option %s: unknown cost %q (%s)", name, val, strings.Join(FlameCosts, ", "))
		}
		o.Flame = val
	case "sort":
		switch val {
		case SortSize, SortSizeAsc, SortCount, SortCountAsc:
			o.Sort = val
		default:
			return fmt.Errorf("option %s: unknown order %q (size, size-asc, count or count-asc)", name, val)
		}
	case "context":
		var m uint32
		m, err = parseMask(val)
		o.Context = &m
	case "resource":
		o.Resource, err = parseMask(val)
	case "backtrace-depth":
		var n int
		n, err = strconv.Atoi(val)
		if err != nil || n < 0 {
			return fmt.Errorf("option %s: %q is not a frame count (0 or more)", name, val)
		}
		o.Depth = &n
	case "suppressions":
		var b []byte
		if b, err = readFile(val); err == nil {
			o.Suppressions, err = ParseSuppressions(b)
			if err != nil {
				err = fmt.Errorf("%s: %w", val, err)
			}
		}
	case "disable-builtin-suppressions":
		o.NoBuiltin = true
	case "html":
		o.HTML = true
	case "diff":
		if val == "" {
			return fmt.Errorf("option %s: name the base trace", name)
		}
		o.Diff = val
	case "at":
		o.At, err = ParseMoments(val)
	case "leak-kinds":
		var k uint8
		if k, err = ParseLeakKinds(val); err != nil {
			return fmt.Errorf("option %s: %w", name, err)
		}
		o.LeakKinds = &k
	case "include":
		o.Include, err = readIndexes(val, readFile)
	case "exclude":
		o.Exclude, err = readIndexes(val, readFile)
	case "call-address":
		var r AddrRange
		r, err = ParseAddrRange(val)
		o.CallAddress = append(o.CallAddress, r)
	case "text", "quiet":
	default:
		err = o.Funcs.set(opt.Long, val)
	}
	if err != nil {
		return fmt.Errorf("option %s: %w", name, err)
	}
	return nil
}

// parseMask reads a hex mask, with or without 0x, as sp-rtrace's %x did.
func parseMask(s string) (uint32, error) {
	v, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X"), 16, 32)
	if err != nil || s == "" {
		return 0, fmt.Errorf("%q is not a hex mask (e.g. 3 or 0x3)", s)
	}
	return uint32(v), nil
}

// ParseAddrRange reads LIB:START+SIZE, the output of sp-rtrace's
// rtrace-function-address (hex numbers as nm prints them, 0x optional).
// Without "LIB:" the range is absolute.
func ParseAddrRange(s string) (AddrRange, error) {
	var r AddrRange
	nums := s
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		r.Lib, nums = s[:i], s[i+1:]
	}
	start, size, ok := strings.Cut(nums, "+")
	a, err1 := strconv.ParseUint(strings.TrimPrefix(start, "0x"), 16, 64)
	n, err2 := strconv.ParseUint(strings.TrimPrefix(size, "0x"), 16, 64)
	if !ok || err1 != nil || err2 != nil || n == 0 || a+n < a {
		return r, fmt.Errorf("%q is not LIB:START+SIZE (hex, e.g. /usr/lib/libfoo.so:1a40+3c)", s)
	}
	r.Start, r.Size = a, n
	return r, nil
}

// readIndexes reads a file of call indexes, one a line (blank lines and
// lines starting with # are skipped).
func readIndexes(path string, readFile func(string) ([]byte, error)) (map[int]bool, error) {
	b, err := readFile(path)
	if err != nil {
		return nil, err
	}
	set := map[int]bool{}
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i, err := strconv.Atoi(line)
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %q is not a call index", path, n+1, line)
		}
		set[i] = true
	}
	return set, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
