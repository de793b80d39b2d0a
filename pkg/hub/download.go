package hub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gofrs/flock"
	"github.com/schollz/progressbar/v3"
)

// fileMeta is what the Hub announces about one file of a commit.
type fileMeta struct {
	etag string // blob name: sha256 (LFS) or git sha1
	size int64
}

// ErrChecksum is returned (wrapped) when a downloaded file's hash is not
// the one the Hub announced; nothing is kept.
var ErrChecksum = errors.New("hub: checksum mismatch")

// ErrTooLarge is returned (wrapped) when a server sends more bytes than it
// announced, or announces more than Client.MaxFileSize.
var ErrTooLarge = errors.New("hub: body larger than announced")

func (c *Client) maxFile() int64 {
	if c.MaxFileSize > 0 {
		return c.MaxFileSize
	}
	return 64 << 30
}

// resolveURL is the Hub's address of file at commit.
func (c *Client) resolveURL(repo, commit, file string) string {
	parts := strings.Split(file, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return c.Endpoint + "/" + repo + "/resolve/" + commit + "/" + strings.Join(parts, "/")
}

// head asks the Hub for a file's etag and size (HEAD, no redirect
// followed: an LFS file's X-Linked-Etag and X-Linked-Size are on the
// redirect itself, as huggingface_hub reads them).
func (c *Client) head(ctx context.Context, repo, commit, file string) (fileMeta, error) {
	u := c.resolveURL(repo, commit, file)
	var resp *http.Response
	for hops := 0; ; hops++ {
		r, err := c.send(ctx, http.MethodHead, u, nil, false)
		if err != nil {
			return fileMeta{}, err
		}
		r.Body.Close()
		resp = r
		// A renamed repository (gpt2 -> openai-community/gpt2) answers
		// with a redirect on the endpoint itself, without the file's
		// headers: follow it, as huggingface_hub follows relative ones.
		loc, lerr := r.Location()
		if r.StatusCode < 300 || r.StatusCode >= 400 || r.Header.Get("X-Linked-Etag") != "" || lerr != nil || !sameHost(loc.String(), c.Endpoint) {
			break
		}
		if hops >= 5 {
			return fileMeta{}, fmt.Errorf("hub: more than 5 redirects for %s/%s", repo, file)
		}
		u = loc.String()
	}
	if resp.StatusCode >= 400 {
		return fileMeta{}, c.statusError(resp, repo, commit, file)
	}
	if rc := resp.Header.Get("X-Repo-Commit"); rc != "" && rc != commit {
		return fileMeta{}, fmt.Errorf("hub: asked for %s at commit %s, the Hub answered for commit %q; refusing it", file, commit, firstN(rc, 60))
	}
	etag := resp.Header.Get("X-Linked-Etag")
	if etag == "" {
		etag = resp.Header.Get("ETag")
	}
	etag = strings.Trim(strings.TrimPrefix(etag, "W/"), `"`)
	if !etagRe.MatchString(etag) {
		return fileMeta{}, fmt.Errorf("hub: the Hub sent ETag %q for %s/%s, not a sha256 or git sha1; refusing it (is HF_ENDPOINT a Hub?)", firstN(etag, 70), repo, file)
	}
	sz := resp.Header.Get("X-Linked-Size")
	if sz == "" {
		sz = resp.Header.Get("Content-Length")
	}
	size, err := strconv.ParseInt(sz, 10, 64)
	if err != nil || size < 0 {
		return fileMeta{}, fmt.Errorf("hub: the Hub sent no size for %s/%s; refusing to download it blind", repo, file)
	}
	if size > c.maxFile() {
		return fileMeta{}, fmt.Errorf("hub: %w: %s/%s is announced at %d bytes, more than the %d druto accepts", ErrTooLarge, repo, file, size, c.maxFile())
	}
	return fileMeta{etag: etag, size: size}, nil
}

// pullFile brings one file of a commit into the cache: the blob (unless
// present) and the snapshot's link to it. It returns the bytes downloaded.
func (c *Client) pullFile(ctx context.Context, repo, commit, file string) (int64, error) {
	meta, err := c.head(ctx, repo, commit, file)
	if err != nil {
		return 0, err
	}
	blob := c.Cache.blobPath(repo, meta.etag)
	var n int64
	if !blobOK(blob, meta.size) {
		if n, err = c.fetchBlob(ctx, repo, commit, file, meta); err != nil {
			return n, err
		}
	}
	_, err = c.Cache.linkSnapshot(repo, commit, file, meta.etag)
	return n, err
}

// blobOK reports a finished blob of the announced size.
func blobOK(p string, size int64) bool {
	info, err := os.Stat(p)
	return err == nil && info.Mode().IsRegular() && info.Size() == size
}

// fetchBlob downloads a blob under its lock: into <blob>.incomplete,
// resumed where an earlier attempt (of this or another process) stopped,
// checked against the announced hash, then renamed into place.
func (c *Client) fetchBlob(ctx context.Context, repo, commit, file string, meta fileMeta) (int64, error) {
	blob := c.Cache.blobPath(repo, meta.etag)
	if err := safeMkdirAll(string(c.Cache), filepath.Dir(blob)); err != nil {
		return 0, err
	}
	lockPath := c.Cache.lockPath(repo, meta.etag)
	if err := safeMkdirAll(string(c.Cache), filepath.Dir(lockPath)); err != nil {
		return 0, err
	}
	lk := flock.New(lockPath)
	locked, err := lk.TryLock()
	if err == nil && !locked {
		c.notice(fmt.Sprintf("waiting for another process downloading %s/%s (lock %s)", repo, file, lockPath))
		locked, err = lk.TryLockContext(ctx, 200*time.Millisecond)
	}
	if err != nil || !locked {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, fmt.Errorf("hub: cannot lock %s: %v", lockPath, err)
	}
	defer lk.Unlock()
	if blobOK(blob, meta.size) { // another process finished it while we waited
		return 0, nil
	}
	part := blob + ".incomplete"
	f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return 0, fmt.Errorf("hub: %w", err)
	}
	n, err := c.download(ctx, f, repo, commit, file, meta)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("hub: %w", cerr)
	}
	if err != nil {
		if errors.Is(err, ErrChecksum) || errors.Is(err, ErrTooLarge) {
			os.Remove(part) // nothing of a bad body is kept to resume from
		}
		return n, err
	}
	if err := os.Rename(part, blob); err != nil {
		return n, fmt.Errorf("hub: %w", err)
	}
	return n, nil
}

