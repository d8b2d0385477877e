package suite

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Kind is what a workload exercises, and so which tools run it.
type Kind int

const (
	Functions Kind = iota // every function entry and exit
	Memory                // malloc and free, and the leaks at the end
	// Startup is a big program's short run: what setting up the tracing
	// of large modules costs (g++: cc1plus has 49,000 functions).
	Startup
)

// Workload is one program run the same way under every tool.
type Workload struct {
	Name string // short: fib, lua
	What string // the table's title
	Kind Kind
	Prog Program
	Args []string
	// Calls is the number of traced calls the program makes (Memory:
	// malloc and free), 0 when only a trace can tell.
	Calls int64
	// Leaks is the number of blocks the program leaks (Memory), all
	// allocated under one of the functions LeakFrom: the program's own
	// calls of the allocator, which libc's own allocations (stdio's
	// buffers) do not pass through.
	Leaks    int
	LeakFrom []string
	// Children are more executables of the program (a driver's: g++ runs
	// cc1plus and as): their memory is not the tool's either.
	Children []string
	// Notes are said under its table.
	Notes []string
	// Hot names a function whose average call the table compares between
	// the traces (timing fidelity), "" for none.
	Hot string
	// Inputs builds what Args name (a generated file), once.
	Inputs func() error
	// Tools, when set, are the only tools that run it (by name).
	Tools []string
	// Short names the workload that runs the same program the same way
	// on less work: with this one, it gives each tool's cost per event
	// apart from its start-up (Marginals).
	Short string
	// OneThread names the workload that does the same total work in one
	// thread (ThreadScaling).
	OneThread string
}

// Scale is how big the workloads are (Quick: small), and which to make.
type Scale struct {
	Quick bool
	Runs  int
	Only  map[string]bool // the workloads to prepare; empty: all
}

// Names are the workloads, in the order they run.
var Names = []string{"fib", "fib-long", "fib-threads", "fib-threads-long", "churn", "churn-long", "lua", "lua-long", "lua-memory", "lua-memory-long",
	"bzip2", "sqlite3", "sqlite3-memory", "sqlite3-long", "g++-compile"}

// fibCalls is how many times fib(n) calls fib.
func fibCalls(n int) int64 {
	if n < 2 {
		return 1
	}
	return 1 + fibCalls(n-1) + fibCalls(n-2)
}

