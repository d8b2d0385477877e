package tracer

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// neg is a negative return value as the register holds it.
func neg(v int64) uint64 { return uint64(v) }

// nil6 are the arguments of a call whose arguments do not matter.
var nil6 [6]uint64

// events shows what a call did: "+id/size" for an allocation, "-id" for a
// release.
func events(es []resEvent) string {
	var s []string
	for _, e := range es {
		if e.Alloc {
			s = append(s, fmt.Sprintf("+%#x/%d", e.ID, e.Size))
		} else {
			s = append(s, fmt.Sprintf("-%#x", e.ID))
		}
	}
	return strings.Join(s, " ")
}

// The out arguments of the test calls: where posix_memalign, pipe,
// socketpair and pthread_create write their resource.
const (
	outPtr  = 0x7ffd0000
	outFds  = 0x7ffd0010
	outGone = 0x7ffd0020 // unreadable
)

func testPeek(addr uint64) (uint64, error) {
	switch addr {
	case outPtr:
		return 0x55550000a000, nil
	case outFds:
		return 7<<32 | 6, nil // int fds[2] = {6, 7}
	}
	return 0, errors.New("EFAULT")
}

func TestResEffects(t *testing.T) {
	const p, q = 0x55550000b000, 0x55550000c000
	// One or more rows for every function of every module; want is what
	// the call did ("" nothing).
	cases := []struct {
		sym  string
		args [6]uint64
		ret  uint64
		want string
	}{
		// memory
		{"malloc", [6]uint64{100}, p, "+0x55550000b000/100"},
		{"malloc", [6]uint64{100}, 0, ""},
		{"calloc", [6]uint64{3, 8}, p, "+0x55550000b000/24"},
		{"calloc", [6]uint64{3, 8}, 0, ""},
		{"realloc", [6]uint64{p, 200}, q, "-0x55550000b000 +0x55550000c000/200"},
		{"realloc", [6]uint64{0, 200}, q, "+0x55550000c000/200"}, // malloc
		{"realloc", [6]uint64{p, 0}, 0, "-0x55550000b000"},       // free
		{"realloc", [6]uint64{p, 200}, 0, ""},                    // failed: p stays
		{"reallocarray", [6]uint64{p, 10, 20}, q, "-0x55550000b000 +0x55550000c000/200"},
		{"reallocarray", [6]uint64{p, 10, 20}, 0, ""},
		{"free", [6]uint64{p}, 0, "-0x55550000b000"},
		{"free", [6]uint64{0}, 0, ""},
		{"posix_memalign", [6]uint64{outPtr, 64, 100}, 0, "+0x55550000a000/100"},
		{"posix_memalign", [6]uint64{outPtr, 64, 100}, uint64(unix.ENOMEM), ""},
		{"posix_memalign", [6]uint64{outGone, 64, 100}, 0, ""},
		{"memalign", [6]uint64{64, 100}, p, "+0x55550000b000/100"},
		{"memalign", [6]uint64{64, 100}, 0, ""},
		{"aligned_alloc", [6]uint64{64, 128}, p, "+0x55550000b000/128"},
		{"valloc", [6]uint64{100}, p, "+0x55550000b000/100"},
		{"pvalloc", [6]uint64{100}, p, "+0x55550000b000/100"},
		{"_Znw*", [6]uint64{16}, p, "+0x55550000b000/16"},
		{"_Zna*", [6]uint64{48}, p, "+0x55550000b000/48"},
		{"_ZdlPv*", [6]uint64{p, 16}, 0, "-0x55550000b000"},
		{"_ZdaPv*", [6]uint64{p}, 0, "-0x55550000b000"},
		{"_ZdaPv*", [6]uint64{0}, 0, ""},

		// file: descriptors have no size (1).
		{"open", [6]uint64{0x1000, 0}, 3, "+0x3/1"},
		{"open", [6]uint64{0x1000, 0}, neg(-1), ""},
		{"open", [6]uint64{0x1000, 0}, 0xffffffff, ""}, // int -1, upper half of rax not set
		{"open", [6]uint64{0x1000, 0}, 0, "+0x0/1"},    // fd 0 is a descriptor
		{"open64", [6]uint64{0x1000, 0}, 4, "+0x4/1"},
		{"openat", [6]uint64{neg(-100), 0x1000}, 5, "+0x5/1"},
		{"openat64", [6]uint64{neg(-100), 0x1000}, neg(-2), ""},
		{"openat64", [6]uint64{neg(-100), 0x1000}, 5, "+0x5/1"},
		{"creat", [6]uint64{0x1000, 0644}, 6, "+0x6/1"},
		{"creat64", [6]uint64{0x1000, 0644}, 6, "+0x6/1"},
		{"close", [6]uint64{3}, 0, "-0x3"},
		{"close", [6]uint64{3}, neg(-1), ""},
		{"dup", [6]uint64{3}, 4, "+0x4/1"},
		{"dup", [6]uint64{3, 4}, 4, "+0x4/1"}, // its second register is garbage
		{"dup", [6]uint64{99}, neg(-1), ""},
		{"dup2", [6]uint64{3, 5}, 5, "-0x5 +0x5/1"}, // closes 5 first
		{"dup2", [6]uint64{3, 3}, 3, "+0x3/1"},
		{"dup2", [6]uint64{99, 5}, neg(-1), ""},
		{"dup3", [6]uint64{3, 5, unix.O_CLOEXEC}, 5, "-0x5 +0x5/1"},
		{"fcntl", [6]uint64{3, unix.F_DUPFD, 10}, 10, "+0xa/1"},
		{"fcntl", [6]uint64{3, unix.F_DUPFD_CLOEXEC, 10}, 11, "+0xb/1"},
		{"fcntl", [6]uint64{3, unix.F_DUPFD, 10}, neg(-1), ""},
		{"fcntl", [6]uint64{3, unix.F_GETFL}, 2, ""},
		{"fcntl64", [6]uint64{3, unix.F_DUPFD_CLOEXEC, 0}, 12, "+0xc/1"},
		{"fcntl64", [6]uint64{3, unix.F_SETFD, 1}, 0, ""},
		{"socket", [6]uint64{unix.AF_INET, unix.SOCK_STREAM}, 3, "+0x3/1"},
		{"socket", [6]uint64{unix.AF_INET, unix.SOCK_STREAM}, neg(-1), ""},
		{"socketpair", [6]uint64{unix.AF_UNIX, unix.SOCK_STREAM, 0, outFds}, 0, "+0x6/1 +0x7/1"},
		{"socketpair", [6]uint64{unix.AF_UNIX, unix.SOCK_STREAM, 0, outFds}, neg(-1), ""},
		{"bind", [6]uint64{3, 0x1000, 16}, 0, "-0x3 +0x3/1"}, // sp-rtrace: the socket again, named
		{"bind", [6]uint64{3, 0x1000, 16}, neg(-1), ""},
		{"connect", [6]uint64{4, 0x1000, 16}, 0, "-0x4 +0x4/1"},
		{"posix_openpt", [6]uint64{unix.O_RDWR}, 5, "+0x5/1"},
		{"getpt", nil6, neg(-1), ""},
		{"getpt", nil6, 5, "+0x5/1"},
		{"accept", [6]uint64{3}, 4, "+0x4/1"},
		{"accept4", [6]uint64{3}, neg(-1), ""},
		{"accept4", [6]uint64{3}, 4, "+0x4/1"},
		{"pipe", [6]uint64{outFds}, 0, "+0x6/1 +0x7/1"},
		{"pipe", [6]uint64{outGone}, 0, ""},
		{"pipe2", [6]uint64{outFds, unix.O_CLOEXEC}, 0, "+0x6/1 +0x7/1"},
		{"pipe2", [6]uint64{outFds, unix.O_CLOEXEC}, neg(-1), ""},
		{"eventfd", nil6, 3, "+0x3/1"},
		{"signalfd", [6]uint64{neg(-1)}, 3, "+0x3/1"},
		{"timerfd_create", nil6, 3, "+0x3/1"},
		{"epoll_create", [6]uint64{1}, 3, "+0x3/1"},
		{"epoll_create1", nil6, neg(-1), ""},
		{"epoll_create1", nil6, 3, "+0x3/1"},
		{"inotify_init", nil6, 3, "+0x3/1"},
		{"inotify_init1", nil6, 3, "+0x3/1"},
		{"fopen", [6]uint64{0x1000, 0x2000}, p, "+0x55550000b000/1"},
		{"fopen", [6]uint64{0x1000, 0x2000}, 0, ""},
		{"fopen64", [6]uint64{0x1000, 0x2000}, p, "+0x55550000b000/1"},
		{"fdopen", [6]uint64{3, 0x2000}, p, "+0x55550000b000/1"},
		// freopen closes the old stream even when opening the new fails.
		{"freopen", [6]uint64{0x1000, 0x2000, p}, q, "-0x55550000b000 +0x55550000c000/1"},
		{"freopen", [6]uint64{0x1000, 0x2000, p}, 0, "-0x55550000b000"},
		{"freopen64", [6]uint64{0x1000, 0x2000, 0}, q, "+0x55550000c000/1"},
		{"popen", [6]uint64{0x1000, 0x2000}, p, "+0x55550000b000/1"},
		{"pclose", [6]uint64{p}, 0, "-0x55550000b000"},
		{"fclose", [6]uint64{p}, 0, "-0x55550000b000"},
		{"fclose", [6]uint64{p}, neg(-1), "-0x55550000b000"}, // the stream is gone anyway
		{"fcloseall", nil6, 0, "-0xffffffffffffffff"},        // sp-rtrace: FILE pointer -1
		{"fcloseall", nil6, neg(-1), ""},

		// thread
		{"pthread_create", [6]uint64{outPtr}, 0, "+0x55550000a000/1"},
		{"pthread_create", [6]uint64{outPtr}, uint64(unix.EAGAIN), ""},
		{"pthread_join", [6]uint64{0x7f0000001000}, 0, "-0x7f0000001000"},
		{"pthread_join", [6]uint64{0x7f0000001000}, uint64(unix.ESRCH), ""},
		{"pthread_detach", [6]uint64{0x7f0000001000}, 0, "-0x7f0000001000"},

		// shm
		{"shmget", [6]uint64{0x1234, 4096, 0600}, 7, "+0x7/4096"},
		{"shmget", [6]uint64{0x1234, 4096, 0600}, neg(-1), ""},
		{"shmat", [6]uint64{7}, p, "+0x55550000b000/1"},
		{"shmat", [6]uint64{7}, neg(-1), ""},
		{"shmdt", [6]uint64{p}, 0, "-0x55550000b000"},
		{"shmdt", [6]uint64{p}, neg(-1), ""},
		{"shmctl", [6]uint64{7, unix.IPC_RMID}, 0, "-0x7"},
		{"shmctl", [6]uint64{7, unix.IPC_STAT, 0x1000}, 0, ""},
		{"shmctl", [6]uint64{7, unix.IPC_RMID}, neg(-1), ""},
		{"shm_open", [6]uint64{0x1000, unix.O_CREAT}, 3, "+0x3/1"},
		{"shm_unlink", [6]uint64{0x1000}, 0, "-0x0"}, // no id: the name is its argument record
		{"shm_unlink", [6]uint64{0x1000}, neg(-1), ""},

		// mmap
		{"mmap", [6]uint64{0, 8192, unix.PROT_READ, unix.MAP_PRIVATE}, p, "+0x55550000b000/8192"},
		{"mmap", [6]uint64{0, 8192, unix.PROT_READ, unix.MAP_PRIVATE}, neg(-1), ""}, // MAP_FAILED
		{"mmap64", [6]uint64{0, 4096}, p, "+0x55550000b000/4096"},
		{"munmap", [6]uint64{p, 8192}, 0, "-0x55550000b000"},
		{"munmap", [6]uint64{p, 8192}, neg(-1), ""},
		{"mremap", [6]uint64{p, 4096, 8192}, q, "-0x55550000b000 +0x55550000c000/8192"},
		{"mremap", [6]uint64{p, 4096, 8192}, neg(-1), ""},

		// gobject: refcounted, an unref releases a reference
		{"g_object_new", [6]uint64{80}, p, "+0x55550000b000/1"},
		{"g_object_new", [6]uint64{80}, 0, ""},
		{"g_object_newv", [6]uint64{80}, p, "+0x55550000b000/1"},
		{"g_object_new_with_properties", [6]uint64{80}, p, "+0x55550000b000/1"},
		{"g_object_new_valist", [6]uint64{80}, p, "+0x55550000b000/1"},
		{"g_object_ref", [6]uint64{p}, p, "+0x55550000b000/1"},
		{"g_object_unref", [6]uint64{p}, 0, "-0x55550000b000"},
		{"g_type_free_instance", [6]uint64{p}, 0, "-0x55550000b000"},

		// qobject: constructors (void) allocate their this
		{"_ZN7QObjectC1E*", [6]uint64{p, 0}, 0, "+0x55550000b000/1"},
		{"_ZN7QObjectC2E*", [6]uint64{p, q}, 0, "+0x55550000b000/1"},
		{"_ZN7QObjectD0Ev", [6]uint64{p}, 0, "-0x55550000b000"},
		{"_ZN7QObjectD1Ev", [6]uint64{p}, 0, "-0x55550000b000"},
		{"_ZN7QObjectD2Ev", [6]uint64{p}, 0, "-0x55550000b000"},

		// memtransfer: the source (memset's, bzero's: the destination),
		// the size an argument gives (wide: 4 bytes a character) or the
		// string's length rtrace read (args[argLen])
		{"strcpy", [6]uint64{q, p, 0, 0, 0, 28}, q, "+0x55550000b000/28"},
		{"mempcpy", [6]uint64{q, p, 40}, q + 40, "+0x55550000b000/40"},
		{"memmove", [6]uint64{q, p, 40}, q, "+0x55550000b000/40"},
		{"memcpy", [6]uint64{q, p, 40}, q, "+0x55550000b000/40"},
		{"memset", [6]uint64{p, 0, 100}, p, "+0x55550000b000/100"},
		{"strncpy", [6]uint64{q, p, 16}, q, "+0x55550000b000/16"},
		{"stpcpy", [6]uint64{q, p, 0, 0, 0, 5}, q + 5, "+0x55550000b000/5"},
		{"strcat", [6]uint64{q, p, 0, 0, 0, 7}, q, "+0x55550000b000/7"},
		{"strncat", [6]uint64{q, p, 9}, q, "+0x55550000b000/9"},
		{"bcopy", [6]uint64{p, q, 12}, 0, "+0x55550000b000/12"},
		{"bzero", [6]uint64{p, 20}, 0, "+0x55550000b000/20"},
		{"strdup", [6]uint64{p, 0, 0, 0, 0, 3}, q, "+0x55550000b000/3"},
		{"strndup", [6]uint64{p, 4}, q, "+0x55550000b000/4"},
		{"wmemcpy", [6]uint64{q, p, 10}, q, "+0x55550000b000/40"},
		{"wmempcpy", [6]uint64{q, p, 10}, q, "+0x55550000b000/40"},
		{"wmemmove", [6]uint64{q, p, 10}, q, "+0x55550000b000/40"},
		{"wmemset", [6]uint64{p, 'x', 10}, p, "+0x55550000b000/40"},
		{"wcscpy", [6]uint64{q, p, 0, 0, 0, 10}, q, "+0x55550000b000/40"},
		{"wcsncpy", [6]uint64{q, p, 10}, q, "+0x55550000b000/40"},
		{"wcpcpy", [6]uint64{q, p, 0, 0, 0, 10}, q, "+0x55550000b000/40"},
		{"wcpncpy", [6]uint64{q, p, 10}, q, "+0x55550000b000/40"},
		{"wcscat", [6]uint64{q, p, 0, 0, 0, 10}, q, "+0x55550000b000/40"},
		{"wcsncat", [6]uint64{q, p, 10}, q, "+0x55550000b000/40"},
		{"wcsdup", [6]uint64{p, 0, 0, 0, 0, 3}, q, "+0x55550000b000/12"},
	}
	funcs := map[string]*ResFunc{}
	for i := range resModules {
		for j := range resModules[i].Funcs {
			funcs[resModules[i].Funcs[j].Sym] = &resModules[i].Funcs[j]
		}
	}
	did := map[string]bool{}
	for _, c := range cases {
		rf := funcs[c.sym]
		if rf == nil {
			t.Errorf("%s: not a function of a module", c.sym)
			continue
		}
		if c.want != "" {
			did[c.sym] = true
		}
		var peeked []uint64
		peek := func(addr uint64) (uint64, error) {
			peeked = append(peeked, addr)
			return testPeek(addr)
		}
		if got := events(resEffects(nil, rf, &c.args, c.ret, peek)); got != c.want {
			t.Errorf("%s%x = %#x: %q, want %q", c.sym, c.args, c.ret, got, c.want)
		}
		// The out argument is read only after a call that wrote it.
		if len(peeked) > 0 && (rf.Effect != allocOutPtr && rf.Effect != allocOutFds || uint32(c.ret) != 0) {
			t.Errorf("%s%x = %#x: read %#x", c.sym, c.args, c.ret, peeked)
		}
	}
	for sym := range funcs {
		if !did[sym] {
			t.Errorf("%s: no case where it does something", sym)
		}
	}
}

