package uftrace

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"rtrace/internal/cxxname"
)

// libcShown says which arguments and return values of C library functions
// -a records (and -A FUNC, -R FUNC for a function without DWARF), and how
// each is shown: the functions, types and enum constants uftrace 0.13
// shows with its own -a (its argauto, retauto and enumauto info lines), so
// that a trace of rtrace reads as uftrace's does. It is written here as C
// declarations of what is shown, not of the exact prototypes: a type is
// shown as uftrace shows it (strcpy's destination as a pointer, its return
// not at all; open without its mode), and the parameters of other types
// (mode_t) are left out at the end of a list. The enum constants are Linux
// x86-64's (the man pages of each function; <fcntl.h>, <sys/mman.h>,
// <signal.h>, <sys/prctl.h>). Where uftrace errs, rtrace does not: it
// spells LC_CTYPE, F_SETSIG and AF_TIPC right, and shows prctl's five
// arguments (uftrace reads each "unsigned long" as two, nine in all).
// TestLibcMatchesUftrace holds the table against uftrace's.
//
// Types: int (d32), short (d16), char (c), float and double (fparg), char *
// (a string), other pointers and funcptr_t (p), pid_t and uid_t (i32),
// unsigned types and size_t (u), off64_t (d64), enum NAME (its constants);
// long, ssize_t, off_t and the other integer types as plain numbers.
const libcShown = `
int atoi(const char *); long atol(const char *); double atof(const char *);
long strtol(const char *, void *, int); unsigned long strtoul(const char *, void *, int);
double strtod(const char *, void *); float strtof(const char *, void *);
void qsort(void *, size_t, size_t, funcptr_t); void qsort_r(void *, size_t, size_t, funcptr_t, void *);
void *bsearch(const void *, const void *, size_t, size_t, funcptr_t);
void exit(int);

void *malloc(size_t); void free(void *); void *calloc(size_t, size_t); void *realloc(void *, size_t);
enum rt_mmap_prot { PROT_NONE = 0, PROT_READ = 1, PROT_WRITE = 2, PROT_EXEC = 4 };
enum rt_mmap_flag { MAP_SHARED = 0x1, MAP_PRIVATE = 0x2, MAP_FIXED = 0x10, MAP_ANON = 0x20,
	MAP_GROWSDOWN = 0x100, MAP_DENYWRITE = 0x800, MAP_EXECUTABLE = 0x1000, MAP_LOCKED = 0x2000,
	MAP_NORESERVE = 0x4000, MAP_POPULATE = 0x8000, MAP_NONBLOCK = 0x10000, MAP_STACK = 0x20000,
	MAP_HUGETLB = 0x40000 };
void *mmap(void *, size_t, enum rt_mmap_prot, enum rt_mmap_flag, int, off_t);
void *mmap64(void *, size_t, enum rt_mmap_prot, enum rt_mmap_flag, int, off64_t);
int munmap(void *, size_t); int mprotect(void *, size_t, enum rt_mmap_prot);
enum rt_madvise { MADV_NORMAL = 0, MADV_RANDOM = 1, MADV_SEQUENTIAL = 2, MADV_WILLNEED = 3,
	MADV_DONTNEED = 4, MADV_FREE = 8, MADV_REMOVE = 9, MADV_DONTFORK = 10, MADV_DOFORK = 11,
	MADV_MERGEABLE = 12, MADV_UNMERGEABLE = 13, MADV_HUGEPAGE = 14, MADV_NOHUGEPAGE = 15,
	MADV_DONTDUMP = 16, MADV_DODUMP = 17, MADV_HWPOISON = 100 };
int madvise(void *, size_t, enum rt_madvise);
enum rt_posix_madvise { POSIX_MADV_NORMAL = 0, POSIX_MADV_RANDOM = 1, POSIX_MADV_SEQUENTIAL = 2,
	POSIX_MADV_WILLNEED = 3, POSIX_MADV_DONTNEED = 4 };
int posix_madvise(void *, size_t, enum rt_posix_madvise);
enum rt_posix_fadvise { POSIX_FADV_NORMAL = 0, POSIX_FADV_RANDOM = 1, POSIX_FADV_SEQUENTIAL = 2,
	POSIX_FADV_WILLNEED = 3, POSIX_FADV_DONTNEED = 4, POSIX_FADV_NOREUSE = 5 };
int posix_fadvise(int, off_t, off_t, enum rt_posix_fadvise);
int brk(void *); void *sbrk(intptr_t);
void *memalign(size_t, size_t); void *pvalloc(size_t); int posix_memalign(void **, size_t, size_t);
void *aligned_alloc(size_t, size_t); void *valloc(size_t);

char *strcat(char *, const char *); char *strncat(char *, const char *, size_t);
void strcpy(void *, const char *); void strncpy(void *, const char *, size_t);
size_t strlen(const char *); size_t strnlen(const char *, size_t);
int strcmp(const char *, const char *); int strncmp(const char *, const char *, size_t);
int strcasecmp(const char *, const char *); int strncasecmp(const char *, const char *, size_t);
char *strdup(const char *); char *strndup(const char *, size_t);
char *strdupa(const char *); char *strndupa(const char *, size_t);
int strcoll(const char *, const char *);
char *strstr(const char *, const char *); char *strcasestr(const char *, const char *);
char *strchr(const char *, char); char *strrchr(const char *, char); char *strchrnul(const char *, char);
char *strtok(char *, const char *); char *strtok_r(char *, const char *, char **);
char *strpbrk(const char *, const char *);
size_t strspn(const char *, const char *); size_t strcspn(const char *, const char *);
char *strsep(char **, const char *);
void memcpy(void *, const void *, size_t); void memset(void *, int, size_t);
int memcmp(const void *, const void *, size_t); void memmove(void *, const void *, size_t);
void *memchr(const void *, int, size_t); void *memrchr(const void *, int, size_t);
void *rawmemchr(const void *, int);

int printf(const char *, ...); int fprintf(FILE *, const char *, ...);
int dprintf(int, const char *, ...); int sprintf(void *, const char *, ...);
int snprintf(void *, size_t, const char *, ...);
int fputc(char, FILE *); int fputs(const char *, FILE *); int putc(char, FILE *);
int putchar(char); int puts(const char *);
char fgetc(FILE *); char *fgets(void *, int, FILE *); char getc(FILE *); char getchar(void);
char ungetc(char, FILE *);
char *getenv(const char *); int setenv(const char *, const char *, int); int unsetenv(const char *);

enum rt_open_flag { O_RDONLY = 00, O_WRONLY = 01, O_RDWR = 02, O_CREAT = 0100, O_EXCL = 0200,
	O_NOCTTY = 0400, O_TRUNC = 01000, O_APPEND = 02000, O_NONBLOCK = 04000, O_DSYNC = 010000,
	O_ASYNC = 020000, O_DIRECT = 040000, O_LARGEFILE = 0100000, O_DIRECTORY = 0200000,
	O_NOFOLLOW = 0400000, O_NOATIME = 01000000, O_CLOEXEC = 02000000, O_SYNC = 04010000,
	O_PATH = 010000000 };
int open(const char *, enum rt_open_flag); int open64(const char *, enum rt_open_flag);
int openat(int, const char *, enum rt_open_flag); int open64at(int, const char *, enum rt_open_flag);
int close(int);
enum rt_fcntl_cmd { F_DUPFD = 0, F_GETFD = 1, F_SETFD = 2, F_GETFL = 3, F_SETFL = 4, F_GETLK = 5,
	F_SETLK = 6, F_SETLKW = 7, F_SETOWN = 8, F_GETOWN = 9, F_SETSIG = 10, F_GETSIG = 11,
	F_GETLK64 = 12, F_SETLK64 = 13, F_SETLKW64 = 14, F_SETOWN_EX = 15, F_GETOWN_EX = 16 };
int fcntl(int, enum rt_fcntl_cmd); int fcntl64(int, enum rt_fcntl_cmd);
enum rt_seek_whence { SEEK_SET = 0, SEEK_CUR = 1, SEEK_END = 2, SEEK_DATA = 3, SEEK_HOLE = 4 };
off_t lseek(int, off_t, enum rt_seek_whence);
enum rt_falloc_mode { FALLOC_FL_KEEP_SIZE = 1, FALLOC_FL_PUNCH_HOLE = 2, FALLOC_FL_NO_HIDE_STALE = 4,
	FALLOC_FL_COLLAPSE_RANGE = 8, FALLOC_FL_ZERO_RANGE = 16, FALLOC_FL_INSERT_RANGE = 32,
	FALLOC_FL_UNSHARE_RANGE = 64 };
int fallocate(int, enum rt_falloc_mode, off_t, off_t);
int fsync(int); int fdatasync(int);
FILE *fopen(const char *, const char *); FILE *fopen64(const char *, const char *);
FILE *fdopen(int, const char *); FILE *freopen(const char *, const char *, FILE *);
int fclose(FILE *); int fseek(FILE *, long, int); long ftell(FILE *); int fflush(FILE *);
ssize_t read(int, void *, size_t); ssize_t write(int, const void *, size_t);
size_t fread(void *, size_t, size_t, FILE *); size_t fwrite(const void *, size_t, size_t, FILE *);
int feof(FILE *); int ferror(FILE *); int fileno(FILE *);
enum rt_access_mode { F_OK = 0, X_OK = 1, W_OK = 2, R_OK = 4 };
int access(const char *, enum rt_access_mode);
int unlink(const char *); int unlinkat(int, const char *, int);
int mkdir(const char *); int rmdir(const char *); int chdir(const char *);
void *opendir(const char *); int closedir(void *);
char *getcwd(void *, size_t);
char *dirname(char *); char *basename(char *);

pid_t fork(void); pid_t vfork(void);
int execl(const char *, const char *, ...); int execlp(const char *, const char *, ...);
int execle(const char *, const char *, ...);
int execv(const char *, ...); int execvp(const char *, ...); int execve(const char *, ...);
int execvpe(const char *, ...);
pid_t wait(int *); pid_t waitpid(pid_t, int *, int);
pid_t getpid(void); pid_t getppid(void); pid_t gettid(void);
enum rt_dlopen_flag { RTLD_LOCAL = 0, RTLD_LAZY = 1, RTLD_NOW = 2, RTLD_NOLOAD = 4,
	RTLD_DEEPBIND = 8, RTLD_GLOBAL = 0x100, RTLD_NODELETE = 0x1000 };
void *dlopen(const char *, enum rt_dlopen_flag); void *dlmopen(Lmid_t, const char *, int);
void *dlsym(void *, const char *); void *dlvsym(void *, char *, char *);
int dlclose(void *); char *dlerror(void);

int pthread_create(pthread_t *, const pthread_attr_t *, funcptr_t, void *);
int pthread_once(pthread_once_t *, funcptr_t);
int pthread_join(pthread_t, void **); int pthread_detach(pthread_t);
int pthread_kill(pthread_t, int); int pthread_cancel(pthread_t); void pthread_exit(void *);
int pthread_mutex_lock(pthread_mutex_t *); int pthread_mutex_trylock(pthread_mutex_t *);
int pthread_mutex_unlock(pthread_mutex_t *); int pthread_mutex_destroy(pthread_mutex_t *);
int pthread_mutex_init(pthread_mutex_t *, const pthread_mutexattr_t *);
int pthread_cond_wait(pthread_cond_t *, pthread_mutex_t *);
int pthread_cond_timedwait(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
int pthread_cond_signal(pthread_cond_t *); int pthread_cond_broadcast(pthread_cond_t *);

enum rt_socket_domain { AF_UNSPEC = 0, AF_UNIX = 1, AF_INET = 2, AF_AX25 = 3, AF_IPX = 4,
	AF_APPLETALK = 5, AF_NETROM = 6, AF_BRIDGE = 7, AF_ATMPVC = 8, AF_X25 = 9, AF_INET6 = 10,
	AF_ROSE = 11, AF_DECnet = 12, AF_NETBEUI = 13, AF_SECURITY = 14, AF_KEY = 15,
	AF_NETLINK = 16, AF_PACKET = 17, AF_ASH = 18, AF_ECONET = 19, AF_ATMSVC = 20, AF_RDS = 21,
	AF_SNA = 22, AF_IRDA = 23, AF_PPPOX = 24, AF_WANPIPE = 25, AF_LLC = 26, AF_IB = 27,
	AF_MPLS = 28, AF_CAN = 29, AF_TIPC = 30, AF_BLUETOOTH = 31, AF_IUCV = 32, AF_RXRPC = 33,
	AF_ISDN = 34, AF_PHONET = 35, AF_IEEE802154 = 36, AF_CAIF = 37, AF_ALG = 38, AF_NFC = 39,
	AF_VSOCK = 40, AF_KCM = 41, AF_QIPCRTR = 42, AF_SMC = 43 };
enum rt_socket_type { SOCK_STREAM = 1, SOCK_DGRAM = 2, SOCK_RAW = 3, SOCK_RDM = 4,
	SOCK_SEQPACKET = 5, SOCK_DCCP = 6, SOCK_PACKET = 10 };
enum rt_socket_flag { SOCK_NONBLOCK = 04000, SOCK_CLOEXEC = 02000000 };
int socket(enum rt_socket_domain, enum rt_socket_type, int);
int connect(int, const struct sockaddr *, socklen_t); int bind(int, const struct sockaddr *, socklen_t);
int accept(int, struct sockaddr *, socklen_t *);
int accept4(int, struct sockaddr *, socklen_t *, enum rt_socket_flag);
struct hostent *gethostbyname(const char *);
struct hostent *gethostbyaddr(const void *, socklen_t, enum rt_socket_domain);
int getaddrinfo(const char *, const char *, const struct addrinfo *, struct addrinfo **);
void freeaddrinfo(struct addrinfo *);
int inet_pton(enum rt_socket_domain, const char *, void *);
const char *inet_ntop(enum rt_socket_domain, const void *, char *, socklen_t);
int inet_aton(const char *, struct in_addr *); char *inet_ntoa(struct in_addr);
in_addr_t inet_addr(const char *); in_addr_t inet_network(const char *);

enum rt_signal { SIGNULL = 0, SIGHUP = 1, SIGINT = 2, SIGQUIT = 3, SIGILL = 4, SIGTRAP = 5,
	SIGABRT = 6, SIGBUS = 7, SIGFPE = 8, SIGKILL = 9, SIGUSR1 = 10, SIGSEGV = 11, SIGUSR2 = 12,
	SIGPIPE = 13, SIGALRM = 14, SIGTERM = 15, SIGSTKFLT = 16, SIGCHLD = 17, SIGCONT = 18,
	SIGSTOP = 19, SIGTSTP = 20, SIGTTIN = 21, SIGTTOU = 22, SIGURG = 23, SIGXCPU = 24,
	SIGXFSZ = 25, SIGVTALRM = 26, SIGPROF = 27, SIGWINCH = 28, SIGPOLL = 29, SIGPWR = 30,
	SIGSYS = 31, SIGRTMIN = 32, SIGRTMAX = 64 };
int kill(pid_t, enum rt_signal); int raise(enum rt_signal);
long signal(enum rt_signal, funcptr_t);
int sigaction(enum rt_signal, const struct sigaction *, struct sigaction *);
int sigemptyset(sigset_t *); int sigfillset(sigset_t *);
int sigaddset(sigset_t *, enum rt_signal); int sigdelset(sigset_t *, enum rt_signal);
int sigismember(const sigset_t *, enum rt_signal);
enum rt_sigmask_how { SIG_BLOCK = 0, SIG_UNBLOCK = 1, SIG_SETMASK = 2 };
int sigprocmask(enum rt_sigmask_how, const sigset_t *, sigset_t *);
int pthread_sigmask(enum rt_sigmask_how, const sigset_t *, sigset_t *);

enum rt_prctl_option { PR_SET_PDEATHSIG = 1, PR_GET_PDEATHSIG = 2, PR_GET_DUMPABLE = 3,
	PR_SET_DUMPABLE = 4, PR_GET_UNALIGN = 5, PR_SET_UNALIGN = 6, PR_GET_KEEPCAPS = 7,
	PR_SET_KEEPCAPS = 8, PR_GET_FPEMU = 9, PR_SET_FPEMU = 10, PR_GET_FPEXC = 11, PR_SET_FPEXC = 12,
	PR_GET_TIMING = 13, PR_SET_TIMING = 14, PR_SET_NAME = 15, PR_GET_NAME = 16,
	PR_GET_ENDIAN = 19, PR_SET_ENDIAN = 20, PR_GET_SECCOMP = 21, PR_SET_SECCOMP = 22,
	PR_CAPBSET_READ = 23, PR_CAPBSET_DROP = 24, PR_GET_TSC = 25, PR_SET_TSC = 26,
	PR_GET_SECUREBITS = 27, PR_SET_SECUREBITS = 28, PR_SET_TIMERSLACK = 29,
	PR_GET_TIMERSLACK = 30, PR_TASK_PERF_EVENTS_DISABLE = 31, PR_TASK_PERF_EVENTS_ENABLE = 32,
	PR_MCE_KILL = 33, PR_MCE_KILL_GET = 34, PR_SET_MM = 35, PR_SET_CHILD_SUBREAPER = 36,
	PR_GET_CHILD_SUBREAPER = 37, PR_SET_NO_NEW_PRIVS = 38, PR_GET_NO_NEW_PRIVS = 39,
	PR_GET_TID_ADDRESS = 40, PR_SET_THP_DISABLE = 41, PR_GET_THP_DISABLE = 42,
	PR_MPX_ENABLE_MANAGEMENT = 43, PR_MPX_DISABLE_MANAGEMENT = 44, PR_SET_FP_MODE = 45,
	PR_GET_FP_MODE = 46, PR_CAP_AMBIENT = 47 };
int prctl(enum rt_prctl_option, unsigned long, unsigned long, unsigned long, unsigned long);
int select(int, void *, void *, void *, void *); int pselect(int, void *, void *, void *, void *, sigset_t *);
int poll(struct pollfd *, nfds_t, int); int ppoll(struct pollfd *, nfds_t, void *, sigset_t *);
enum rt_epoll_op { EPOLL_CTL_ADD = 1, EPOLL_CTL_DEL = 2, EPOLL_CTL_MOD = 3 };
int epoll_create(int); int epoll_create1(int); int epoll_ctl(int, enum rt_epoll_op, int, void *);
int epoll_wait(int, void *, int, int); int epoll_pwait(int, void *, int, int, sigset_t *);
long syscall(long, ...); int ioctl(int, unsigned long, long);
void textdomain(const char *); void bindtextdomain(const char *, const char *);
char *gettext(const char *); char *dgettext(const char *, const char *);
char *dcgettext(const char *, const char *, int);
enum rt_locale_category { LC_CTYPE = 0, LC_NUMERIC = 1, LC_TIME = 2, LC_COLLATE = 3,
	LC_MONETARY = 4, LC_MESSAGES = 5, LC_ALL = 6, LC_PAPER = 7, LC_NAME = 8, LC_ADDRESS = 9,
	LC_TELEPHONE = 10, LC_MEASUREMENT = 11, LC_IDENTIFICATION = 12 };
char *setlocale(enum rt_locale_category, const char *);
int getopt(int, void *, const char *); int getopt_long(int, void *, const char *);
int getopt_long_only(int, void *, const char *);
int stat(const char *, void *); int fstat(int, void *); int lstat(const char *, void *);
enum rt_mode { mod_777 = 0777, mod_755 = 0755, mod_666 = 0666, mod_644 = 0644, mod_400 = 0400,
	mod_600 = 0600, mod_660 = 0660, mod_640 = 0640, mod_444 = 0444, mod_022 = 0022,
	mod_440 = 0440, mod_222 = 0222, mod_111 = 0111, mod_011 = 0011, mod_033 = 0033, mod_077 = 0077 };
int chmod(const char *, enum rt_mode); int fchmod(int, enum rt_mode); void umask(enum rt_mode);
int creat(const char *, enum rt_mode); int creat64(const char *, enum rt_mode);
int isatty(int);
uid_t getuid(void); uid_t getgid(void); uid_t geteuid(void); uid_t getegid(void);
int setuid(uid_t); int setgid(uid_t); int seteuid(uid_t); int setegid(uid_t);
int setreuid(uid_t, uid_t); int setregid(uid_t, uid_t);
int setresuid(uid_t, uid_t, uid_t); int setresgid(uid_t, uid_t, uid_t);
int chown(const char *, uid_t, uid_t); int lchown(const char *, uid_t, uid_t); int fchown(int, uid_t, uid_t);
int dup(int); int dup2(int, int);
unsigned sleep(unsigned); int usleep(unsigned);
enum rt_clockid { CLOCK_REALTIME = 0, CLOCK_MONOTONIC = 1, CLOCK_PROCESS_CPUTIME_ID = 2,
	CLOCK_THREAD_CPUTIME_ID = 3, CLOCK_MONOTONIC_RAW = 4, CLOCK_REALTIME_COARSE = 5,
	CLOCK_MONOTONIC_COARSE = 6, CLOCK_BOOTTIME = 7, CLOCK_REALTIME_ALARM = 8,
	CLOCK_BOOTTIME_ALARM = 9, CLOCK_TAI = 11 };
int clock_getres(enum rt_clockid, struct timespec *); int clock_gettime(enum rt_clockid, struct timespec *);
int clock_settime(enum rt_clockid, const struct timespec *);
`

