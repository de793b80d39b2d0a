// Package atomicfile writes files so that a crash or an error never leaves a
// half-written file under the final name: data go to a temp file in the same
// folder, are synced, then renamed over the target.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFile writes b to path atomically with permissions 0644.
func WriteFile(path string, b []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("%w (check that %s exists and is writable)", err, dir)
	}
	tmp := f.Name()
	_, werr := f.Write(b)
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
	return nil
}
