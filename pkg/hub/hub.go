package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// DefaultEndpoint is the Hub's address when HF_ENDPOINT is not set.
const DefaultEndpoint = "https://huggingface.co"

// Secret is a token that never formats as itself: fmt prints "***", so a
// Client printed by mistake, or an error that quotes one, shows no token.
type Secret string

// String returns "***" for a set token and "" for none.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "***"
}

// GoString is String, for %#v.
func (s Secret) GoString() string { return s.String() }

// Client downloads from one Hub endpoint into one cache. The zero value is
// not usable; start from FromEnv or fill Endpoint and Cache.
type Client struct {
	Endpoint string // the Hub, e.g. https://huggingface.co (no trailing slash)
	Token    Secret // sent as a bearer token to Endpoint's host only
	Cache    Cache  // HF_HUB_CACHE
	Offline  bool   // HF_HUB_OFFLINE: the cache only, never the network

	// MaxFileSize bounds any one file (0: 64 GiB); MaxRetries bounds the
	// retries of one request and the resumptions of one cut body (0: 5).
	MaxFileSize int64
	MaxRetries  int
	// RetryWait is the first wait between retries (0: 1 s; it doubles up
	// to 30 s, or to what Retry-After asks, capped at 60 s).
	RetryWait time.Duration

	// Progress, when set, receives a progress bar per file (Terminal) or
	// a line when a file starts and ends; Notice receives one-line notes
	// (a resumed download, the cache used because the Hub was unreachable).
	Progress io.Writer
	Terminal bool
	Notice   func(string)

	// Transport is the HTTP transport (nil: a clone of
	// http.DefaultTransport, TLS verified as always).
	Transport http.RoundTripper
}

// offlineValues are the values of HF_HUB_OFFLINE that mean "offline", as
// huggingface_hub reads them.
var offlineValues = []string{"1", "on", "yes", "true"}

// CacheDir returns the cache folder the environment names: HF_HUB_CACHE,
// else HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub.
func CacheDir() (string, error) {
	if d := os.Getenv("HF_HUB_CACHE"); d != "" {
		return d, nil
	}
	if d := os.Getenv("HUGGINGFACE_HUB_CACHE"); d != "" { // the older name
		return d, nil
	}
	home, err := hfHome()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, "hub"), nil
}

// hfHome returns HF_HOME or its default.
func hfHome() (string, error) {
	if d := os.Getenv("HF_HOME"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "huggingface"), nil
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("hub: no home folder to keep the model cache in (%v); set HF_HOME or HF_HUB_CACHE", err)
	}
	return filepath.Join(h, ".cache", "huggingface"), nil
}

// FromEnv returns a Client configured as huggingface_hub would be by the
// environment (see the package doc). The token is HF_TOKEN, else the file
// HF_TOKEN_PATH or HF_HOME/token names.
func FromEnv() (*Client, error) {
	dir, err := CacheDir()
	if err != nil {
		return nil, err
	}
	c := &Client{Endpoint: DefaultEndpoint, Cache: Cache(dir)}
	if e := os.Getenv("HF_ENDPOINT"); e != "" {
		c.Endpoint = strings.TrimRight(e, "/")
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("hub: HF_ENDPOINT %q is not an http(s) address such as https://huggingface.co", firstN(c.Endpoint, 80))
	}
	c.Offline = slices.Contains(offlineValues, strings.ToLower(strings.TrimSpace(os.Getenv("HF_HUB_OFFLINE"))))
	tok := os.Getenv("HF_TOKEN")
	if tok == "" {
		p := os.Getenv("HF_TOKEN_PATH")
		if p == "" {
			if home, err := hfHome(); err == nil {
				p = filepath.Join(home, "token")
			}
		}
		if b, err := os.ReadFile(p); err == nil && len(b) < 4096 {
			tok = string(b)
		}
	}
	c.Token = Secret(strings.TrimSpace(tok))
	return c, nil
}

// Snapshot is one commit of a repository in the cache.
type Snapshot struct {
	Repo     string   // e.g. "gpt2"
	Revision string   // what was asked for: a branch, tag or commit
	Commit   string   // the commit id it resolved to
	Dir      string   // the snapshot folder: Dir/config.json, Dir/model.safetensors, ...
	Files    []string // the files of this pull, relative to Dir
	Fetched  int64    // bytes downloaded by this pull (0: all from the cache)
	Cached   bool     // true when the Hub was not asked (offline, or unreachable)
}

