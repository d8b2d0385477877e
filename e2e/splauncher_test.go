package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"rtrace/internal/testutil"
)

// spLog is what sp-rtrace's launcher test (tests/sp-rtrace.rtrace/
// rtrace.exp, check_log, in github.com/mer-tools/sp-rtrace) counts in a
// text trace, with its own patterns: header lines, mapping lines, malloc
// and free records, and the backtrace frames of each record.
type spLog struct {
	header, mmap, malloc, free int
	frames                     []int // per record, in order
}

var (
	spHeader  = regexp.MustCompile(`^version.*, arch.*, timestamp=[0-9]+\.[0-9]+\.[0-9]+ [0-9]+:[0-9]+:[0-9]+, .*process.*pid=[0-9]+,`)
	spMapping = regexp.MustCompile(`^: [^\s]+ => 0x[0-9a-fA-F]+-0x[0-9a-fA-F]+`)
	spMalloc  = regexp.MustCompile(`^[0-9]+\. \[[^\]]+\] malloc\([0-9]+\) = 0x[0-9a-fA-F]+`)
	spFree    = regexp.MustCompile(`^[0-9]+\. \[[^\]]+\] free\(0x[0-9a-fA-F]+\)`)
	spRecord  = regexp.MustCompile(`^[0-9]+\. `)
	spFrame   = regexp.MustCompile(`^\t0x[0-9a-fA-F]+`)
)

func parseSpLog(text string) spLog {
	var l spLog
	for _, line := range strings.Split(text, "\n") {
		switch {
		case spHeader.MatchString(line):
			l.header++
		case spMapping.MatchString(line):
			l.mmap++
		case spMalloc.MatchString(line):
			l.malloc++
		case spFree.MatchString(line):
			l.free++
		}
		switch {
		case spRecord.MatchString(line):
			l.frames = append(l.frames, 0)
		case spFrame.MatchString(line) && len(l.frames) > 0:
			l.frames[len(l.frames)-1]++
		}
	}
	return l
}

// checkSpLog fails unless the trace in path (text, or a raw stream read
// through rtrace postproc) has what check_log asks: a header, two
// mappings, a malloc and a free, and with depth >= 0, depth frames in
// every record.
func checkSpLog(t *testing.T, dir, path string, depth int) {
	t.Helper()
	var text string
	if strings.HasSuffix(path, ".txt") {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		text = string(b)
	} else {
		r := runCmd(t, dir, rtraceBin, "postproc", "-i", path)
		if r.code != 0 {
			t.Fatalf("postproc -i %s: %s", path, r.stderr)
		}
		text = r.stdout
	}
	l := parseSpLog(text)
	if l.header < 1 || l.mmap < 2 || l.malloc < 1 || l.free < 1 {
		t.Errorf("%s: %d header, %d mapping, %d malloc, %d free records; want at least 1, 2, 1, 1:\n%s", path, l.header, l.mmap, l.malloc, l.free, clipLines(text, 40))
	}
	for i, n := range l.frames {
		if depth >= 0 && n != depth {
			t.Errorf("%s: record %d has %d frames, want %d:\n%s", path, i+1, n, depth, clipLines(text, 60))
			break
		}
	}
}

