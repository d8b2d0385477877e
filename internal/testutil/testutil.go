package testutil

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/arch/x86/x86asm"
	"golang.org/x/sys/unix"

	"rtrace/internal/uftrace"
)

// Root returns the repository root.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// InCI reports whether the tests run in CI, where a missing tool is a failure.
func InCI() bool { return os.Getenv("CI") == "true" }

// RequireTool returns the path of a tool the test needs. Without it the
// test is skipped, or fails under CI=true.
func RequireTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if InCI() {
			t.Fatalf("%s not found (CI=true: .ci/run must install it): %v", name, err)
		}
		t.Skipf("%s not found: %v", name, err)
	}
	return p
}

// RequireCapability skips the test because the machine lacks what it
// needs (a debug package, a kernel setting), or fails it under CI=true,
// where .ci/run must provide it.
func RequireCapability(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatalf("%s (CI=true: .ci/run must provide it)", msg)
	}
	t.Skip(msg)
}

// BuildC compiles testdata/<src> with gcc and flags, caching the result in
// testdata/build by a hash of the source, the flags and the compiler, and
// returns the binary's absolute path. Concurrent test binaries share the
// cache safely (the result is renamed into place).
func BuildC(t testing.TB, src string, flags ...string) string {
	t.Helper()
	compiler := "gcc"
	if strings.HasSuffix(src, ".cc") || strings.HasSuffix(src, ".cpp") {
		compiler = "g++"
	}
	cc := RequireTool(t, compiler)
	srcPath := filepath.Join(Root(), "testdata", src)
	code, err := os.ReadFile(srcPath)
	if err != nil {
		t.Fatalf("reading fixture: %v", err)
	}
	h := sha256.New()
	h.Write(code)
	h.Write([]byte(cc + "\x00" + strings.Join(flags, "\x00")))
	sum := hex.EncodeToString(h.Sum(nil))[:16]
	name := strings.TrimSuffix(filepath.Base(src), filepath.Ext(src))
	dir := filepath.Join(Root(), "testdata", "build")
	out := filepath.Join(dir, name+"-"+sum)
	if _, err := os.Stat(out); err == nil {
		return out
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.CreateTemp(dir, name+"-*.tmp")
	if err != nil {
		t.Fatal(err)
	}
	tmp.Close()
	args := append([]string{"-o", tmp.Name(), srcPath}, flags...)
	if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		os.Remove(tmp.Name())
		t.Fatalf("%s %s: %v\n%s", compiler, strings.Join(args, " "), err, b)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Strip writes a copy of the binary at path without its symbol table and
// debug sections (strip --strip-all, as Debian ships its programs) into
// the test's temporary directory, and returns its path.
func Strip(t testing.TB, path string) string {
	t.Helper()
	strip := RequireTool(t, "strip")
	out := filepath.Join(t.TempDir(), filepath.Base(path)+"-stripped")
	if b, err := exec.Command(strip, "--strip-all", "-o", out, path).CombinedOutput(); err != nil {
		t.Fatalf("strip %s: %v\n%s", path, err, b)
	}
	return out
}

// Run runs a command and returns its stdout; a non-zero exit fails the test
// with the command's output.
func Run(t testing.TB, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, clip(string(out)), clip(stderr.String()))
	}
	return string(out)
}

func clip(s string) string {
	if len(s) > 4000 {
		return s[:2000] + "\n...\n" + s[len(s)-2000:]
	}
	return s
}

// BuildTags are the build tags of the rtrace command, as the Makefile
// builds it.
const BuildTags = "urfave_cli_no_docs"

// BuildRtrace builds the rtrace command into dir and returns its path: tests
// and benchmarks run it as users do, so signals and exit codes are real.
// With RTRACE_BUILD_RACE=1 under the race detector (make test's third
// pass) rtrace is built with it as well, so the concurrent recorder
// (drain, sinks, windows, signals) is checked by the tests that run it;
// RaceReports finds what it found. Not always: race-built rtrace makes the
// whole e2e suite 14 times slower.
func BuildRtrace(dir string) (string, error) {
	bin := filepath.Join(dir, "rtrace")
	args := []string{"build", "-tags", BuildTags, "-o", bin}
	if RaceBuild() {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/rtrace")...)
	cmd.Dir = Root()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building rtrace: %v\n%s", err, out)
	}
	return bin, nil
}

