package hub

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// ErrNotCached is returned (wrapped) when a model is asked for offline and
// the cache does not hold it.
var ErrNotCached = errors.New("not in the cache")

// repoPart is one part of a repository id: what the Hub accepts (letters,
// digits, '-', '_', '.'), not starting or ending with '-' or '.', no "--"
// or "..", at most 96 characters.
var repoPart = regexp.MustCompile(`^[A-Za-z0-9_]([A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?$`)

// commitRe is a full git commit id.
var commitRe = regexp.MustCompile(`^[0-9a-f]{40}$`)

// etagRe is a blob name: a git sha1 (40 hex) or an LFS sha256 (64 hex).
var etagRe = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)

// ValidRepo reports why repo is not a model repository id ("ORG/NAME" or
// "NAME"), nil when it is one.
func ValidRepo(repo string) error {
	parts := strings.Split(repo, "/")
	if len(parts) > 2 {
		return fmt.Errorf("hub: %q is not a model name (NAME or ORG/NAME)", repo)
	}
	for _, p := range parts {
		if !repoPart.MatchString(p) || strings.Contains(p, "--") || strings.Contains(p, "..") {
			return fmt.Errorf("hub: %q is not a model name (NAME or ORG/NAME of letters, digits, '-', '_', '.')", repo)
		}
	}
	return nil
}

// validRevision reports why rev cannot be a branch, tag or commit: it
// names a file under refs/, so it must be a clean relative path.
func validRevision(rev string) error {
	if rev == "" || len(rev) > 255 || strings.ContainsAny(rev, "\\\x00:") || !validRel(rev) {
		return fmt.Errorf("hub: revision %q is not a branch, tag or commit name", rev)
	}
	return nil
}

// validRel reports whether name is a clean relative slash path with no
// empty, "." or ".." parts.
func validRel(name string) bool {
	if name == "" || strings.HasPrefix(name, "/") || path.Clean(name) != name {
		return false
	}
	for _, p := range strings.Split(name, "/") {
		if p == "" || p == "." || p == ".." {
			return false
		}
	}
	return true
}

// validFileName reports why name, a file name a server sent, cannot be
// written into a snapshot: it must be a clean relative slash path of
// printable characters with no "..", no backslash and no drive letter.
func validFileName(name string) error {
	bad := len(name) > 1024 || !validRel(name) || strings.ContainsAny(name, "\\:")
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			bad = true
		}
	}
	if bad {
		return fmt.Errorf("hub: the Hub named a file %q, which is not a safe relative path; refusing to write it", name)
	}
	return nil
}

// IsCommit reports whether rev is a full commit id.
func IsCommit(rev string) bool { return commitRe.MatchString(rev) }

// repoFolder returns the cache folder name of a model repository:
// "models--" + the id with "/" turned into "--", as huggingface_hub names it.
func repoFolder(repo string) string { return "models--" + strings.ReplaceAll(repo, "/", "--") }

// Cache is a huggingface_hub cache folder (HF_HUB_CACHE).
type Cache string

// repoDir returns the folder of repo in the cache.
func (c Cache) repoDir(repo string) string { return filepath.Join(string(c), repoFolder(repo)) }

// blobPath returns where the blob named etag of repo lives.
func (c Cache) blobPath(repo, etag string) string {
	return filepath.Join(c.repoDir(repo), "blobs", etag)
}

// lockPath returns the lock file of a blob, under .locks as huggingface_hub
// keeps them.
func (c Cache) lockPath(repo, etag string) string {
	return filepath.Join(string(c), ".locks", repoFolder(repo), etag+".lock")
}

// snapshotDir returns the snapshot folder of a commit.
func (c Cache) snapshotDir(repo, commit string) string {
	return filepath.Join(c.repoDir(repo), "snapshots", commit)
}

// commitOf returns the commit rev names in the cache: rev itself when it is
// a commit id, else the content of refs/<rev>.
func (c Cache) commitOf(repo, rev string) (string, error) {
	if IsCommit(rev) {
		return rev, nil
	}
	b, err := os.ReadFile(filepath.Join(c.repoDir(repo), "refs", filepath.FromSlash(rev)))
	if err != nil {
		return "", err
	}
	commit := strings.TrimSpace(string(b))
	if !IsCommit(commit) {
		return "", fmt.Errorf("hub: %s: refs/%s holds %q, not a commit id; delete that file and pull again", c.repoDir(repo), rev, firstN(commit, 60))
	}
	return commit, nil
}

// writeRef records that rev pointed at commit (atomically).
func (c Cache) writeRef(repo, rev, commit string) error {
	if IsCommit(rev) {
		return nil
	}
	p := filepath.Join(c.repoDir(repo), "refs", filepath.FromSlash(rev))
	if err := safeMkdirAll(c.repoDir(repo), filepath.Dir(p)); err != nil {
		return err
	}
	if b, err := os.ReadFile(p); err == nil && string(b) == commit {
		return nil
	}
	return writeFileAtomic(p, []byte(commit))
}

// cachedFile returns the path of file in the snapshot of commit when it is
// there and is (or links to) a regular file.
func (c Cache) cachedFile(repo, commit, file string) (string, bool) {
	p := filepath.Join(c.snapshotDir(repo, commit), filepath.FromSlash(file))
	info, err := os.Stat(p)
	return p, err == nil && info.Mode().IsRegular()
}

// safeMkdirAll creates dir and its parents below root, refusing to pass
// through a symlink on the way (a folder that a snapshot's file name would
// reach through a link could point anywhere).
func safeMkdirAll(root, dir string) error {
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("hub: %s is outside %s", dir, root)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	cur := root
	if rel == "." {
		return nil
	}
	for _, p := range strings.Split(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, p)
		info, err := os.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Mkdir(cur, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("hub: %w", err)
			}
		case err != nil:
			return fmt.Errorf("hub: %w", err)
		case info.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("hub: %s is a symlink inside the cache; refusing to write through it (remove it)", cur)
		case !info.IsDir():
			return fmt.Errorf("hub: %s is in the way (not a folder); remove it", cur)
		}
	}
	return nil
}

// linkSnapshot makes snapshots/<commit>/<file> a relative symlink to the
// blob, as huggingface_hub does, replacing whatever was there atomically.
// Where symlinks cannot be made (some Windows setups) the blob is copied,
// as huggingface_hub also does.
func (c Cache) linkSnapshot(repo, commit, file, etag string) (string, error) {
	snap := c.snapshotDir(repo, commit)
	dst := filepath.Join(snap, filepath.FromSlash(file))
	if err := safeMkdirAll(c.repoDir(repo), filepath.Dir(dst)); err != nil {
		return "", err
	}
	rel, err := filepath.Rel(filepath.Dir(dst), c.blobPath(repo, etag))
	if err != nil {
		return "", fmt.Errorf("hub: %w", err)
	}
	tmp := dst + ".tmp-link"
	os.Remove(tmp)
	if err := os.Symlink(rel, tmp); err != nil {
		b, rerr := os.ReadFile(c.blobPath(repo, etag))
		if rerr != nil {
			return "", fmt.Errorf("hub: %w", rerr)
		}
		return dst, writeFileAtomic(dst, b)
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("hub: %w", err)
	}
	return dst, nil
}

// writeFileAtomic writes b to a temporary file beside p and renames it.
func writeFileAtomic(p string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-"+filepath.Base(p)+"-*")
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("hub: %w", err)
	}
	return nil
}

func firstN(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
