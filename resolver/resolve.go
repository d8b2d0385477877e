package resolver

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"rtrace/internal/trace"
)

// Options configure a Resolver.
type Options struct {
	// FullPaths keeps source paths as DWARF gives them; by default only
	// the file name is shown (sp-rtrace-resolve -p, --full-path).
	FullPaths bool
	// Warn receives one line per module that cannot be read, has corrupt
	// ELF or DWARF, or whose debug file is unusable. nil discards them.
	Warn io.Writer
	// DebugDirs are searched for separate debug files (by build id and
	// debug link). nil means {"/usr/lib/debug"}.
	DebugDirs []string
}

// Resolver turns backtrace addresses of one process into sp-rtrace frame
// texts. It reads each module file once, when a frame first falls in it,
// and remembers every answer. It is not safe for concurrent use.
type Resolver struct {
	opts    Options
	maps    []*mapping // sorted by from, disjoint
	objs    map[string]*object
	failed  map[string]bool
	warned  map[string]bool
	answers map[uint64]*answer
	callees map[uint64]string // Callee's answers
}

// mapping is an executable mapping and, once a frame fell in it, its
// object (nil when unusable) and load bias.
type mapping struct {
	trace.Mapping
	loaded bool
	obj    *object
	bias   uint64
	// after: a mapping of the same file ending where this one starts, as
	// when a text mapping was split; it has the same bias.
	after *mapping
}

// New returns a Resolver.
func New(opts Options) *Resolver {
	if opts.DebugDirs == nil {
		opts.DebugDirs = []string{"/usr/lib/debug"}
	}
	return &Resolver{
		opts:    opts,
		objs:    map[string]*object{},
		failed:  map[string]bool{},
		warned:  map[string]bool{},
		answers: map[uint64]*answer{},
	}
}

// AddMapping registers an executable mapping of the target: an r-xp line of
// /proc/pid/maps. A mapping overlapping earlier ones replaces them, as a
// library loaded where an unloaded one was.
func (r *Resolver) AddMapping(m trace.Mapping) {
	if m.To <= m.From {
		return
	}
	nm := &mapping{Mapping: m}
	kept := r.maps[:0]
	for _, o := range r.maps {
		if o.From < m.To && m.From < o.To {
			continue
		}
		if o.To == m.From && o.Path == m.Path {
			nm.after = o
		}
		kept = append(kept, o)
	}
	r.maps = kept
	i := sort.Search(len(r.maps), func(i int) bool { return r.maps[i].From > m.From })
	r.maps = append(r.maps, nil)
	copy(r.maps[i+1:], r.maps[i:])
	r.maps[i] = nm
	if len(r.answers) > 0 {
		r.answers = map[uint64]*answer{}
	}
	r.callees = nil
}

// Frame returns the text sp-rtrace prints after "0x<addr> " for the
// backtrace address addr, a return address: "func() at file:line",
// "func() from /module", "from /module" or "in ??". The function and line
// are those of addr-1, the call instruction. In code inlined into another
// function they are the inlined function's and its own line, as addr2line
// without -i and sp-rtrace (bfd_find_nearest_line) give them: one line per
// frame, the chain of callers it was inlined into is not shown.
func (r *Resolver) Frame(addr uint64) string {
	a := r.answer(addr)
	if a.text == "" {
		a.text = a.frameText(r.opts.FullPaths)
	}
	return a.text
}

// answer is what the resolver found at one address, kept for Frame and
// Locate alike.
type answer struct {
	m          *mapping // nil: in no mapping
	name, file string   // raw function name, source path; "" unknown
	line       int
	text       string // Frame's text, formatted on first use
}

// answer returns the cached answer for addr, resolving it on first use.
func (r *Resolver) answer(addr uint64) *answer {
	if a, ok := r.answers[addr]; ok {
		return a
	}
	a := r.find(addr)
	r.answers[addr] = a
	return a
}

// frame resolves and formats addr without the answer cache.
func (r *Resolver) frame(addr uint64) string {
	return r.find(addr).frameText(r.opts.FullPaths)
}

// find resolves addr without the answer cache. The function and line are
// those of addr-1, inside the call instruction, unless addr is the first
// byte of its mapping.
func (r *Resolver) find(addr uint64) *answer {
	m := r.mappingAt(addr)
	if m == nil {
		return &answer{}
	}
	r.load(m)
	a := &answer{m: m}
	if m.obj == nil {
		return a
	}
	pc := addr - m.bias
	if addr > m.From {
		pc-- // inside the call, not at the instruction after it
	}
	a.name, a.file, a.line = m.obj.lookup(pc)
	return a
}

// mappingAt returns the mapping holding addr, nil for none.
func (r *Resolver) mappingAt(addr uint64) *mapping {
	i := sort.Search(len(r.maps), func(i int) bool { return r.maps[i].From > addr }) - 1
	if i < 0 || addr >= r.maps[i].To {
		return nil
	}
	return r.maps[i]
}

// load finds the object and bias of m.
func (r *Resolver) load(m *mapping) {
	if m.loaded {
		return
	}
	m.loaded = true
	m.obj = r.object(m.Path)
	if m.obj == nil {
		return
	}
	if m.after != nil {
		r.load(m.after)
		m.obj, m.bias = m.after.obj, m.after.bias
		return
	}
	bias, err := loadBias(m.obj.loads, m.From, m.To)
	if err != nil {
		r.warn(m.Path, err, "its frames show the module only")
		m.obj = nil
		return
	}
	m.bias = bias
}

// object returns the parsed file at path, reading it on first use; nil if
// it is unusable.
func (r *Resolver) object(path string) *object {
	if o, ok := r.objs[path]; ok || r.failed[path] {
		return o
	}
	if !strings.HasPrefix(path, "/") { // [vdso], anonymous code: no file
		r.failed[path] = true
		return nil
	}
	o, err := openObject(path, r.opts.DebugDirs)
	if o == nil {
		r.warn(path, err, "its frames show the module only")
		r.failed[path] = true
		return nil
	}
	if err != nil {
		r.warn(path, err, "its frames show no source lines")
	}
	o.warn = func(err error) { r.warn(path, err, "some of its frames show no inlined functions") }
	r.objs[path] = o
	return o
}

// warn reports a problem with the module at path and its effect, once per
// module.
func (r *Resolver) warn(path string, err error, effect string) {
	if r.opts.Warn == nil || r.warned[path] {
		return
	}
	r.warned[path] = true
	msg := err.Error()
	if !strings.Contains(msg, path) {
		msg = path + ": " + msg
	}
	fmt.Fprintf(r.opts.Warn, "warning: resolver: %s; %s\n", msg, effect)
}
