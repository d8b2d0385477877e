// Package regular opens the files a trace names (a module's path in an
// MMAP record, a map file's executable, a uftrace directory's .dat and
// .sym files) only when they are regular files: opening a FIFO for
// reading blocks until a writer comes (fifo(7)), and a trace must never
// hang the stage that reads it. Inputs the user names on the command line
// are not opened here: reading a FIFO given there is what they asked.
package regular

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// ErrNotRegular is the error for a path that is not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// Open opens path for reading when it is a regular file (after symbolic
// links). It never blocks, and opens nothing else: the path is first
// opened with O_PATH (open(2): the file itself is not opened, a FIFO does
// not wait for a writer, a device's open has no effect), seen for what it
// is, and only a regular file is then opened through /proc/self/fd
// (the same file, whatever replaced the path meanwhile). The error names
// path and what it is.
func Open(path string) (*os.File, error) {
	pfd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, kind(st.Mode))
	}
	fd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", pfd), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// ReadFile is os.ReadFile of a regular file only (Open).
func ReadFile(path string) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// Check returns nil when path is a regular file (after symbolic links),
// else an error naming it: for a library that opens path itself.
func Check(path string) error {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, kind(st.Mode))
	}
	return nil
}

// kind names a file type of stat(2)'s st_mode.
func kind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFSOCK:
		return "a socket"
	}
	return fmt.Sprintf("type %#o", mode&unix.S_IFMT)
}