// cxxShown are C++'s operator new and delete, by their mangled names
// (size as an unsigned number, pointers in hex), as uftrace 0.13 shows them.
var cxxShown = [...][3]string{
	// name, argument specs, return spec
	{"_Znwm", "arg1/u", "retval/x"},
	{"_Znam", "arg1/u", "retval/x"},
	{"_ZdlPv", "arg1/x", ""},
	{"_ZdaPv", "arg1/x", ""},
}

// AutoLibc is the table of library functions -a records without DWARF:
// the three info lines uftrace writes (argauto, retauto, enumauto), and
// the specs of each function.
type AutoLibc struct {
	ArgLine, RetLine, EnumLine string
	args, rets                 map[string][]ArgSpec
}

// Args returns the argument specs -a records of library function name
// (matched by its short demangled name, as uftrace matches them: _ZdlPvm,
// the sized delete, is operator delete too).
func (a *AutoLibc) Args(name string) []ArgSpec { return a.args[cxxname.Short(name)] }

// Rets returns the return-value spec -a records of library function name.
func (a *AutoLibc) Rets(name string) []ArgSpec { return a.rets[cxxname.Short(name)] }

// Lines returns the info argspec lines of the table.
func (a *AutoLibc) Lines() []ArgSpecLine {
	return []ArgSpecLine{{"argauto", a.ArgLine}, {"retauto", a.RetLine}, {"enumauto", a.EnumLine}}
}