// Path returns the path of file in the snapshot.
func (s *Snapshot) Path(file string) string { return filepath.Join(s.Dir, filepath.FromSlash(file)) }

// GPT2Files are the files druto pulls from a GPT-2 repository: the
// weights, the config and the tokenizer files transformers reads. The
// first two are required; the others are pulled when the repository has
// them.
var GPT2Files = []string{"model.safetensors", "config.json",
	"generation_config.json", "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt"}

// AllFiles asks Pull for every file of the repository.
var AllFiles = []string{"*"}

// required is how many of the files asked for must exist: the first two.
const required = 2

// repoInfo is the part of the Hub's /api/models/REPO/revision/REV answer
// that Pull reads.
type repoInfo struct {
	SHA      string `json:"sha"`
	Siblings []struct {
		Name string `json:"rfilename"`
	} `json:"siblings"`
}

// maxInfo bounds the API's JSON answer.
const maxInfo = 16 << 20

// Pull makes sure the snapshot of repo at rev (a branch, tag or commit;
// "" is main) holds files (GPT2Files when nil; of these, the first two are
// required and the rest are pulled where the repository has them), and
// returns it. Files already in the snapshot are not requested again.
// Offline, or when the Hub cannot be reached and the cache holds the
// snapshot, it answers from the cache alone.
func (c *Client) Pull(ctx context.Context, repo, rev string, files []string) (*Snapshot, error) {
	if rev == "" {
		rev = "main"
	}
	if files == nil {
		files = GPT2Files
	}
	if err := ValidRepo(repo); err != nil {
		return nil, err
	}
	if err := validRevision(rev); err != nil {
		return nil, err
	}
	if c.Offline {
		s, err := c.fromCache(repo, rev, files)
		if err != nil {
			return nil, fmt.Errorf("%w; HF_HUB_OFFLINE is set, so the Hub was not asked: pull %s on a machine with a network (druto pull %s), or unset HF_HUB_OFFLINE", err, repo, repo)
		}
		return s, nil
	}
	info, err := c.info(ctx, repo, rev)
	if err != nil {
		var ne *netError
		if errors.As(err, &ne) {
			if s, cerr := c.fromCache(repo, rev, files); cerr == nil {
				c.notice(fmt.Sprintf("the Hub (%s) cannot be reached; using %s from the cache (commit %s)", c.Endpoint, repo, s.Commit[:12]))
				return s, nil
			}
		}
		return nil, err
	}
	have := map[string]bool{}
	for _, s := range info.Siblings {
		have[s.Name] = true
	}
	s := &Snapshot{Repo: repo, Revision: rev, Commit: info.SHA, Dir: c.Cache.snapshotDir(repo, info.SHA)}
	if slices.Equal(files, AllFiles) {
		files = nil
		for _, sib := range info.Siblings {
			files = append(files, sib.Name)
		}
		slices.Sort(files)
		files = append([]string{"", ""}, files...) // nothing required
	}
	for i, f := range files {
		if f == "" {
			continue
		}
		if err := validFileName(f); err != nil {
			return nil, err
		}
		if !have[f] {
			if i < required {
				return nil, fmt.Errorf("hub: %s at %s has no %s (druto reads GPT-2 weights from model.safetensors); pick a repository that has it", repo, rev, f)
			}
			continue
		}
		s.Files = append(s.Files, f)
	}
	if err := c.Cache.writeRef(repo, rev, info.SHA); err != nil {
		return nil, err
	}
	for _, f := range s.Files {
		if _, ok := c.Cache.cachedFile(repo, info.SHA, f); ok {
			continue
		}
		n, err := c.pullFile(ctx, repo, info.SHA, f)
		s.Fetched += n
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

// fromCache returns the snapshot rev resolves to in the cache, when it
// holds every required file (and whichever of the others it has).
func (c *Client) fromCache(repo, rev string, files []string) (*Snapshot, error) {
	commit, err := c.Cache.commitOf(repo, rev)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("hub: %s at %s is %w %s", repo, rev, ErrNotCached, c.Cache)
		}
		return nil, err
	}
	s := &Snapshot{Repo: repo, Revision: rev, Commit: commit, Dir: c.Cache.snapshotDir(repo, commit), Cached: true}
	if slices.Equal(files, AllFiles) {
		err := filepath.WalkDir(s.Dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(s.Dir, p)
				s.Files = append(s.Files, filepath.ToSlash(rel))
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("hub: the snapshot of %s at %s (commit %s) is %w %s: %v", repo, rev, commit[:12], ErrNotCached, c.Cache, err)
		}
		return s, nil
	}
	for i, f := range files {
		if err := validFileName(f); err != nil {
			return nil, err
		}
		if _, ok := c.Cache.cachedFile(repo, commit, f); ok {
			s.Files = append(s.Files, f)
		} else if i < required {
			return nil, fmt.Errorf("hub: %s of %s at %s (commit %s) is %w %s", f, repo, rev, commit[:12], ErrNotCached, c.Cache)
		}
	}
	return s, nil
}