// CountRecords reads a uftrace.data directory with rtrace's reader, which
// fails the test unless the trace is whole, and counts its ENTRY and EXIT
// records.
func CountRecords(t testing.TB, dir string) (entries, exits int) {
	t.Helper()
	r, err := uftrace.Open(dir)
	if err != nil {
		t.Fatalf("trace unreadable: %v", err)
	}
	defer r.Close()
	for {
		it, err := r.Next()
		if err == io.EOF {
			return entries, exits
		}
		if err != nil {
			t.Fatalf("trace unreadable: %v", err)
		}
		switch it.Type {
		case uftrace.Entry:
			entries++
		case uftrace.Exit:
			exits++
		}
	}
}

// OpenPty returns the two ends of a new pseudo-terminal (pty(7)); the
// caller closes them.
func OpenPty(t testing.TB) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening /dev/ptmx: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

// Disasm lists x86-64 code placed at base in GNU syntax, "; "-separated,
// every address of the low 4 GiB at or above 0x1000 shown as T<hex> so
// that branch and rip-relative targets read as absolute addresses (x86asm
// adds a negative rip displacement as an unsigned 32-bit one: folded back).
func Disasm(t testing.TB, code []byte, base uint64) string {
	t.Helper()
	var lines []string
	for off := 0; off < len(code); {
		in, err := x86asm.Decode(code[off:], 64)
		if err != nil {
			t.Fatalf("decoding % x at +%d: %v", code, off, err)
		}
		lines = append(lines, x86asm.GNUSyntax(in, base+uint64(off), func(orig uint64) (string, uint64) {
			if a := orig & 0xffffffff; a >= 0x1000 {
				return fmt.Sprintf("T%#x", a), orig
			}
			return "", 0
		}))
		off += in.Len
	}
	return strings.Join(lines, "; ")
}

// RaceBuild reports whether BuildRtrace builds rtrace with the race
// detector: RTRACE_BUILD_RACE=1 in tests that run with it.
func RaceBuild() bool { return Race && os.Getenv("RTRACE_BUILD_RACE") == "1" }

// RaceLog makes every race-detector build that this process starts (rtrace
// built by BuildRtrace) write its reports into dir instead of its stderr,
// where a test that expects a failure would not see them, by setting
// GORACE's log_path (https://go.dev/doc/articles/race_detector#Options).
// It does nothing unless RaceBuild.
func RaceLog(dir string) {
	if RaceBuild() {
		os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" log_path="+filepath.Join(dir, "race")))
	}
}

// RaceReports returns the reports that race-detector builds wrote into dir
// (RaceLog), one per file, "" when there are none.
func RaceReports(dir string) string {
	files, _ := filepath.Glob(filepath.Join(dir, "race.*"))
	var b strings.Builder
	for _, f := range files {
		if data, err := os.ReadFile(f); err == nil && len(data) > 0 {
			fmt.Fprintf(&b, "== %s\n%s\n", f, data)
		}
	}
	return b.String()
}

// KeepOnFailure copies dir, a test's temporary directory (its traces),
// to $RTRACE_KEEP_FAILED/<test name> when the test fails: a failure that
// shows once in hundreds of runs (make stress) keeps what it recorded.
// Call it after t.TempDir, whose removal comes after this copy.
func KeepOnFailure(t testing.TB, dir string) {
	keep := os.Getenv("RTRACE_KEEP_FAILED")
	if keep == "" {
		return
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		dst := filepath.Join(keep, strings.NewReplacer("/", "-", " ", "_").Replace(t.Name()))
		if err := os.MkdirAll(dst, 0o755); err == nil {
			err = os.CopyFS(dst, os.DirFS(dir))
			t.Logf("kept %s in %s (%v)", dir, dst, err)
		}
	})
}
