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
// links). It never blocks: a FIFO is opened with O_NONBLOCK, which does
// not wait for a writer, seen for what it is and closed. The error names
// path and what it is.
func Open(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, kind(st.Mode))
	}
	// O_NONBLOCK means nothing to a regular file's reads; cleared all the
	// same, for a reader that looks.
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil {
		unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
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