func (c *Client) notice(msg string) {
	if c.Notice != nil {
		c.Notice(msg)
	}
}

// info asks the Hub's API which commit rev is and which files it holds.
func (c *Client) info(ctx context.Context, repo, rev string) (*repoInfo, error) {
	u := c.Endpoint + "/api/models/" + repo + "/revision/" + url.PathEscape(rev)
	resp, err := c.send(ctx, http.MethodGet, u, nil, true)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, c.statusError(resp, repo, rev, "")
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxInfo+1))
	if err != nil {
		return nil, &netError{fmt.Errorf("hub: reading the Hub's answer about %s: %v; check the network and pull again", repo, err)}
	}
	if len(b) > maxInfo {
		return nil, fmt.Errorf("hub: the Hub's answer about %s is larger than %d bytes; refusing it (is HF_ENDPOINT a Hub?)", repo, maxInfo)
	}
	var info repoInfo
	if err := json.Unmarshal(b, &info); err != nil {
		return nil, fmt.Errorf("hub: the Hub's answer about %s is not the JSON a Hub sends (%v); is HF_ENDPOINT %s a Hub?", repo, err, c.Endpoint)
	}
	if !IsCommit(info.SHA) {
		return nil, fmt.Errorf("hub: the Hub named commit %q for %s at %s, not a commit id; refusing it", firstN(info.SHA, 60), repo, rev)
	}
	if IsCommit(rev) && info.SHA != rev {
		return nil, fmt.Errorf("hub: asked for commit %s of %s, the Hub answered with %s; refusing it", rev, repo, info.SHA)
	}
	return &info, nil
}

// netError marks a failure to reach the Hub (as opposed to an answer): the
// cache may stand in.
type netError struct{ err error }

// Unreachable reports whether err (from Pull) means that the Hub could not
// be reached or the cache was asked offline and lacks the model, as
// opposed to an answer the Hub gave: the case where a caller may fall back
// to something local.
func Unreachable(err error) bool {
	var ne *netError
	return errors.As(err, &ne) || errors.Is(err, ErrNotCached)
}

func (e *netError) Error() string { return e.err.Error() }
func (e *netError) Unwrap() error { return e.err }

// httpClient returns the retrying client: retries per request are
// go-retryablehttp's; redirects keep the token only on the endpoint's host.
func (c *Client) httpClient() *retryablehttp.Client {
	rc := retryablehttp.NewClient()
	rc.Logger = nil
	rc.RetryMax = c.retries()
	rc.RetryWaitMin = c.RetryWait
	if rc.RetryWaitMin == 0 {
		rc.RetryWaitMin = time.Second
	}
	rc.RetryWaitMax = max(30*time.Second, rc.RetryWaitMin)
	rc.Backoff = func(min, max time.Duration, n int, resp *http.Response) time.Duration {
		return cappedBackoff(retryablehttp.DefaultBackoff(min, max, n, resp), 2*max)
	}
	rc.ErrorHandler = retryablehttp.PassthroughErrorHandler
	rc.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		// A name that does not resolve means no network (or a wrong
		// HF_ENDPOINT): waiting will not help, and the cache may stand in.
		var dns *net.DNSError
		if errors.As(err, &dns) && dns.IsNotFound {
			return false, err
		}
		return retryablehttp.DefaultRetryPolicy(ctx, resp, err)
	}
	tr := c.Transport
	if tr == nil {
		tr = http.DefaultTransport.(*http.Transport).Clone()
	}
	endpointHost := ""
	if u, err := url.Parse(c.Endpoint); err == nil {
		endpointHost = u.Host
	}
	rc.HTTPClient = &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 {
				return errors.New("hub: more than 10 redirects")
			}
			// net/http keeps Authorization on a redirect to a subdomain or
			// to another port of the same host; the CDN must not see it.
			if req.URL.Host != endpointHost || req.URL.Scheme != via[0].URL.Scheme {
				req.Header.Del("Authorization")
			}
			return nil
		},
	}
	return rc
}

