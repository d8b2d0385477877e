package suite

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Builder prepares the workloads' programs under Dir (bench/build, which
// git ignores) and keeps them: a second run does not rebuild.
type Builder struct {
	Dir  string    // the build cache
	Root string    // the repository (testdata/ holds the fixtures)
	Log  io.Writer // progress: what is fetched and built
}

// run runs a command in dir, its output to the log only when it fails.
func (b *Builder) run(dir string, env []string, argv ...string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s (in %s): %v\n%s", strings.Join(argv, " "), dir, err, tail(string(out), 3000))
	}
	return nil
}

// Fixture compiles testdata/src with flags, once per content and flags.
func (b *Builder) Fixture(src string, flags ...string) (string, error) {
	path := filepath.Join(b.Root, "testdata", src)
	code, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write(code)
	h.Write([]byte(strings.Join(flags, "\x00")))
	name := strings.TrimSuffix(src, filepath.Ext(src))
	out := filepath.Join(b.Dir, "fixtures", name+"-"+hex.EncodeToString(h.Sum(nil))[:12])
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	tmp := out + ".tmp"
	if err := b.run(b.Root, nil, append([]string{"gcc", "-o", tmp, path}, flags...)...); err != nil {
		return "", err
	}
	return out, os.Rename(tmp, out)
}

// aptOptions point apt-get at a private configuration: a deb-src entry for
// Debian's main archive (a machine may have none) and its own lists, so the
// machine's apt state is left as it is.
func (b *Builder) aptOptions() ([]string, error) {
	dir := filepath.Join(b.Dir, "apt")
	lists := filepath.Join(dir, "lists")
	if err := os.MkdirAll(filepath.Join(lists, "partial"), 0o755); err != nil {
		return nil, err
	}
	suite := "bookworm"
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VERSION_CODENAME="); ok && v != "" {
				suite = strings.Trim(v, `"`)
			}
		}
	}
	list := filepath.Join(dir, "sources.list")
	entry := fmt.Sprintf("deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian %s main\n", suite)
	if err := os.WriteFile(list, []byte(entry), 0o644); err != nil {
		return nil, err
	}
	return []string{"-o", "Dir::Etc::SourceList=" + list, "-o", "Dir::Etc::SourceParts=/dev/null",
		"-o", "Dir::State::Lists=" + lists, "-o", "APT::Sandbox::User=root"}, nil
}

// Source fetches the Debian source package pkg (apt-get source) and
// unpacks its upstream tarball; it returns the unpacked tree.
func (b *Builder) Source(pkg string) (string, error) {
	dir := filepath.Join(b.Dir, "src", pkg)
	done := filepath.Join(dir, ".unpacked")
	tree := filepath.Join(dir, "tree")
	if _, err := os.Stat(done); err == nil {
		return tree, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	opts, err := b.aptOptions()
	if err != nil {
		return "", err
	}
	if m, _ := filepath.Glob(filepath.Join(b.Dir, "apt", "lists", "*Sources*")); len(m) == 0 {
		fmt.Fprintf(b.Log, "bench: apt-get update (deb-src, private lists under %s)\n", filepath.Join(b.Dir, "apt"))
		if err := b.run(dir, nil, append(append([]string{"apt-get"}, opts...), "update")...); err != nil {
			return "", err
		}
	}
	fmt.Fprintf(b.Log, "bench: apt-get source %s\n", pkg)
	if err := b.run(dir, nil, append(append([]string{"apt-get"}, opts...), "source", "--download-only", pkg)...); err != nil {
		return "", err
	}
	tars, _ := filepath.Glob(filepath.Join(dir, "*.orig.tar.*"))
	var orig string
	for _, t := range tars {
		if !strings.Contains(filepath.Base(t), ".orig-") && !strings.HasSuffix(t, ".asc") {
			orig = t
		}
	}
	if orig == "" {
		return "", fmt.Errorf("apt-get source %s: no upstream tarball in %s", pkg, dir)
	}
	os.RemoveAll(tree)
	if err := os.MkdirAll(tree, 0o755); err != nil {
		return "", err
	}
	if err := b.run(tree, nil, "tar", "xf", orig, "--strip-components=1"); err != nil {
		return "", err
	}
	return tree, os.WriteFile(done, nil, 0o644)
}

// Program is a real program built two ways: plain (-O2 -g) and for
// uftrace's compiler instrumentation (-pg as well).
type Program struct {
	Plain, PG string
}

// build copies the source tree of pkg into Dir/<name>-<variant>, runs
// make there with the variant's flags and returns the binary rel.
func (b *Builder) build(pkg, name, rel string, pg bool, make func(dir, cflags, ldflags string) error) (string, error) {
	variant, cflags, ldflags := "plain", "-O2 -g", ""
	if pg {
		variant, cflags, ldflags = "pg", "-O2 -g -pg", "-pg"
	}
	// The flags are in the name: a change of them is a new build.
	h := sha256.Sum256([]byte(cflags + "\x00" + ldflags + "\x00" + flagsOf[name]))
	dir := filepath.Join(b.Dir, name+"-"+variant+"-"+hex.EncodeToString(h[:])[:8])
	bin := filepath.Join(dir, rel)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	src, err := b.Source(pkg)
	if err != nil {
		return "", err
	}
	os.RemoveAll(dir)
	if err := b.run(b.Dir, nil, "cp", "-a", src, dir); err != nil {
		return "", err
	}
	fmt.Fprintf(b.Log, "bench: building %s (%s: %s)\n", name, variant, cflags)
	if err := make(dir, cflags, ldflags); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("%s: the build made no %s", name, rel)
	}
	return bin, nil
}

