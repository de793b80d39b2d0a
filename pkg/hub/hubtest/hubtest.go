// Package hubtest plays the Hugging Face Hub on 127.0.0.1 for tests: the
// API route (/api/models/REPO/revision/REV), the resolve route
// (/REPO/resolve/REV/FILE, HEAD and GET) with the headers huggingface_hub
// reads (ETag, X-Linked-Etag, X-Linked-Size, X-Repo-Commit), LFS files
// redirected to a second server that plays the CDN, HTTP Range, and faults
// a test switches on (status codes, a cut body, a tampered or oversized
// body, hostile names). It also writes GPT-2 checkpoints the way
// transformers' save_pretrained does, in F32, F16 or BF16.
package hubtest

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// File is one file of a repository.
type File struct {
	Data []byte
	LFS  bool // served through the CDN with X-Linked-Etag (the sha256)
}

// Repo is a model repository at one commit.
type Repo struct {
	Commit string            // 40 hex
	Refs   []string          // branch and tag names pointing at Commit ("main" is added)
	Files  map[string]File   // by name
	Extra  []string          // more sibling names the API lists (hostile-name tests)
	Token  string            // when set, every route answers 401 without "Bearer Token"
	ETags  map[string]string // a file's announced etag, overriding the true one
}

// Hub is a fake Hub and its CDN. Fields a test sets are read under mu by
// the handlers; set them before the requests they should affect.
type Hub struct {
	Server *httptest.Server // the endpoint: HF_ENDPOINT = Server.URL
	CDN    *httptest.Server // where LFS files redirect to (another host:port)

	mu    sync.Mutex
	repos map[string]*Repo
	// Counts of requests by route: "api", "head", "get" (resolve GET),
	// "cdn" (CDN GET).
	counts map[string]int
	// CDNAuth counts CDN requests that carried an Authorization header.
	cdnAuth int
	// Statuses, when not empty, are answered (one per request, in order)
	// on the API and resolve routes before serving normally.
	statuses []int
	// CutAfter, when > 0, makes the next CutTimes file bodies stop after
	// that many bytes (the connection closes early).
	cutAfter int
	cutTimes int
	// Tamper flips a byte in every file body served; Oversize appends
	// bytes beyond the announced size.
	tamper   bool
	oversize int
	// Delay slows each file body (to make two pulls overlap).
	delay time.Duration
	// RedirectRepo maps an old repository name to its new one: the API and
	// resolve routes answer 307 to the new name, as the Hub does for gpt2
	// -> openai-community/gpt2.
	redirect map[string]string
}

// New starts a fake Hub and its CDN on 127.0.0.1; they stop with the test.
func New(t testing.TB) *Hub {
	h := &Hub{repos: map[string]*Repo{}, counts: map[string]int{}, redirect: map[string]string{}}
	h.Server = httptest.NewServer(http.HandlerFunc(h.serveHub))
	h.CDN = httptest.NewServer(http.HandlerFunc(h.serveCDN))
	t.Cleanup(h.Server.Close)
	t.Cleanup(h.CDN.Close)
	return h
}

// Add publishes a repository.
func (h *Hub) Add(name string, r *Repo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !containsStr(r.Refs, "main") {
		r.Refs = append(r.Refs, "main")
	}
	h.repos[name] = r
}

// Rename makes old answer with a redirect to name.
func (h *Hub) Rename(old, name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.redirect[old] = name
}

// Count returns how many requests of a kind ("api", "head", "get", "cdn")
// arrived.
func (h *Hub) Count(kind string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts[kind]
}

// CDNAuth returns how many CDN requests carried an Authorization header.
func (h *Hub) CDNAuth() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cdnAuth
}

// Fail answers the next requests on the Hub's routes with these statuses.
func (h *Hub) Fail(statuses ...int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.statuses = append(h.statuses, statuses...)
}

// Cut makes the next times file bodies stop after n bytes.
func (h *Hub) Cut(n, times int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cutAfter, h.cutTimes = n, times
}

