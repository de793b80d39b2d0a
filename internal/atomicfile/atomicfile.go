// Package atomicfile writes files so that a crash or an error never leaves a
// half-written file under the final name: data go to a temp file in the same
// folder, are synced, then renamed over the target.
package atomicfile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteFile writes b to path atomically with permissions 0644. An error
// leaves no temp file behind; the rename is made durable where the file
// system syncs folders.
func WriteFile(path string, b []byte) error { return WriteFileVia(path, b, nil) }

// WriteFileVia is WriteFile writing through wrap(file) when wrap is not nil
// (the seam by which tests simulate a full disk).
func WriteFileVia(path string, b []byte, wrap func(io.Writer) io.Writer) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("%w (check that %s exists and is writable)", err, dir)
	}
	tmp := f.Name()
	var w io.Writer = f
	if wrap != nil {
		w = wrap(f)
	}
	_, werr := w.Write(b)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp, 0o644)
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, werr)
	}
	SyncDir(dir)
	return nil
}

// SyncDir makes the renames inside dir durable, where the file system
// supports it (best effort: some do not sync folders).
func SyncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