// both builds a program's two variants.
func (b *Builder) both(pkg, name, rel string, make func(dir, cflags, ldflags string) error) (Program, error) {
	var p Program
	var err error
	if p.Plain, err = b.build(pkg, name, rel, false, make); err != nil {
		return p, err
	}
	p.PG, err = b.build(pkg, name, rel, true, make)
	return p, err
}

// flagsOf are the flags of each program's build beyond the variant's.
var flagsOf = map[string]string{
	"lua":     "-Wall -DLUA_COMPAT_5_3 -DLUA_USE_LINUX -D'luai_makeseed(L)=0x2545F491u'",
	"bzip2":   "-Wall -D_FILE_OFFSET_BITS=64",
	"sqlite3": "",
}

// Lua is the Lua 5.4 interpreter (Debian's lua5.4 source: upstream's
// makefile, no readline). Its string hash seed is made constant: Lua 5.4
// seeds it from the time and from addresses (luai_makeseed, lstate.c), so
// string interning and table layout, and with them the calls, would
// differ run to run.
func (b *Builder) Lua() (Program, error) {
	return b.both("lua5.4", "lua", "src/lua", func(dir, cflags, ldflags string) error {
		return b.run(filepath.Join(dir, "src"), nil, "make", "-j2", "linux-noreadline",
			"CFLAGS="+flagsOf["lua"]+" "+cflags, "MYLDFLAGS="+ldflags)
	})
}

// Bzip2 is bzip2 (Debian's bzip2 source: upstream's makefile).
func (b *Builder) Bzip2() (Program, error) {
	return b.both("bzip2", "bzip2", "bzip2", func(dir, cflags, ldflags string) error {
		return b.run(dir, nil, "make", "-j2", "bzip2", "CFLAGS="+flagsOf["bzip2"]+" "+cflags, "LDFLAGS="+ldflags)
	})
}

// SQLite is the sqlite3 shell (Debian's sqlite3 source: the autoconf
// build, which generates the amalgamation with tclsh).
func (b *Builder) SQLite() (Program, error) {
	for _, t := range [][2]string{{"tclsh", "tcl"}, {"xz", "xz-utils"}} {
		if _, err := Need(t[0], t[1], b.Log); err != nil {
			return Program{}, err
		}
	}
	return b.both("sqlite3", "sqlite3", "sqlite3", func(dir, cflags, ldflags string) error {
		env := []string{"CFLAGS=" + cflags, "LDFLAGS=" + ldflags}
		if err := b.run(dir, env, "./configure", "--disable-tcl", "--disable-readline", "--disable-shared"); err != nil {
			return err
		}
		return b.run(dir, env, "make", "-j2", "sqlite3")
	})
}

// ErrMissing says a tool a workload needs is not installed.
var ErrMissing = errors.New("not installed")

// Need looks up a command, installing pkg with apt-get when it is missing
// (as root, or through sudo). It returns its path or why it has none.
func Need(name, pkg string, log io.Writer) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	if pkg == "" {
		return "", fmt.Errorf("%s: %w", name, ErrMissing)
	}
	if err := aptGet(log, "install", "-y", "-qq", pkg); err != nil {
		// A fresh machine may have no package lists yet.
		if uerr := aptGet(log, "update", "-qq"); uerr != nil {
			return "", fmt.Errorf("%s: %w; apt-get install %s failed: %v", name, ErrMissing, pkg, err)
		}
		if err := aptGet(log, "install", "-y", "-qq", pkg); err != nil {
			return "", fmt.Errorf("%s: %w; apt-get install %s failed: %v", name, ErrMissing, pkg, err)
		}
	}
	return exec.LookPath(name)
}

// aptGet runs apt-get as root, or through sudo -n (never asking for a
// password).
func aptGet(log io.Writer, args ...string) error {
	argv := append([]string{"apt-get"}, args...)
	if os.Geteuid() != 0 {
		argv = append([]string{"sudo", "-n"}, argv...)
	}
	fmt.Fprintf(log, "bench: %s\n", strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v %s", err, tail(strings.TrimSpace(string(out)), 300))
	}
	return nil
}