// writtenTo is the file a "trace written to FILE" line names, under dir.
func writtenTo(t *testing.T, dir, line string) string {
	t.Helper()
	_, path, ok := strings.Cut(line, "trace written to ")
	if !ok || path == "" || strings.Contains(path, ", ") {
		t.Fatalf("%q names no one file", line)
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	return path
}

// TestSpRtraceLauncher runs the scenarios of sp-rtrace's launcher test
// (rtrace.exp) on its test program (testdata/spchain.c, trace_test.c
// made a stepper: the test runs the rounds between toggles instead of
// sleeping) with rtrace as sp-rtrace, on its command lines: start-up
// traces with -o<dir> -s -A [-P-t] [-m], tracing left off, five toggles
// by `sp-rtrace [-m] -t PID` making five files, and backtrace depths.
// In managed mode (-m) the toggle only switches and the recording writes
// the trace; otherwise the toggle writes it, where the recording's -o
// and -P say (the toggle gets neither, as in rtrace.exp, and runs in
// another directory).
func TestSpRtraceLauncher(t *testing.T) {
	prog := testutil.BuildC(t, "spchain.c", "-O0", "-fno-omit-frame-pointer")
	var progArgs []string // the depth test's
	launch := func(t *testing.T, dir string, args ...string) (*stepper, *lineLog, int) {
		t.Helper()
		args = append(append(append([]string{"sp-rtrace", "-e", "memory", "-oD"}, args...), "-x", prog), progArgs...)
		s, errs, pid := startStepped(t, dir, nil, args...)
		if pid == 0 {
			t.Fatalf("the program did not start:\n%s", errs.String())
		}
		return s, errs, pid
	}
	end := func(t *testing.T, s *stepper, errs *lineLog) {
		t.Helper()
		s.in.Close()
		s.out.drain()
		errs.drain()
		if err := s.cmd.Wait(); err != nil {
			t.Fatalf("rtrace sp-rtrace: %v\n%s", err, errs.String())
		}
	}
	for _, mode := range []string{"", "-m"} {
		name := map[string]string{"": "normal", "-m": "managed"}[mode]
		t.Run("notrace/"+name, func(t *testing.T) {
			tmp := t.TempDir()
			s, errs, _ := launch(t, tmp, strings.Fields(mode)...)
			s.steps(2)
			end(t, s, errs)
			if files, _ := filepath.Glob(filepath.Join(tmp, "D", "*")); len(files) > 0 {
				t.Errorf("tracing never turned on, yet %v written", files)
			}
			if !strings.Contains(errs.String(), "nothing saved") {
				t.Errorf("rtrace did not say that nothing was saved:\n%s", errs.String())
			}
		})
		for _, post := range []string{"-P-t", ""} {
			t.Run("startup/"+name+post, func(t *testing.T) {
				tmp := t.TempDir()
				s, errs, _ := launch(t, tmp, append([]string{"-s", "-A"}, strings.Fields(mode+" "+post)...)...)
				s.steps(2)
				end(t, s, errs)
				files := rawFiles(t, filepath.Join(tmp, "D"), "")
				if len(files) != 1 || strings.HasSuffix(files[0], ".txt") != (post != "") {
					t.Fatalf("files %v, want one %s", files, map[bool]string{true: "text trace", false: "raw stream"}[post != ""])
				}
				checkSpLog(t, tmp, files[0], -1)
			})
		}
		for _, start := range []string{"", "-s"} {
			for _, post := range []string{"", "-P-t"} {
				t.Run("toggle/"+name+start+post, func(t *testing.T) {
					tmp := t.TempDir()
					s, errs, pid := launch(t, tmp, append(strings.Fields(start+" "+mode+" "+post), "-A")...)
					toggle := append(strings.Fields(mode), "-t", strconv.Itoa(pid))
					// The toggles run elsewhere: the windows still go to
					// the recording's -oD (an absolute path in its stream).
					elsewhere := t.TempDir()
					var files []string
					for i := range 5 {
						var listener *exec.Cmd
						var ll *lineLog
						switch {
						case i == 0 && start != "": // on from the start
						case mode == "":
							// The toggle listens, and writes the window.
							listener = exec.Command(rtraceBin, append([]string{"sp-rtrace"}, toggle...)...)
							listener.Dir = elsewhere
							lerr, _ := listener.StderrPipe()
							if err := listener.Start(); err != nil {
								t.Fatal(err)
							}
							ll = newLineLog(lerr)
							if ll.waitFor("turned on") == "" {
								t.Fatalf("toggle %d did not turn tracing on:\n%s", i, ll.String())
							}
						default:
							// Managed: it returns once tracing is on.
							if r := runCmd(t, elsewhere, rtraceBin, append([]string{"sp-rtrace"}, toggle...)...); r.code != 0 || !strings.Contains(r.stderr, "turned on") {
								t.Fatalf("toggle %d on: %+v", i, r)
							}
						}
						s.steps(1)
						if r := runCmd(t, elsewhere, rtraceBin, append([]string{"sp-rtrace"}, toggle...)...); r.code != 0 || !strings.Contains(r.stderr, "turned off") {
							t.Fatalf("toggle %d off: %+v", i, r)
						}
						var line string
						if listener != nil {
							line = ll.waitFor("trace written to")
							ll.drain()
							if err := listener.Wait(); err != nil {
								t.Fatalf("toggle %d: %v\n%s", i, err, ll.String())
							}
						} else {
							// The recording wrote it (managed, or the
							// window it started with: no listener).
							line = errs.waitFor("trace written to")
						}
						if line == "" {
							t.Fatalf("window %d: no one said where it went\n%s", i, errs.String())
						}
						files = append(files, writtenTo(t, tmp, line))
					}
					end(t, s, errs)
					if stray, _ := filepath.Glob(filepath.Join(elsewhere, "*")); len(stray) > 0 {
						t.Errorf("the toggles wrote %v where they ran", stray)
					}
					if all := rawFiles(t, filepath.Join(tmp, "D"), ""); len(all) != 5 {
						t.Errorf("five toggles made %v, want five files in D", all)
					}
					for _, f := range files {
						if filepath.Dir(f) != filepath.Join(tmp, "D") || strings.HasSuffix(f, ".txt") != (post != "") {
							t.Errorf("%s: want a %s in the recording's -o D", f, map[bool]string{true: "text trace", false: "raw stream"}[post != ""])
						}
						checkSpLog(t, tmp, f, 10) // the default depth, -A: frees too
					}
				})
			}
		}
	}
	// Backtrace depths, as rtrace.exp's test_startup -bN -P-t: every
	// record has N frames; with 20, more than the program's stack has,
	// every record its whole stack: zero() is 17 calls deep with round()
	// made 6 levels deeper, main and libc's start (_start,
	// __libc_start_main, __libc_start_call_main).
	progArgs = []string{"6"}
	for _, depth := range []int{0, 2, 4, 20} {
		t.Run("depth/"+strconv.Itoa(depth), func(t *testing.T) {
			tmp := t.TempDir()
			s, errs, _ := launch(t, tmp, "-s", "-A", "-b"+strconv.Itoa(depth), "-P-t")
			s.steps(2)
			end(t, s, errs)
			files := rawFiles(t, filepath.Join(tmp, "D"), ".txt")
			if len(files) != 1 {
				t.Fatalf("files %v, want one text trace", files)
			}
			if depth < 20 {
				checkSpLog(t, tmp, files[0], depth)
				return
			}
			checkSpLog(t, tmp, files[0], -1)
			b, _ := os.ReadFile(files[0])
			l := parseSpLog(string(b))
			whole := 0
			for _, n := range l.frames {
				if n > depth {
					t.Errorf("a record has %d frames, more than -b %d", n, depth)
				}
				if n == 17 {
					whole++
				}
			}
			if whole != 4 { // two rounds: a malloc and a free each
				t.Errorf("%d records with the whole stack of zero() (17 frames), want 4: %v", whole, l.frames)
			}
		})
	}
}

// buildSpPostproc builds sp-rtrace's own sp-rtrace-postproc from the
// snapshot's sources, as its src/Makefile.am lists them (without
// autotools: config.h holds the few macros they use; the library's
// tracker, which needs libiberty's demangler, is not among what the
// post-processor calls).
func buildSpPostproc(t *testing.T) string {
	t.Helper()
	_, gitDir := spSnapshot(t)
	dir := t.TempDir()
	archive := exec.Command("git", "--git-dir", gitDir, "archive", "HEAD", "src")
	untar := exec.Command("tar", "x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	untar.Stdin = pipe
	if err := untar.Start(); err != nil {
		t.Fatal(err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive: %v", err)
	}
	if err := untar.Wait(); err != nil {
		t.Fatalf("tar: %v", err)
	}
	src := filepath.Join(dir, "src")
	config := "#define _GNU_SOURCE 1\n#define BUILD_ARCH \"x86_64\"\n#define PACKAGE_STRING \"sp-rtrace 1.8\"\n#define VERSION \"1.8\"\n"
	if err := os.WriteFile(filepath.Join(src, "config.h"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sp-rtrace-postproc")
	args := []string{"-O1", "-w", `-DBINDIR="/nonexistent"`, `-DLIBDIR="/nonexistent"`, "-I.", "-Ilibrary", "-Icommon", "-o", bin}
	for _, f := range []string{"rtrace-postproc/sp_rtrace_postproc.c", "rtrace-postproc/parse_binary.c", "rtrace-postproc/parse_text.c",
		"rtrace-postproc/leaks_sort.c", "rtrace-postproc/writer.c", "rtrace-postproc/filter.c",
		"common/rtrace_data.c", "common/htable.c", "common/dlist.c", "common/utils.c", "common/header.c", "common/msg.c", "common/resolve_utils.c",
		"library/sp_rtrace_context.c", "library/sp_rtrace_formatter.c", "library/sp_rtrace_parser.c", "library/sp_rtrace_filter.c"} {
		args = append(args, f)
	}
	cc := exec.Command(testutil.RequireTool(t, "gcc"), append(args, "-lrt", "-lpthread")...)
	cc.Dir = src
	if out, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("building sp-rtrace-postproc: %v\n%s", err, out)
	}
	return bin
}

// spCalls is the records of a text trace, each with its arguments and
// frames, sorted
// (the leak report's order of equal sizes is each tool's own), and the
// allocation summaries of -c.
func spCalls(text string) []string {
	var calls []string
	for _, line := range strings.Split(text, "\n") {
		switch {
		case spRecord.MatchString(line), strings.HasPrefix(line, "# allocation summary"):
			calls = append(calls, line)
		case (spFrame.MatchString(line) || strings.HasPrefix(line, "\t$")) && !strings.HasPrefix(line, "\t$leak") && len(calls) > 0:
			// Its frames and arguments (rtrace's leak kinds left out).
			calls[len(calls)-1] += " " + strings.TrimSpace(line)
		}
	}
	slices.Sort(calls)
	return calls
}

// TestSpRtracePostprocReads: sp-rtrace's own post-processor, built from
// the snapshot, reads what rtrace writes as sp-rtrace's binary stream
// (postproc -O wire-2.0), and finds the calls, arguments and backtraces
// rtrace's own reader finds in the raw file: the writer checked by a
// reader that is not rtrace's. Its -l -c leak report holds the leaks
// rtrace's holds (glibc's own left in: sp-rtrace has no suppressions).
// rtrace's raw 3.3 files are not for it: it stops at the first packet
// type it does not know (docs/PROTOCOL.md).
func TestSpRtracePostprocReads(t *testing.T) {
	spPost := buildSpPostproc(t)
	chain := testutil.BuildC(t, "spchain.c", "-O0", "-fno-omit-frame-pointer")
	files := testutil.BuildC(t, "fileleak.c", "-O0")
	for _, p := range []struct {
		name, prog, module string
		steps              bool
		least              [2]int // records, plain and -l -c
	}{
		// 3 rounds' mallocs and frees; stdio's two buffers never freed.
		{"memory", chain, "memory", true, [2]int{6, 4}},
		// Arguments (path, flags, mode, fd); 5 leaks.
		{"file", files, "file", false, [2]int{8, 10}},
	} {
		t.Run(p.name, func(t *testing.T) {
			tmp := t.TempDir()
			args := []string{"sp-rtrace", "-e", p.module, "-oD", "-s", "-A", "-b", "6", "-x", p.prog}
			if p.steps {
				s, errs, _ := startStepped(t, tmp, nil, args...)
				s.steps(3)
				s.in.Close()
				s.out.drain()
				errs.drain()
				if err := s.cmd.Wait(); err != nil {
					t.Fatalf("rtrace sp-rtrace: %v\n%s", err, errs.String())
				}
			} else if r := runCmd(t, tmp, rtraceBin, args...); r.code != 0 {
				t.Fatalf("rtrace sp-rtrace: %s", r.stderr)
			}
			raw := rawFiles(t, filepath.Join(tmp, "D"), ".rtrace")
			if len(raw) != 1 {
				t.Fatalf("raw files %v, want one", raw)
			}
			if r := runCmd(t, tmp, rtraceBin, "postproc", "-O", "wire-2.0", "-i", raw[0], "-o", "v20.rtrace"); r.code != 0 {
				t.Fatalf("postproc -O wire-2.0: %s", r.stderr)
			}
			for i, c := range []struct{ sp, rt []string }{
				{nil, nil},
				{[]string{"-l", "-c"}, []string{"-l", "-c", "--disable-builtin-suppressions"}},
			} {
				sp := exec.Command(spPost, append(c.sp, "-i", "v20.rtrace")...)
				sp.Dir = tmp
				out, err := sp.CombinedOutput()
				if err != nil {
					t.Fatalf("sp-rtrace-postproc %v: %v\n%s", c.sp, err, out)
				}
				if strings.Contains(string(out), "WARNING") || strings.Contains(string(out), "ERROR") {
					t.Errorf("sp-rtrace-postproc %v complained:\n%s", c.sp, clipLines(string(out), 20))
				}
				r := runCmd(t, tmp, rtraceBin, append(append([]string{"postproc"}, c.rt...), "-i", raw[0])...)
				if r.code != 0 {
					t.Fatalf("rtrace postproc %v: %s", c.rt, r.stderr)
				}
				got, want := spCalls(string(out)), spCalls(r.stdout)
				if len(want) < p.least[i] || !slices.Equal(got, want) {
					k := 0
					for k < min(len(got), len(want)) && got[k] == want[k] {
						k++
					}
					t.Errorf("sp-rtrace-postproc %v read %d records, rtrace %d (want %d or more); the first that differs, #%d:\n got %q\nwant %q",
						c.sp, len(got), len(want), p.least[i], k, append(got, "")[k], append(want, "")[k])
				}
			}
		})
	}
}