// Tamper makes every file body differ from what is announced (one byte).
func (h *Hub) Tamper(on bool) { h.mu.Lock(); h.tamper = on; h.mu.Unlock() }

// Oversize makes every file body n bytes longer than announced.
func (h *Hub) Oversize(n int) { h.mu.Lock(); h.oversize = n; h.mu.Unlock() }

// Delay slows each file body by d.
func (h *Hub) Delay(d time.Duration) { h.mu.Lock(); h.delay = d; h.mu.Unlock() }

// GitSHA1 is the git blob id of b: the ETag of a file not in LFS.
func GitSHA1(b []byte) string {
	s := sha1.New()
	fmt.Fprintf(s, "blob %d\x00", len(b))
	s.Write(b)
	return hex.EncodeToString(s.Sum(nil))
}

// SHA256 is the hex sha256 of b: the X-Linked-Etag of an LFS file.
func SHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Etag returns the etag the Hub announces for a file.
func (r *Repo) Etag(name string) string {
	if e, ok := r.ETags[name]; ok {
		return e
	}
	f := r.Files[name]
	if f.LFS {
		return SHA256(f.Data)
	}
	return GitSHA1(f.Data)
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// lookup finds a repository and whether rev names its commit.
func (h *Hub) lookup(name, rev string) (*Repo, bool, bool) {
	r, ok := h.repos[name]
	if !ok {
		return nil, false, false
	}
	return r, rev == r.Commit || containsStr(r.Refs, rev), true
}

func (h *Hub) serveHub(w http.ResponseWriter, req *http.Request) {
	h.mu.Lock()
	if len(h.statuses) > 0 {
		st := h.statuses[0]
		h.statuses = h.statuses[1:]
		h.mu.Unlock()
		if st == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "0")
		}
		http.Error(w, http.StatusText(st), st)
		return
	}
	defer h.mu.Unlock()
	p := req.URL.Path
	if rest, ok := strings.CutPrefix(p, "/api/models/"); ok {
		h.counts["api"]++
		name, rev, ok := strings.Cut(rest, "/revision/")
		if !ok {
			http.NotFound(w, req)
			return
		}
		if to, ok := h.redirect[name]; ok {
			http.Redirect(w, req, "/api/models/"+to+"/revision/"+rev, http.StatusTemporaryRedirect)
			return
		}
		r, revOK, ok := h.lookup(name, rev)
		if !h.auth(w, req, r) {
			return
		}
		switch {
		case !ok:
			w.Header().Set("X-Error-Code", "RepoNotFound")
			http.Error(w, "Repository not found", http.StatusUnauthorized)
			return
		case !revOK:
			w.Header().Set("X-Error-Code", "RevisionNotFound")
			http.Error(w, "Invalid rev id", http.StatusNotFound)
			return
		}
		type sib struct {
			Name string `json:"rfilename"`
		}
		out := struct {
			ID       string `json:"id"`
			SHA      string `json:"sha"`
			Siblings []sib  `json:"siblings"`
		}{ID: name, SHA: r.Commit}
		for n := range r.Files {
			out.Siblings = append(out.Siblings, sib{n})
		}
		for _, n := range r.Extra {
			out.Siblings = append(out.Siblings, sib{n})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out)
		return
	}
	// /REPO/resolve/REV/FILE, REPO being NAME or ORG/NAME.
	i := strings.Index(p, "/resolve/")
	if i < 0 {
		http.NotFound(w, req)
		return
	}
	name := strings.TrimPrefix(p[:i], "/")
	rev, file, _ := strings.Cut(p[i+len("/resolve/"):], "/")
	if req.Method == http.MethodHead {
		h.counts["head"]++
	} else {
		h.counts["get"]++
	}
	if to, ok := h.redirect[name]; ok {
		http.Redirect(w, req, "/"+to+"/resolve/"+rev+"/"+file, http.StatusTemporaryRedirect)
		return
	}
	r, revOK, ok := h.lookup(name, rev)
	if !h.auth(w, req, r) {
		return
	}
	f, fileOK := File{}, false
	if ok {
		f, fileOK = r.Files[file]
	}
	switch {
	case !ok:
		w.Header().Set("X-Error-Code", "RepoNotFound")
		http.Error(w, "Repository not found", http.StatusUnauthorized)
		return
	case !revOK:
		w.Header().Set("X-Error-Code", "RevisionNotFound")
		http.Error(w, "Invalid rev id", http.StatusNotFound)
		return
	case !fileOK:
		w.Header().Set("X-Error-Code", "EntryNotFound")
		http.Error(w, "Entry not found", http.StatusNotFound)
		return
	}
	w.Header().Set("X-Repo-Commit", r.Commit)
	etag := r.Etag(file)
	if f.LFS {
		w.Header().Set("X-Linked-Etag", `"`+etag+`"`)
		w.Header().Set("X-Linked-Size", strconv.Itoa(len(f.Data)))
		w.Header().Set("ETag", `"`+GitSHA1([]byte("pointer "+etag))+`"`)
		http.Redirect(w, req, h.CDN.URL+"/cdn/"+SHA256(f.Data)+"?file="+file, http.StatusFound)
		return
	}
	w.Header().Set("ETag", `"`+etag+`"`)
	h.serveBody(w, req, f.Data)
}

