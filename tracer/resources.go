package tracer

import (
	"fmt"
	"slices"
	"strings"

	"rtrace/internal/elfx"
)

// A resource module (-e memory:file) names the library functions that
// allocate and release one kind of resource, as sp-rtrace's preloaded
// modules did. rtrace puts a breakpoint on each function itself, in
// whatever library defines it, so calls from every module are caught.

// ResModule is a resource tracing module.
type ResModule struct {
	Name      string
	Desc      string
	Resources []ResType
	Funcs     []ResFunc
}

// ResType is a resource type a module reports (an sp-rtrace RESR).
type ResType struct {
	Name, Desc string
	Refcount   bool
}

// Effect is what a call does to a resource, given its arguments and
// return value. A failed call (NULL, -1) has no effect.
type Effect uint8

// What a call's value means: which value is the resource, and whether
// the call allocates or releases it.
const (
	allocRet    Effect = iota + 1 // ret is the resource (fails: 0 or MAP_FAILED/-1)
	allocRetFd                    // ret is an fd (fails: < 0)
	allocOutPtr                   // *(pointer arg Out) is the resource, ret 0 = success
	allocOutFds                   // two ints at *(arg Out), ret 0 = success (pipe, socketpair)
	freeArg                       // arg ID is released (always)
	freeArgOK                     // arg ID is released when ret == 0
	reallocPtr                    // arg 0 released, ret allocated (realloc)
	reallocMap                    // arg 0 released, ret allocated, fails: MAP_FAILED (mremap)
	freopenFp                     // arg 2 released, ret allocated
	dupFd                         // ret allocated; dup2/dup3 also release arg 1 first
	fcntlDup                      // fcntl(fd, F_DUPFD*): ret allocated
	shmctlRmid                    // shmctl(id, IPC_RMID): id released
	allocArg                      // arg ID is allocated (a constructor's this), whatever ret
	allocOne                      // resource 1 of size 1 is allocated: a call of an audited function
	transfer                      // arg ID is allocated, its size Size's (times Scale) or Len's string length
	rebindFd                      // bind, connect: fd arg ID released and allocated again when ret == 0 (sp-rtrace's file module)
	freeAllOK                     // fcloseall: resource -1 released when ret == 0 (sp-rtrace's file module)
)

// ResFunc is one traced function of a module.
type ResFunc struct {
	Sym    string // symbol name, or a prefix ending in '*' (C++ operator new's variants)
	Name   string // reported name ("operator new[]")
	Res    int    // index into the module's Resources
	Effect Effect
	// Size: the argument holding the size (1-based), 0 for none (size
	// 1); SizeMul multiplies it by another argument (calloc), 0 for none.
	Size, SizeMul int
	ID            int      // the argument holding the released resource
	Out           int      // allocOutPtr/allocOutFds: the pointer argument
	Args          []ArgRec // argument records, as sp-rtrace's $path
	// AtEntry: a release that calls no other resource function (but the
	// mmap module's): the fast engine records it at its entry and leaves
	// its return alone.
	AtEntry bool
	// Scale multiplies the size argument (wmemcpy's counts wide chars);
	// Len, when set, is the argument (1-based) whose string length is the
	// size instead, of wide characters (times 4) with Wide.
	Scale int
	Len   int
	Wide  bool
	// AtCallers: the calls are recorded where other modules call the
	// function, at their PLT stubs, as sp-rtrace's preloaded modules saw
	// them: glibc resolves memcpy, strcpy... at load time among several
	// versions (IFUNC), and calls them inside itself all the time.
	AtCallers bool
}

// argLen is the argument slot where a resource call's string length goes
// (Len), read at its entry: the functions that have one take fewer
// arguments.
const argLen = 5

// ArgRec is an argument record a call reports: its name and how its value
// is shown.
type ArgRec struct {
	Name string
	Arg  int  // argument index
	Kind byte // 's' C string, 'd' decimal, 'x' hex, 'o' octal
}