// download fills f with the file's bytes, continuing from f's current size
// with a Range request, resuming after a cut body up to MaxRetries times,
// and checks the hash at the end. It returns the bytes received.
func (c *Client) download(ctx context.Context, f *os.File, repo, commit, file string, meta fileMeta) (int64, error) {
	h := newHasher(meta)
	off, err := hashPrefix(f, h, meta.size)
	if err != nil {
		return 0, err
	}
	if off > 0 {
		c.notice(fmt.Sprintf("resuming %s/%s at %d of %d bytes", repo, file, off, meta.size))
	}
	bar := c.bar(repo+"/"+file, meta.size, off)
	defer bar.done()
	var got int64
	cuts := 0
	for off < meta.size {
		hdr := http.Header{}
		if off > 0 {
			hdr.Set("Range", fmt.Sprintf("bytes=%d-", off))
		}
		resp, err := c.send(ctx, http.MethodGet, c.resolveURL(repo, commit, file), hdr, true)
		if err != nil {
			return got, err
		}
		switch {
		case resp.StatusCode == http.StatusPartialContent && off > 0:
			if !strings.HasPrefix(resp.Header.Get("Content-Range"), fmt.Sprintf("bytes %d-", off)) {
				resp.Body.Close()
				return got, fmt.Errorf("hub: the server answered a resume of %s/%s at byte %d with range %q; delete %s and pull again", repo, file, off, firstN(resp.Header.Get("Content-Range"), 60), f.Name())
			}
		case resp.StatusCode == http.StatusOK:
			if off > 0 { // the server ignored Range: start over
				off = 0
				h = newHasher(meta)
			}
		default:
			resp.Body.Close()
			return got, c.statusError(resp, repo, commit, file)
		}
		if resp.ContentLength > meta.size-off {
			resp.Body.Close()
			return got, fmt.Errorf("hub: %w: %s/%s is announced at %d bytes, the server sends %d from byte %d; nothing was kept", ErrTooLarge, repo, file, meta.size, resp.ContentLength, off)
		}
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			resp.Body.Close()
			return got, fmt.Errorf("hub: %w", err)
		}
		if err := f.Truncate(off); err != nil {
			resp.Body.Close()
			return got, fmt.Errorf("hub: %w", err)
		}
		n, cerr := io.Copy(io.MultiWriter(f, h, bar), io.LimitReader(resp.Body, meta.size-off))
		off += n
		got += n
		var extra [1]byte
		over := 0
		if cerr == nil && off == meta.size {
			over, _ = io.ReadFull(resp.Body, extra[:])
		}
		resp.Body.Close()
		if over > 0 {
			return got, fmt.Errorf("hub: %w: the server sent more than the %d bytes announced for %s/%s; nothing was kept", ErrTooLarge, meta.size, repo, file)
		}
		if cerr != nil || off < meta.size {
			if ctx.Err() != nil {
				return got, ctx.Err()
			}
			cuts++
			if cuts > c.retries() {
				return got, &netError{fmt.Errorf("hub: the download of %s/%s was cut %d times (at %d of %d bytes); pull again to resume", repo, file, cuts, off, meta.size)}
			}
			c.notice(fmt.Sprintf("the download of %s/%s stopped at %d of %d bytes; resuming", repo, file, off, meta.size))
		}
	}
	if err := f.Sync(); err != nil {
		return got, fmt.Errorf("hub: %w", err)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != meta.etag {
		return got, fmt.Errorf("hub: %w: %s/%s has hash %s, the Hub announced %s (corrupted in transit?); nothing was kept, pull again", ErrChecksum, repo, file, sum[:16], meta.etag[:16])
	}
	return got, nil
}