// auth answers 401 when r wants a token the request lacks.
func (h *Hub) auth(w http.ResponseWriter, req *http.Request, r *Repo) bool {
	if r == nil || r.Token == "" || req.Header.Get("Authorization") == "Bearer "+r.Token {
		return true
	}
	w.Header().Set("X-Error-Code", "RepoNotFound")
	http.Error(w, "Invalid credentials", http.StatusUnauthorized)
	return false
}

func (h *Hub) serveCDN(w http.ResponseWriter, req *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts["cdn"]++
	if req.Header.Get("Authorization") != "" {
		h.cdnAuth++
	}
	sum := strings.TrimPrefix(req.URL.Path, "/cdn/")
	for _, r := range h.repos {
		for _, f := range r.Files {
			if f.LFS && SHA256(f.Data) == sum {
				h.serveBody(w, req, f.Data)
				return
			}
		}
	}
	http.NotFound(w, req)
}

// serveBody serves data with Range support and the faults switched on.
// Called with mu held; it releases it while the body is written.
func (h *Hub) serveBody(w http.ResponseWriter, req *http.Request, data []byte) {
	tamper, over, delay := h.tamper, h.oversize, h.delay
	cut := 0
	if h.cutTimes > 0 && req.Method == http.MethodGet {
		cut = h.cutAfter
		h.cutTimes--
	}
	h.mu.Unlock()
	defer h.mu.Lock()
	body := data
	if tamper && len(body) > 0 {
		body = bytes.Clone(body)
		body[len(body)/2] ^= 0xff
	}
	start := 0
	if rg := req.Header.Get("Range"); rg != "" {
		var lo int
		if _, err := fmt.Sscanf(rg, "bytes=%d-", &lo); err != nil || lo < 0 || lo > len(body) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", len(body)))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		start = lo
	}
	part := body[start:]
	if over > 0 {
		// No Content-Length: the body is chunked, so the client sees the
		// extra bytes only by reading past the announced size.
		part = append(bytes.Clone(part), bytes.Repeat([]byte{'X'}, over)...)
	} else {
		w.Header().Set("Content-Length", strconv.Itoa(len(part)))
	}
	if start > 0 {
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, len(body)-1, len(body)))
		w.WriteHeader(http.StatusPartialContent)
	} else {
		w.WriteHeader(http.StatusOK)
	}
	if req.Method == http.MethodHead {
		return
	}
	if cut > 0 && cut < len(part) {
		w.Write(part[:cut])
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		panic(http.ErrAbortHandler) // closes the connection mid-body
	}
	for len(part) > 0 {
		n := min(len(part), 64<<10)
		w.Write(part[:n])
		part = part[n:]
		if delay > 0 {
			time.Sleep(delay)
		}
	}
}