// resModules is the catalog; module and resource order fixes the ids.
var resModules = []ResModule{
	{Name: "memory", Desc: "memory allocation and release",
		Resources: []ResType{{"memory", "memory allocation in bytes", false}},
		Funcs: []ResFunc{
			{Sym: "malloc", Effect: allocRet, Size: 1},
			{Sym: "calloc", Effect: allocRet, Size: 1, SizeMul: 2},
			{Sym: "realloc", Effect: reallocPtr, Size: 2},
			{Sym: "reallocarray", Effect: reallocPtr, Size: 2, SizeMul: 3},
			{Sym: "free", Effect: freeArg, ID: 0, AtEntry: true},
			{Sym: "posix_memalign", Effect: allocOutPtr, Out: 0, Size: 3},
			{Sym: "memalign", Effect: allocRet, Size: 2},
			{Sym: "aligned_alloc", Effect: allocRet, Size: 2},
			{Sym: "valloc", Effect: allocRet, Size: 1},
			{Sym: "pvalloc", Effect: allocRet, Size: 1},
			{Sym: "_Znw*", Name: "operator new", Effect: allocRet, Size: 1},
			{Sym: "_Zna*", Name: "operator new[]", Effect: allocRet, Size: 1},
			{Sym: "_ZdlPv*", Name: "operator delete", Effect: freeArg, ID: 0},
			{Sym: "_ZdaPv*", Name: "operator delete[]", Effect: freeArg, ID: 0},
		}},
	{Name: "file", Desc: "file descriptors and FILE streams",
		Resources: []ResType{{"fd", "file descriptor", false}, {"fp", "file pointer", false}},
		Funcs: []ResFunc{
			{Sym: "open", Effect: allocRetFd, Args: []ArgRec{{"path", 0, 's'}, {"flags", 1, 'x'}}},
			{Sym: "open64", Effect: allocRetFd, Args: []ArgRec{{"path", 0, 's'}, {"flags", 1, 'x'}}},
			{Sym: "openat", Effect: allocRetFd, Args: []ArgRec{{"path", 1, 's'}, {"flags", 2, 'x'}}},
			{Sym: "openat64", Effect: allocRetFd, Args: []ArgRec{{"path", 1, 's'}, {"flags", 2, 'x'}}},
			{Sym: "creat", Effect: allocRetFd, Args: []ArgRec{{"path", 0, 's'}, {"mode", 1, 'o'}}},
			{Sym: "creat64", Effect: allocRetFd, Args: []ArgRec{{"path", 0, 's'}, {"mode", 1, 'o'}}},
			{Sym: "close", Effect: freeArgOK, ID: 0},
			{Sym: "dup", Effect: dupFd},
			{Sym: "dup2", Effect: dupFd},
			{Sym: "dup3", Effect: dupFd},
			{Sym: "fcntl", Effect: fcntlDup},
			{Sym: "fcntl64", Effect: fcntlDup},
			{Sym: "socket", Effect: allocRetFd},
			{Sym: "socketpair", Effect: allocOutFds, Out: 3},
			// sp-rtrace's file module reports a bound or connected socket
			// as released and allocated again (trace_bind_common).
			{Sym: "bind", Effect: rebindFd, ID: 0},
			{Sym: "connect", Effect: rebindFd, ID: 0},
			{Sym: "posix_openpt", Effect: allocRetFd, Args: []ArgRec{{"flags", 0, 'x'}}},
			{Sym: "getpt", Effect: allocRetFd},
			{Sym: "accept", Effect: allocRetFd},
			{Sym: "accept4", Effect: allocRetFd},
			{Sym: "pipe", Effect: allocOutFds, Out: 0},
			{Sym: "pipe2", Effect: allocOutFds, Out: 0},
			{Sym: "eventfd", Effect: allocRetFd},
			{Sym: "signalfd", Effect: allocRetFd},
			{Sym: "timerfd_create", Effect: allocRetFd},
			{Sym: "epoll_create", Effect: allocRetFd},
			{Sym: "epoll_create1", Effect: allocRetFd},
			{Sym: "inotify_init", Effect: allocRetFd},
			{Sym: "inotify_init1", Effect: allocRetFd},
			{Sym: "fopen", Res: 1, Effect: allocRet, Args: []ArgRec{{"path", 0, 's'}, {"mode", 1, 's'}}},
			{Sym: "fopen64", Res: 1, Effect: allocRet, Args: []ArgRec{{"path", 0, 's'}, {"mode", 1, 's'}}},
			{Sym: "fdopen", Res: 1, Effect: allocRet, Args: []ArgRec{{"fd", 0, 'd'}, {"mode", 1, 's'}}},
			{Sym: "freopen", Res: 1, Effect: freopenFp, Args: []ArgRec{{"path", 0, 's'}, {"mode", 1, 's'}}},
			{Sym: "freopen64", Res: 1, Effect: freopenFp, Args: []ArgRec{{"path", 0, 's'}, {"mode", 1, 's'}}},
			{Sym: "popen", Res: 1, Effect: allocRet, Args: []ArgRec{{"command", 0, 's'}, {"mode", 1, 's'}}},
			{Sym: "pclose", Res: 1, Effect: freeArg, ID: 0},
			{Sym: "fclose", Res: 1, Effect: freeArg, ID: 0},
			// Every stream closed: sp-rtrace reports the release of the
			// FILE pointer -1 (trace_fcloseall).
			{Sym: "fcloseall", Res: 1, Effect: freeAllOK},
		}},
	{Name: "thread", Desc: "thread creation and release",
		Resources: []ResType{{"thread", "thread", false}},
		Funcs: []ResFunc{
			{Sym: "pthread_create", Effect: allocOutPtr, Out: 0},
			{Sym: "pthread_join", Effect: freeArgOK, ID: 0},
			{Sym: "pthread_detach", Effect: freeArgOK, ID: 0},
		}},
	{Name: "shm", Desc: "System V and POSIX shared memory",
		Resources: []ResType{{"segment", "shared memory segment", true}, {"address", "shared memory attachment", false}, {"shmposix", "POSIX shared memory object", false}},
		Funcs: []ResFunc{
			{Sym: "shmget", Effect: allocRetFd, Size: 2, Args: []ArgRec{{"key", 0, 'x'}, {"shmflg", 2, 'o'}}},
			{Sym: "shmat", Res: 1, Effect: allocRet, Args: []ArgRec{{"shmid", 0, 'x'}}},
			{Sym: "shmdt", Res: 1, Effect: freeArgOK, ID: 0},
			{Sym: "shmctl", Effect: shmctlRmid, ID: 0},
			{Sym: "shm_open", Res: 2, Effect: allocRetFd, Args: []ArgRec{{"name", 0, 's'}, {"oflag", 1, 'x'}}},
			{Sym: "shm_unlink", Res: 2, Effect: freeArgOK, ID: -1, Args: []ArgRec{{"name", 0, 's'}}},
		}},
	{Name: "mmap", Desc: "memory mappings",
		Resources: []ResType{{"mapping", "memory mapping in bytes", false}},
		Funcs: []ResFunc{
			{Sym: "mmap", Effect: allocRet, Size: 2, Args: []ArgRec{{"prot", 2, 'x'}, {"flags", 3, 'x'}, {"fd", 4, 'd'}}},
			{Sym: "mmap64", Effect: allocRet, Size: 2, Args: []ArgRec{{"prot", 2, 'x'}, {"flags", 3, 'x'}, {"fd", 4, 'd'}}},
			{Sym: "munmap", Effect: freeArgOK, ID: 0, Args: []ArgRec{{"length", 1, 'd'}}},
			{Sym: "mremap", Effect: reallocMap, Size: 3},
		}},
	{Name: "gobject", Desc: "GObject instances (GLib), reference-counted",
		Resources: []ResType{{"gobject", "GObject instance", true}},
		Funcs: []ResFunc{
			{Sym: "g_object_new", Effect: allocRet},
			{Sym: "g_object_newv", Effect: allocRet},
			{Sym: "g_object_new_with_properties", Effect: allocRet},
			{Sym: "g_object_new_valist", Effect: allocRet},
			{Sym: "g_object_ref", Effect: allocRet},
			{Sym: "g_object_unref", Effect: freeArg, ID: 0},
			{Sym: "g_type_free_instance", Effect: freeArg, ID: 0},
		}},
	{Name: "qobject", Desc: "QObject instances (Qt): constructed and destroyed",
		Resources: []ResType{{"qobject", "QObject instance", false}},
		Funcs: []ResFunc{
			{Sym: "_ZN7QObjectC1E*", Name: "QObject::QObject", Effect: allocArg, ID: 0},
			{Sym: "_ZN7QObjectC2E*", Name: "QObject::QObject", Effect: allocArg, ID: 0},
			{Sym: "_ZN7QObjectD0Ev", Name: "QObject::~QObject", Effect: freeArg, ID: 0},
			{Sym: "_ZN7QObjectD1Ev", Name: "QObject::~QObject", Effect: freeArg, ID: 0},
			{Sym: "_ZN7QObjectD2Ev", Name: "QObject::~QObject", Effect: freeArg, ID: 0},
		}},
	{Name: "memtransfer", Desc: "memory transfers (memcpy, strcpy, memset...) called from other modules",
		Resources: []ResType{{"memtransfer", "memory transfer operations in bytes", false}},
		Funcs: []ResFunc{
			{Sym: "strcpy", Effect: transfer, ID: 1, Len: 2, AtCallers: true},
			{Sym: "mempcpy", Effect: transfer, ID: 1, Size: 3, AtCallers: true},
			{Sym: "memmove", Effect: transfer, ID: 1, Size: 3, AtCallers: true},
			{Sym: "memcpy", Effect: transfer, ID: 1, Size: 3, AtCallers: true},
			{Sym: "memset", Effect: transfer, ID: 0, Size: 3, AtCallers: true},
			{Sym: "strncpy", Effect: transfer, ID: 1, Size: 3, AtCallers: true},
			{Sym: "stpcpy", Effect: transfer, ID: 1, Len: 2, AtCallers: true},
			{Sym: "strcat", Effect: transfer, ID: 1, Len: 2, AtCallers: true},
			{Sym: "strncat", Effect: transfer, ID: 1, Size: 3, AtCallers: true},
			{Sym: "bcopy", Effect: transfer, ID: 0, Size: 3, AtCallers: true},
			{Sym: "bzero", Effect: transfer, ID: 0, Size: 2, AtCallers: true},
			{Sym: "strdup", Effect: transfer, ID: 0, Len: 1, AtCallers: true},
			{Sym: "strndup", Effect: transfer, ID: 0, Size: 2, AtCallers: true},
			{Sym: "wmemcpy", Effect: transfer, ID: 1, Size: 3, Scale: 4, AtCallers: true},
			{Sym: "wmempcpy", Effect: transfer, ID: 1, Size: 3, Scale: 4, AtCallers: true},
			{Sym: "wmemmove", Effect: transfer, ID: 1, Size: 3, Scale: 4, AtCallers: true},
			{Sym: "wmemset", Effect: transfer, ID: 0, Size: 3, Scale: 4, AtCallers: true},
			{Sym: "wcscpy", Effect: transfer, ID: 1, Len: 2, Wide: true, AtCallers: true},
			{Sym: "wcsncpy", Effect: transfer, ID: 1, Size: 3, Scale: 4, AtCallers: true},
			{Sym: "wcpcpy", Effect: transfer, ID: 1, Len: 2, Wide: true, AtCallers: true},
			{Sym: "wcpncpy", Effect: transfer, ID: 1, Size: 3, Scale: 4, AtCallers: true},
			{Sym: "wcscat", Effect: transfer, ID: 1, Len: 2, Wide: true, AtCallers: true},
			{Sym: "wcsncat", Effect: transfer, ID: 1, Size: 3, Scale: 4, AtCallers: true},
			{Sym: "wcsdup", Effect: transfer, ID: 0, Len: 1, Wide: true, AtCallers: true},
		}},
	// pagemap hooks nothing: at a process's end, the page map of its
	// writable memory (pagemap.go), read by rtrace pagemap.
	{Name: "pagemap", Desc: "the pages of the writable memory when the process ends (sp-rtrace's pagemap: for rtrace pagemap)"},
	// audit's functions are the ones --audit names (AuditModule).
	{Name: "audit", Desc: "calls of the functions --audit names, with backtraces (functracer's audit)",
		Resources: []ResType{{"virtual", "virtual resource for custom symbol tracking", false}}},
}