func TestWantBacktrace(t *testing.T) {
	rf := func(sym string) *ResFunc {
		for i := range resModules {
			for j := range resModules[i].Funcs {
				if f := &resModules[i].Funcs[j]; f.Sym == sym {
					return f
				}
			}
		}
		t.Fatalf("no %s", sym)
		return nil
	}
	cases := []struct {
		name    string
		all     bool
		monitor []uint64
		sym     string
		args    [6]uint64
		want    bool
	}{
		{"allocation", false, nil, "malloc", [6]uint64{100}, true},
		{"release", false, nil, "free", [6]uint64{0x1000}, false},
		{"release, --backtrace-all", true, nil, "free", [6]uint64{0x1000}, true},
		{"close", false, nil, "close", [6]uint64{3}, false},
		{"shmctl", false, nil, "shmctl", [6]uint64{7, 0}, false},
		{"open", false, nil, "open", [6]uint64{0x1000}, true},
		// A realloc allocates, a munmap (freeArgOK) releases.
		{"realloc", false, nil, "realloc", [6]uint64{0x1000, 64}, true},
		{"munmap, --backtrace-all", true, nil, "munmap", [6]uint64{0x1000, 4096}, true},
		{"monitored size", false, []uint64{24, 100}, "calloc", [6]uint64{3, 8}, true},
		{"other size", false, []uint64{24, 100}, "malloc", [6]uint64{23}, false},
		{"monitor leaves releases to --backtrace-all", true, []uint64{24}, "free", [6]uint64{0x1000}, true},
		// Resources without a size have size 1.
		{"monitor 1", false, []uint64{1}, "fopen", [6]uint64{0x1000, 0x2000}, true},
	}
	for _, c := range cases {
		tr := &Tracer{cfg: Config{BacktraceAll: c.all, Monitor: c.monitor}}
		if got := tr.wantBacktrace(rf(c.sym), &c.args); got != c.want {
			t.Errorf("%s: wantBacktrace = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestAuditModule: an audited function's call is an allocation of
// resource 1, size 1, whatever its arguments and result.
func TestAuditModule(t *testing.T) {
	m := AuditModule([]string{"parse", "emit*"})
	if m == nil || m.Name != "audit" || len(m.Funcs) != 2 || len(m.Resources) != 1 {
		t.Fatalf("AuditModule: %+v", m)
	}
	if !m.Funcs[1].matchSym("emit_line") || m.Funcs[0].matchSym("parser") {
		t.Error("audited names do not match as -e's patterns do")
	}
	if got := events(resEffects(nil, &m.Funcs[0], &[6]uint64{7, 8}, 0, testPeek)); got != "+0x1/1" {
		t.Errorf("an audited call: %q, want +0x1/1", got)
	}
	if len(AuditModule(nil).Funcs) != 0 || resModules[len(resModules)-1].Funcs != nil {
		t.Error("AuditModule changed the catalog's audit module")
	}
}
