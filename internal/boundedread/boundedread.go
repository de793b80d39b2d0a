// Package boundedread reads input files with their size known before the
// first byte is read: only regular files are opened (a device such as
// /dev/zero, a FIFO or a socket is refused at once, without blocking), the
// size comes from stat, and a file larger than the caller's limit is refused
// rather than read.
package boundedread

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// ErrNotRegular is returned (wrapped) for a path that is not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is returned (wrapped) for a file larger than the limit.
var ErrTooLarge = errors.New("file too large")

// Open opens path for reading if it is a regular file of at most limit
// bytes and returns it with its size. The open does not block on a FIFO.
func Open(path string, limit int64) (*os.File, int64, error) {
	// Stat first: a FIFO or device is refused without being opened.
	if err := checkInfo(path, os.Stat, limit); err != nil {
		return nil, 0, err
	}
	// O_NONBLOCK in case path became a FIFO since the stat; it has no effect
	// on a regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, err
	}
	info, err := f.Stat()
	if err == nil {
		err = checkMode(path, info, limit)
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, info.Size(), nil
}

func checkInfo(path string, stat func(string) (os.FileInfo, error), limit int64) error {
	info, err := stat(path)
	if err != nil {
		return err
	}
	return checkMode(path, info, limit)
}

func checkMode(path string, info os.FileInfo, limit int64) error {
	switch m := info.Mode(); {
	case m.IsDir():
		return fmt.Errorf("%s is a folder, %w", path, ErrNotRegular)
	case !m.IsRegular():
		return fmt.Errorf("%s is %s, %w", path, kind(m), ErrNotRegular)
	case info.Size() > limit:
		return fmt.Errorf("%s: %w: %d bytes, the limit is %d", path, ErrTooLarge, info.Size(), limit)
	}
	return nil
}

func kind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a FIFO (named pipe)"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "a special file"
}

// ReadFile reads the whole of path, a regular file of at most limit bytes
// (see Open). It reads the size stat reported: a file that grows meanwhile
// is read up to that size, one that shrinks is an error.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, size, err := Open(path, limit)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, size)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("reading %s: %w (did it change while being read?)", path, err)
	}
	return b, nil
}