// AuditModule returns the audit module recording calls of funcs (names
// as their symbols have them, or a prefix ending in '*'), each an
// allocation of resource 1, size 1, with its backtrace, as functracer's
// audit module reported them.
func AuditModule(funcs []string) *ResModule {
	for i := range resModules {
		if resModules[i].Name == "audit" {
			m := resModules[i]
			m.Funcs = nil
			for _, f := range funcs {
				m.Funcs = append(m.Funcs, ResFunc{Sym: f, Effect: allocOne})
			}
			return &m
		}
	}
	return nil
}

// ResModules returns the resource modules rtrace knows, in id order.
func ResModules() []ResModule { return resModules }

// ResolveModules looks up module names (-e memory:file); the error names an
// unknown one and lists the known ones.
func ResolveModules(names []string) ([]*ResModule, error) {
	var out []*ResModule
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		if alias, ok := moduleAliases[n]; ok {
			more, err := ResolveModules(alias)
			if err != nil {
				return nil, err
			}
			for _, m := range more {
				if !slices.Contains(out, m) {
					out = append(out, m)
				}
				seen[m.Name] = true
			}
			continue
		}
		var m *ResModule
		for i := range resModules {
			if resModules[i].Name == n {
				m = &resModules[i]
			}
		}
		if m != nil && slices.Contains(out, m) {
			continue // named by an alias before
		}
		if m == nil {
			var known []string
			for _, k := range resModules {
				known = append(known, k.Name)
			}
			return nil, fmt.Errorf("unknown module %q (known: %s; see --list-modules)", n, strings.Join(known, ", "))
		}
		out = append(out, m)
	}
	return out, nil
}

