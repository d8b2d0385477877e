package elfx

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"rtrace/internal/regular"
)

// Open reads path. The File may be shared with other callers that opened
// the same file (Open keeps what it parsed): it must not be changed.
func Open(path string) (*File, error) {
	f, err := regular.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	key, keyed := identity(st)
	if !keyed {
		return parseFile(f, path, st)
	}
	e, parser := parsed.entry(key)
	if parser {
		func() {
			// A panic out of Parse (Guard catches debug/elf's own) must
			// not leave the entry open: later Opens would wait forever.
			defer close(e.done)
			ok := false
			defer func() {
				if !ok {
					if e.err == nil {
						e.err = fmt.Errorf("%s: parsing failed", path)
					}
					parsed.drop(key, e)
				}
			}()
			e.f, e.err = parseFile(f, path, st)
			ok = e.err == nil
		}()
	}
	<-e.done
	if e.err != nil || e.f.Path == path {
		return e.f, e.err
	}
	named := *e.f // the same file by another name (a symlinked directory)
	named.Path = path
	return &named, nil
}

func parseFile(f *os.File, path string, st os.FileInfo) (*File, error) {
	ef, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ef.Path = path
	ef.Setuid = st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0
	ef.FileCaps = hasFileCaps(f)
	return ef, nil
}

// hasFileCaps reports whether f carries file capabilities (setcap(8):
// the security.capability extended attribute, capabilities(7)).
func hasFileCaps(f *os.File) bool {
	raw, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var n int
	raw.Control(func(fd uintptr) {
		var buf [64]byte
		n, err = unix.Fgetxattr(int(fd), "security.capability", buf[:])
	})
	return err == nil && n >= 4
}

// fileKey names a file's contents as Open saw them: a file replaced or
// rewritten since has another inode, size or change time.
type fileKey struct {
	dev, ino           uint64
	size, mtime, ctime int64
	mode               uint32
}

// FileID names the contents of a file as Open's cache does: comparable,
// another for a file replaced or rewritten at the same path.
type FileID struct{ k fileKey }

// StatID returns the FileID of the file at path now (false: no file).
func StatID(path string) (FileID, bool) {
	st, err := os.Stat(path)
	if err != nil {
		return FileID{}, false
	}
	k, ok := identity(st)
	return FileID{k}, ok
}

func identity(st os.FileInfo) (fileKey, bool) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return fileKey{}, false
	}
	return fileKey{dev: sys.Dev, ino: sys.Ino, size: sys.Size,
		mtime: sys.Mtim.Nano(), ctime: sys.Ctim.Nano(), mode: sys.Mode}, true
}

// parsed keeps the files Open parsed: a record opens the executable in
// the launcher, the tracer and the resolver, and libc in the tracer and
// the resolver. A second caller of a file being parsed waits for that
// parse.
var parsed = fileCache{m: map[fileKey]*cacheEntry{}}

// maxParsed bounds the cache for a run over many programs (batch
// resolution): past it, the cache starts again empty.
const maxParsed = 256

type fileCache struct {
	mu sync.Mutex
	m  map[fileKey]*cacheEntry
}

type cacheEntry struct {
	done chan struct{} // closed when f and err are set
	f    *File
	err  error
}

// entry returns k's entry; parser is true when the caller must parse the
// file and close done.
func (c *fileCache) entry(k fileKey) (e *cacheEntry, parser bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[k]; e != nil {
		return e, false
	}
	if len(c.m) >= maxParsed {
		clear(c.m)
	}
	e = &cacheEntry{done: make(chan struct{})}
	c.m[k] = e
	return e, true
}

// drop forgets a failed parse: the next Open tries again.
func (c *fileCache) drop(k fileKey, e *cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m[k] == e {
		delete(c.m, k)
	}
}

// libDirs are where the dynamic loader finds libraries by default on
// x86-64 Debian and most distributions (ld.so(8)).
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}

// Prefetch parses, in the background, the dynamic loader and the
// libraries f names that are in the default directories, so that Open
// finds them parsed when the program has mapped them: a fresh process
// took 3 ms to parse libc, on the tracer's path between the program's
// start and its first call. Libraries found elsewhere (RPATH,
// LD_LIBRARY_PATH) are parsed when opened, as before.
func Prefetch(f *File) {
	paths := libPaths(f)
	if len(paths) == 0 {
		return
	}
	go func() {
		for _, p := range paths {
			Open(p) // an error is Open's again when the tracer opens it
		}
	}()
}

// libPaths are f's loader and the libraries it names, where the loader
// finds them by default.
func libPaths(f *File) []string {
	var paths []string
	if f.Interp != "" {
		paths = append(paths, f.Interp)
	}
	for _, name := range f.Needed {
		if filepath.Base(name) != name {
			continue
		}
		for _, dir := range libDirs {
			if p := filepath.Join(dir, name); fileExists(p) {
				paths = append(paths, p)
				break
			}
		}
	}
	return paths
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