// newHasher returns the hash an etag is: sha256 of the bytes (64 hex), or
// git's blob sha1 ("blob <size>\x00" then the bytes; 40 hex).
func newHasher(meta fileMeta) hash.Hash {
	if len(meta.etag) == 64 {
		return sha256.New()
	}
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", meta.size)
	return h
}

// hashPrefix feeds the bytes already in f (a resumed download) to h and
// returns how many there are; a partial file longer than the announced
// size is emptied.
func hashPrefix(f *os.File, h hash.Hash, size int64) (int64, error) {
	info, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("hub: %w", err)
	}
	if info.Size() > size {
		return 0, f.Truncate(0)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, fmt.Errorf("hub: %w", err)
	}
	n, err := io.Copy(h, io.LimitReader(f, info.Size()))
	if err != nil && !errors.Is(err, fs.ErrClosed) {
		return 0, fmt.Errorf("hub: %w", err)
	}
	return n, nil
}

// progress draws one file's progress: a bar on a terminal, a line at the
// start and the end elsewhere, nothing without Client.Progress.
type progress struct {
	w     io.Writer
	bar   *progressbar.ProgressBar
	name  string
	start time.Time
	n     int64
}

func (c *Client) bar(name string, size, done int64) *progress {
	p := &progress{w: c.Progress, name: name, start: time.Now()}
	if c.Progress == nil {
		return p
	}
	if c.Terminal {
		p.bar = progressbar.NewOptions64(size,
			progressbar.OptionSetWriter(c.Progress),
			progressbar.OptionSetDescription(name),
			progressbar.OptionShowBytes(true),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionShowCount(),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(c.Progress) }),
			progressbar.OptionSpinnerType(14),
			progressbar.OptionFullWidth(),
		)
		if done > 0 {
			p.bar.Set64(done)
		}
		return p
	}
	fmt.Fprintf(c.Progress, "druto: downloading %s (%.1f MB)\n", name, float64(size)/1e6)
	return p
}

func (p *progress) Write(b []byte) (int, error) {
	p.n += int64(len(b))
	if p.bar != nil {
		p.bar.Add(len(b))
	}
	return len(b), nil
}

func (p *progress) done() {
	if p.w == nil {
		return
	}
	if p.bar != nil {
		p.bar.Finish()
		return
	}
	fmt.Fprintf(p.w, "druto: %s: %.1f MB in %s\n", p.name, float64(p.n)/1e6, time.Since(p.start).Round(time.Millisecond))
}