// Workloads prepares every workload at scale s: the fixtures of
// testdata/, and the real programs, built from Debian's sources. A
// workload that cannot be prepared is returned with its error.
func Workloads(b *Builder, s Scale) ([]*Workload, map[string]error) {
	fibN, fibLongN, churnN, luaN, bzipKB, sqlN := 25, 30, 200000, 15, 128, 1000
	luaLongN, sqlLongN, churnLongN, luaMemN, luaMemLongN := 27, 10000, 2000000, 10, 100
	if s.Quick {
		fibN, fibLongN, churnN, luaN, bzipKB, sqlN = 20, 25, 20000, 10, 16, 100
		luaLongN, sqlLongN, churnLongN, luaMemN, luaMemLongN = 20, 1000, 200000, 2, 20
	}
	// The long workloads run the fast tracers only: long enough that a
	// tracer's fixed start-up is a small part of its cost per event (the
	// short ones last 4-15 ms untraced, and a tracer's start-up is as
	// long), too long for the tracers that stop per event.
	fast := []string{"untraced", "rtrace", "uftrace -pg", "uftrace -P ."}
	// The long memory workloads leave out ltrace -e (a stop at each call:
	// minutes) and rtrace remote (the check of the short ones).
	memLong := []string{"untraced", "rtrace", "heaptrack", "memcheck", "bpftrace"}
	var list []*Workload
	failed := map[string]error{}
	want := func(names ...string) bool {
		for _, n := range names {
			if len(s.Only) == 0 || s.Only[n] {
				return true
			}
		}
		return false
	}
	fixture := func(name, src string, flags ...string) (Program, bool) {
		plain, err := b.Fixture(src, flags...)
		if err == nil {
			var pg string
			if pg, err = b.Fixture(src, append(flags, "-pg")...); err == nil {
				return Program{Plain: plain, PG: pg}, true
			}
		}
		failed[name] = err
		return Program{}, false
	}
	if want("fib") {
		if p, ok := fixture("fib", "fib.c", "-O0", "-g"); ok {
			list = append(list, &Workload{Name: "fib", Kind: Functions, Prog: p, Args: []string{strconv.Itoa(fibN)}, Hot: "fib",
				What: fmt.Sprintf("fib(%d), testdata/fib.c at -O0: %d calls of fib", fibN, fibCalls(fibN))})
		}
	}
	if want("fib-long") {
		if p, ok := fixture("fib-long", "fib.c", "-O0", "-g"); ok {
			list = append(list, &Workload{Name: "fib-long", Kind: Functions, Prog: p, Args: []string{strconv.Itoa(fibLongN)}, Hot: "fib",
				What:  fmt.Sprintf("fib(%d), testdata/fib.c at -O0: %d calls of fib (the fast tracers only)", fibLongN, fibCalls(fibLongN)),
				Tools: fast, Short: "fib"})
		}
	}
	if want("fib-threads") {
		if p, ok := fixture("fib-threads", "fibthreads.c", "-O0", "-g", "-pthread"); ok {
			list = append(list, &Workload{Name: "fib-threads", Kind: Functions, Prog: p, Args: []string{strconv.Itoa(fibN)}, Hot: "fib",
				What: fmt.Sprintf("fib(%d) split over 4 threads, testdata/fibthreads.c at -O0", fibN)})
		}
	}
	if want("fib-threads-long") {
		// Against fib-long: the same work in one thread.
		if p, ok := fixture("fib-threads-long", "fibthreads.c", "-O0", "-g", "-pthread"); ok {
			list = append(list, &Workload{Name: "fib-threads-long", Kind: Functions, Prog: p, Args: []string{strconv.Itoa(fibLongN)}, Hot: "fib",
				What:  fmt.Sprintf("fib(%d) split over 4 threads, testdata/fibthreads.c at -O0 (the fast tracers only)", fibLongN),
				Tools: fast, Short: "fib-threads", OneThread: "fib-long"})
		}
	}
	churn := func(name string, n int) *Workload {
		p, ok := fixture(name, "churn.c", "-O2", "-g")
		if !ok {
			return nil
		}
		return &Workload{Name: name, Kind: Memory, Prog: p, Args: []string{strconv.Itoa(n), "100"},
			Calls: int64(2*n - (n+99)/100), Leaks: (n + 99) / 100, LeakFrom: []string{"churn_alloc"},
			What: fmt.Sprintf("malloc/free churn, %d blocks, 1%% leaked, testdata/churn.c at -O2", n)}
	}
	if want("churn") {
		if w := churn("churn", churnN); w != nil {
			list = append(list, w)
		}
	}
	if want("churn-long") {
		if w := churn("churn-long", churnLongN); w != nil {
			w.What += " (no ltrace -e)"
			w.Tools, w.Short = memLong, "churn"
			list = append(list, w)
		}
	}
	// fail records a preparation error under each of the workloads it
	// stops that were asked for.
	fail := func(err error, names ...string) {
		for _, n := range names {
			if want(n) {
				failed[n] = err
			}
		}
	}
	if want("lua", "lua-long", "lua-memory", "lua-memory-long") {
		if p, err := b.Lua(); err != nil {
			fail(err, "lua", "lua-long", "lua-memory", "lua-memory-long")
		} else {
			script := filepath.Join(b.Root, "bench", "scripts", "work.lua")
			if want("lua") {
				list = append(list, &Workload{Name: "lua", Kind: Functions, Prog: p, Args: []string{script, strconv.Itoa(luaN)},
					What: fmt.Sprintf("Lua 5.4 interpreter (Debian's lua5.4 source, -O2 -g) running bench/scripts/work.lua %d", luaN)})
			}
			if want("lua-long") {
				list = append(list, &Workload{Name: "lua-long", Kind: Functions, Prog: p, Args: []string{script, strconv.Itoa(luaLongN)},
					What:  fmt.Sprintf("Lua 5.4 interpreter running bench/scripts/work.lua %d (the fast tracers only)", luaLongN),
					Tools: fast, Short: "lua"})
			}
			// Lua allocates and frees through l_alloc (lauxlib.c), which
			// tail-calls realloc: it is in no backtrace. Its callers are:
			// luaM_malloc_ and luaM_realloc_ (lmem.c), and lua_newstate for
			// the state itself. lua_close frees all of it: 0 leaks.
			alloc := filepath.Join(b.Root, "bench", "scripts", "alloc.lua")
			luaAlloc := []string{"luaM_malloc_", "luaM_realloc_", "lua_newstate"}
			if want("lua-memory") {
				list = append(list, &Workload{Name: "lua-memory", Kind: Memory, Prog: p, Args: []string{alloc, strconv.Itoa(luaMemN)},
					LeakFrom: luaAlloc,
					What:     fmt.Sprintf("Lua 5.4 interpreter's allocations running bench/scripts/alloc.lua %d (%d,000 rounds of strings, tables, closures)", luaMemN, luaMemN)})
			}
			if want("lua-memory-long") {
				list = append(list, &Workload{Name: "lua-memory-long", Kind: Memory, Prog: p, Args: []string{alloc, strconv.Itoa(luaMemLongN)},
					LeakFrom: luaAlloc, Tools: memLong, Short: "lua-memory",
					What: fmt.Sprintf("Lua 5.4 interpreter's allocations running bench/scripts/alloc.lua %d (no ltrace -e)", luaMemLongN)})
			}
		}
	}
	if want("bzip2") {
		if p, err := b.Bzip2(); err != nil {
			failed["bzip2"] = err
		} else {
			in := filepath.Join(b.Dir, "inputs", fmt.Sprintf("text-%dKiB", bzipKB))
			list = append(list, &Workload{Name: "bzip2", Kind: Functions, Prog: p, Args: []string{"-c", "-9", in},
				What:   fmt.Sprintf("bzip2 -9 (Debian's bzip2 source, -O2 -g) compressing %d KiB of generated text", bzipKB),
				Inputs: func() error { return genText(in, bzipKB<<10) }})
		}
	}
	if want("sqlite3", "sqlite3-long", "sqlite3-memory") {
		if p, err := b.SQLite(); err != nil {
			fail(err, "sqlite3", "sqlite3-memory", "sqlite3-long")
		} else {
			sql := filepath.Join(b.Dir, "inputs", fmt.Sprintf("work-%d.sql", sqlN))
			gen := func() error { return genSQL(sql, sqlN) }
			if want("sqlite3") {
				list = append(list, &Workload{Name: "sqlite3", Kind: Functions, Prog: p, Args: []string{":memory:", ".read " + sql},
					What:   fmt.Sprintf("sqlite3 shell (Debian's sqlite3 source, -O2 -g): %d inserts, an index, queries, in memory", sqlN),
					Inputs: gen})
			}
			if want("sqlite3-memory") {
				// The same run's allocations: sqlite3 allocates through
				// sqlite3MemMalloc (src/mem1.c), and frees all it allocates.
				list = append(list, &Workload{Name: "sqlite3-memory", Kind: Memory, Prog: p, Args: []string{":memory:", ".read " + sql},
					What:     fmt.Sprintf("sqlite3 shell's allocations, the same %d-insert run", sqlN),
					LeakFrom: []string{"sqlite3MemMalloc"}, Inputs: gen})
			}
			if want("sqlite3-long") {
				sql := filepath.Join(b.Dir, "inputs", fmt.Sprintf("work-%d.sql", sqlLongN))
				list = append(list, &Workload{Name: "sqlite3-long", Kind: Functions, Prog: p, Args: []string{":memory:", ".read " + sql},
					What:   fmt.Sprintf("sqlite3 shell: %d inserts, an index, queries, in memory (the fast tracers only)", sqlLongN),
					Inputs: func() error { return genSQL(sql, sqlLongN) },
					Tools:  fast, Short: "sqlite3"})
			}
		}
	}
	if want("g++-compile") {
		if w, err := gxxCompile(b); err != nil {
			failed["g++-compile"] = err
		} else {
			list = append(list, w)
		}
	}
	for _, w := range list {
		if w.Inputs != nil {
			if err := w.Inputs(); err != nil {
				failed[w.Name] = err
			}
		}
	}
	return list, failed
}