// moduleAliases are sp-rtrace's module names for rtrace's: its shmsysv
// (shmget, shmat, shmdt) and shmposix (shm_open, shm_unlink, and the
// mmap and munmap of the objects) modules are rtrace's shm, with mmap.
var moduleAliases = map[string][]string{"shmsysv": {"shm"}, "shmposix": {"shm", "mmap"}}

// matchSym reports whether symbol sym is the one rf names.
func (rf *ResFunc) matchSym(sym string) bool {
	if p, ok := strings.CutSuffix(rf.Sym, "*"); ok {
		return strings.HasPrefix(sym, p)
	}
	return sym == rf.Sym
}

// matchFunc reports whether fn, by its name or an alias, is rf's.
func (rf *ResFunc) matchFunc(fn elfx.Func) bool {
	if rf.matchSym(fn.Name) {
		return true
	}
	for _, a := range fn.Aliases {
		if rf.matchSym(a) {
			return true
		}
	}
	return false
}

// UftraceArgs are the uftrace argument specs (arg1/u) that show a call's
// resource arguments in a uftrace.data recording.
func (rf *ResFunc) UftraceArgs() []string {
	var a []string
	switch rf.Effect {
	case reallocPtr, reallocMap, freeArg, freeArgOK, shmctlRmid, dupFd, fcntlDup, allocArg, transfer:
		if rf.ID >= 0 {
			a = append(a, fmt.Sprintf("arg%d/x", rf.ID+1))
		}
	}
	if rf.Size > 0 {
		a = append(a, fmt.Sprintf("arg%d/u", rf.Size))
	}
	if rf.SizeMul > 0 {
		a = append(a, fmt.Sprintf("arg%d/u", rf.SizeMul))
	}
	for _, r := range rf.Args {
		k := "x"
		switch r.Kind {
		case 's':
			k = "s"
		case 'd':
			k = "d"
		}
		a = append(a, fmt.Sprintf("arg%d/%s", r.Arg+1, k))
	}
	return a
}

// Void reports whether the function returns nothing (free, operator
// delete).
func (rf *ResFunc) Void() bool {
	switch {
	case rf.Effect == allocArg:
		return true // a constructor
	case rf.Effect == transfer:
		return rf.Sym == "bcopy" || rf.Sym == "bzero"
	}
	return rf.Effect == freeArg && rf.Res == 0 && !strings.HasPrefix(rf.Sym, "pthread")
}

// Display is the name calls are reported under.
func (rf *ResFunc) Display() string {
	if rf.Name != "" {
		return rf.Name
	}
	return rf.Sym
}