var libc = sync.OnceValue(func() *AutoLibc {
	a, err := parseShown(libcShown)
	if err != nil {
		panic("uftrace: the built-in table of library functions: " + err.Error())
	}
	return a
})

// Libc returns the built-in table of library functions.
func Libc() *AutoLibc { return libc() }

var (
	declRE = regexp.MustCompile(`^(.*?)\s*\b([A-Za-z_]\w*)\s*\((.*)\)$`)
	enumRE = regexp.MustCompile(`^enum\s+(\w+)\s*\{(.*)\}$`)
)

// parseShown reads declarations written as libcShown is.
func parseShown(src string) (*AutoLibc, error) {
	a := &AutoLibc{}
	seen := map[string]bool{}
	var argItems, retItems, enums []string
	for _, c := range cxxShown {
		argItems = append(argItems, c[0]+"@"+c[1])
		if c[2] != "" {
			retItems = append(retItems, c[0]+"@"+c[2])
		}
	}
	for _, decl := range strings.Split(src, ";") {
		decl = strings.Join(strings.Fields(decl), " ")
		if decl == "" {
			continue
		}
		if m := enumRE.FindStringSubmatch(decl); m != nil {
			var vals []string
			for _, v := range strings.Split(m[2], ",") {
				if v = strings.TrimSpace(v); v != "" {
					vals = append(vals, v)
				}
			}
			enums = append(enums, fmt.Sprintf("enum %s { %s };", m[1], strings.Join(vals, ", ")))
			continue
		}
		m := declRE.FindStringSubmatch(decl)
		if m == nil {
			return nil, fmt.Errorf("%q: not a declaration", decl)
		}
		name := m[2]
		if seen[name] {
			return nil, fmt.Errorf("%s: declared twice", name)
		}
		seen[name] = true
		var items []string
		ints, floats := 0, 0
		for _, p := range strings.Split(m[3], ",") {
			p = strings.TrimSpace(p)
			if p == "void" || p == "..." || p == "" {
				break
			}
			f, ok := shownFormat(p)
			if !ok {
				return nil, fmt.Errorf("%s: parameter type %q", name, p)
			}
			if f == "/32" || f == "/64" {
				floats++
				items = append(items, fmt.Sprintf("fparg%d%s", floats, f))
				continue
			}
			ints++
			items = append(items, fmt.Sprintf("arg%d%s", ints, f))
		}
		if len(items) > 0 {
			argItems = append(argItems, name+"@"+strings.Join(items, ","))
		}
		if ret := strings.TrimSpace(m[1]); ret != "void" {
			f, ok := shownFormat(ret)
			if !ok {
				return nil, fmt.Errorf("%s: return type %q", name, ret)
			}
			if f == "/32" || f == "/64" {
				f = "/f" + f[1:]
			}
			retItems = append(retItems, name+"@retval"+f)
		}
	}
	a.ArgLine = strings.Join(argItems, ";")
	a.RetLine = strings.Join(retItems, ";")
	a.EnumLine = strings.Join(enums, "")
	var err error
	if a.args, err = autoSpecMap(a.ArgLine); err != nil {
		return nil, err
	}
	if a.rets, err = autoSpecMap(a.RetLine); err != nil {
		return nil, err
	}
	return a, nil
}

// shownFormat is the spec suffix a parameter or return type is shown
// with; false for a type the table does not know.
func shownFormat(t string) (string, bool) {
	t = strings.TrimPrefix(strings.TrimSpace(t), "const ")
	switch {
	case strings.HasSuffix(t, "*"):
		if strings.TrimSpace(strings.TrimSuffix(t, "*")) == "char" {
			return "/s", true
		}
		return "/p", true
	case strings.HasPrefix(t, "enum "):
		return "/e:" + strings.TrimPrefix(t, "enum "), true
	case strings.HasPrefix(t, "struct "):
		return "", true // by value (inet_ntoa's in_addr): its first word
	}
	switch t {
	case "int":
		return "/d32", true
	case "short":
		return "/d16", true
	case "char":
		return "/c", true
	case "float":
		return "/32", true
	case "double":
		return "/64", true
	case "funcptr_t":
		return "/p", true
	case "pid_t", "uid_t":
		return "/i32", true
	case "size_t", "unsigned", "unsigned long":
		return "/u", true
	case "off64_t":
		return "/d64", true
	case "long", "ssize_t", "off_t", "intptr_t", "socklen_t", "nfds_t", "pthread_t", "Lmid_t", "in_addr_t":
		return "", true
	}
	return "", false
}