// genText writes size bytes of deterministic, compressible text: words
// from a small vocabulary picked by a linear congruential generator.
func genText(path string, size int) error {
	if st, err := os.Stat(path); err == nil && st.Size() == int64(size) {
		return nil
	}
	words := []string{"trace", "call", "entry", "exit", "stack", "frame", "thread", "record", "probe", "uftrace", "ptrace", "signal", "memory", "leak"}
	buf := make([]byte, 0, size+16)
	x := uint32(12345)
	for len(buf) < size {
		x = x*1103515245 + 12345
		buf = append(buf, words[(x>>16)%uint32(len(words))]...)
		if x>>28 == 0 {
			buf = append(buf, '\n')
		} else {
			buf = append(buf, ' ')
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, buf[:size], 0o644)
}

// genSQL writes the sqlite3 workload: a table of n rows inserted in one
// transaction, an index, and queries that use it, an aggregate and a join.
func genSQL(path string, n int) error {
	var s []byte
	s = append(s, "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v INTEGER);\nBEGIN;\n"...)
	x := uint32(7)
	for i := 0; i < n; i++ {
		x = x*1103515245 + 12345
		s = fmt.Appendf(s, "INSERT INTO t(name, v) VALUES('n%05d', %d);\n", x%100000, x>>8%1000)
	}
	s = append(s, "COMMIT;\nCREATE INDEX t_name ON t(name);\n"...)
	s = append(s, "SELECT count(*), sum(v), min(name), max(name) FROM t;\n"...)
	s = append(s, "SELECT v % 10, count(*), avg(v) FROM t GROUP BY 1 ORDER BY 1;\n"...)
	s = append(s, "SELECT count(*) FROM t a JOIN t b ON a.name = b.name WHERE a.v < 100;\n"...)
	s = append(s, "SELECT name FROM t WHERE name BETWEEN 'n10000' AND 'n10100' ORDER BY name LIMIT 5;\n"...)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, s, 0o644)
}