// cappedBackoff bounds a wait (a Retry-After of a day is not waited for).
func cappedBackoff(d, limit time.Duration) time.Duration { return min(d, limit) }

func (c *Client) retries() int {
	if c.MaxRetries > 0 {
		return c.MaxRetries
	}
	return 5
}

// send sends one request (retried by the client) with the token when u is
// on the endpoint's host, following redirects when follow is set. A
// failure to reach the server is a *netError.
func (c *Client) send(ctx context.Context, method, u string, hdr http.Header, follow bool) (*http.Response, error) {
	req, err := retryablehttp.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, fmt.Errorf("hub: %v", err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("User-Agent", "druto (huggingface_hub cache layout)")
	req.Header.Set("Accept-Encoding", "identity") // sizes and Range as stored
	if c.Token != "" && sameHost(u, c.Endpoint) {
		req.Header.Set("Authorization", "Bearer "+string(c.Token))
	}
	rc := c.httpClient()
	if !follow {
		rc.HTTPClient.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	resp, err := rc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &netError{fmt.Errorf("hub: cannot reach %s: %v; check the network (or HF_ENDPOINT), or set HF_HUB_OFFLINE=1 to use the cache", hostOf(u), cause(err))}
	}
	return resp, nil
}

// cause returns the innermost message of a request error, without the URL
// (which the caller names by its host).
func cause(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err.Error()
	}
	return err.Error()
}

func sameHost(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && ua.Host == ub.Host && ua.Scheme == ub.Scheme
}

func hostOf(u string) string {
	if p, err := url.Parse(u); err == nil {
		return p.Scheme + "://" + p.Host
	}
	return "the Hub"
}

// statusError turns a non-success answer into one line: the cause (from
// the Hub's X-Error-Code where it sends one) and what to do.
func (c *Client) statusError(resp *http.Response, repo, rev, file string) error {
	what := repo
	if file != "" {
		what = repo + "/" + file
	}
	code := resp.Header.Get("X-Error-Code")
	switch {
	case code == "RevisionNotFound":
		return fmt.Errorf("hub: %s has no revision %q (HTTP %d); check the branch, tag or commit", repo, rev, resp.StatusCode)
	case code == "EntryNotFound" || (file != "" && resp.StatusCode == http.StatusNotFound):
		return fmt.Errorf("hub: %s at %s has no file %s (HTTP %d)", repo, rev, file, resp.StatusCode)
	case code == "GatedRepo":
		return fmt.Errorf("hub: %s is gated (HTTP %d): accept its terms on the Hub, then set HF_TOKEN to a token of that account", repo, resp.StatusCode)
	case code == "RepoNotFound" || code == "RepositoryNotFound" || resp.StatusCode == http.StatusNotFound:
		hint := "check the name (e.g. gpt2, gpt2-medium, openai-community/gpt2)"
		if c.Token == "" {
			hint += ", or set HF_TOKEN if it is private"
		} else {
			hint += ", or check that HF_TOKEN can read it if it is private"
		}
		return fmt.Errorf("hub: no model %s on %s (HTTP %d); %s", repo, c.Endpoint, resp.StatusCode, hint)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		if c.Token == "" {
			return fmt.Errorf("hub: %s needs a token (HTTP %d): set HF_TOKEN to a Hugging Face access token with read access", what, resp.StatusCode)
		}
		return fmt.Errorf("hub: the Hub refused HF_TOKEN for %s (HTTP %d): check that the token is valid and can read this model", what, resp.StatusCode)
	case resp.StatusCode == http.StatusTooManyRequests:
		return fmt.Errorf("hub: the Hub rate-limited the requests for %s (HTTP 429) after %d retries; wait a few minutes and pull again (a token raises the limit)", what, c.retries())
	case resp.StatusCode >= 500:
		return fmt.Errorf("hub: the Hub failed with HTTP %d for %s after %d retries; try again later (finished files are kept, a partial one is resumed)", resp.StatusCode, what, c.retries())
	}
	return fmt.Errorf("hub: unexpected HTTP %d from %s for %s; is HF_ENDPOINT a Hub?", resp.StatusCode, hostOf(c.Endpoint), what)
}