// gxxCompile is g++ -c of a small C++ file: a short run of big programs
// (cc1plus: 35 MB, 49,000 functions), which shows what a tracer's
// start-up costs on large modules. g++ runs cc1plus and as as children.
func gxxCompile(b *Builder) (*Workload, error) {
	gxx, err := Need("g++", "g++", b.Log)
	if err != nil {
		return nil, err
	}
	var children []string
	for _, name := range []string{"cc1plus", "as"} {
		out, err := exec.Command(gxx, "-print-prog-name="+name).Output()
		if err != nil {
			return nil, fmt.Errorf("g++ -print-prog-name=%s: %v", name, err)
		}
		p := strings.TrimSpace(string(out))
		if !filepath.IsAbs(p) {
			if p, err = exec.LookPath(p); err != nil {
				return nil, fmt.Errorf("g++ runs %s: %v", name, err)
			}
		}
		children = append(children, p)
	}
	dir := filepath.Join(b.Dir, "inputs")
	src, obj := filepath.Join(dir, "compile.cc"), filepath.Join(dir, "compile.o")
	return &Workload{Name: "g++-compile", Kind: Startup, Prog: Program{Plain: gxx}, Args: []string{"-c", src, "-o", obj},
		Children: children,
		// libheaptrack_preload.so unsets LD_PRELOAD as it starts.
		Notes: []string{"heaptrack records the g++ driver alone: its preloaded library unsets LD_PRELOAD, so cc1plus and as run untraced"},
		What:  "g++ -c of a small C++ file (<string>, <vector>, one function): big modules' start-up (cc1plus: 35 MB)",
		Inputs: func() error {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			return os.WriteFile(src, []byte(compileSource), 0o644)
		}}, nil
}

// compileSource is what g++-compile compiles: two standard headers and
// one function. With the headers' templates to parse, g++, cc1plus and
// as make 37 million function entries and exits, against 2.3 million for
// a one-line file.
const compileSource = `#include <string>
#include <vector>

// The total length of the words.
size_t total_length(const std::vector<std::string> &words) {
	size_t n = 0;
	for (const std::string &w : words)
		n += w.size();
	return n;
}
`
