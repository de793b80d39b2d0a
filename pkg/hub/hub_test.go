package hub_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/druto/druto/pkg/hub"
	"github.com/druto/druto/pkg/hub/hubtest"
)

const (
	commitA = "1111111111111111111111111111111111111111"
	secret  = "hf_secretTOKEN123"
)

// model is a small repository: an LFS weights file and small git files.
func model() *hubtest.Repo {
	w := bytes.Repeat([]byte("0123456789abcdef"), 20000) // 320 kB
	return &hubtest.Repo{Commit: commitA, Files: map[string]hubtest.File{
		"model.safetensors": {Data: w, LFS: true},
		"config.json":       {Data: []byte(`{"model_type": "gpt2"}`)},
		"vocab.json":        {Data: []byte(`{"!": 0}`)},
		"README.md":         {Data: []byte("# a model\n")},
	}}
}

// client returns a client of h writing to a fresh cache, retrying fast.
func client(t *testing.T, h *hubtest.Hub) (*hub.Client, *[]string) {
	var mu sync.Mutex
	var notes []string
	c := &hub.Client{Endpoint: h.Server.URL, Cache: hub.Cache(t.TempDir()), RetryWait: time.Millisecond, MaxRetries: 3,
		Notice: func(s string) { mu.Lock(); notes = append(notes, s); mu.Unlock() }}
	return c, &notes
}

func oneLine(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one naming %q", want)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || len(msg) > 400 {
		t.Errorf("error is not one short line: %q", msg)
	}
	if strings.Contains(msg, secret) {
		t.Errorf("error shows the token: %q", msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not say %q", msg, w)
		}
	}
}

// TestPullLayout: files land in huggingface_hub's layout (blobs named by
// etag, relative symlinks from the snapshot, refs/main), files the
// repository lacks are skipped, and a second pull asks only the API.
func TestPullLayout(t *testing.T) {
	h := hubtest.New(t)
	r := model()
	h.Add("gpt2", r)
	c, _ := client(t, h)
	s, err := c.Pull(context.Background(), "gpt2", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	repoDir := filepath.Join(string(c.Cache), "models--gpt2")
	if s.Dir != filepath.Join(repoDir, "snapshots", commitA) || s.Commit != commitA || s.Cached {
		t.Errorf("snapshot %+v", s)
	}
	if want := []string{"model.safetensors", "config.json", "vocab.json"}; fmt.Sprint(s.Files) != fmt.Sprint(want) {
		t.Errorf("files %v, want %v", s.Files, want)
	}
	ref, err := os.ReadFile(filepath.Join(repoDir, "refs", "main"))
	if err != nil || string(ref) != commitA {
		t.Errorf("refs/main = %q, %v", ref, err)
	}
	for _, f := range s.Files {
		p := s.Path(f)
		link, err := os.Readlink(p)
		if err != nil {
			t.Fatalf("%s is not a symlink: %v", f, err)
		}
		if want := filepath.Join("..", "..", "blobs", r.Etag(f)); link != want {
			t.Errorf("%s -> %s, want %s", f, link, want)
		}
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(b, r.Files[f].Data) {
			t.Errorf("%s: content differs (%v)", f, err)
		}
	}
	if s.Fetched != int64(len(r.Files["model.safetensors"].Data)+len(r.Files["config.json"].Data)+len(r.Files["vocab.json"].Data)) {
		t.Errorf("fetched %d bytes", s.Fetched)
	}
	if _, err := os.Stat(filepath.Join(string(c.Cache), ".locks", "models--gpt2", r.Etag("model.safetensors")+".lock")); err != nil {
		t.Errorf("no lock file where huggingface_hub keeps it: %v", err)
	}
	api, head, get, cdn := h.Count("api"), h.Count("head"), h.Count("get"), h.Count("cdn")
	s2, err := c.Pull(context.Background(), "gpt2", "main", nil)
	if err != nil {
		t.Fatal(err)
	}
	if s2.Fetched != 0 || h.Count("head") != head || h.Count("get") != get || h.Count("cdn") != cdn || h.Count("api") != api+1 {
		t.Errorf("second pull: fetched %d, requests api %d->%d head %d->%d get %d->%d cdn %d->%d; want only one API request",
			s2.Fetched, api, h.Count("api"), head, h.Count("head"), get, h.Count("get"), cdn, h.Count("cdn"))
	}
	// A commit id pulls the same snapshot; a tag is recorded under refs.
	if s3, err := c.Pull(context.Background(), "gpt2", commitA, nil); err != nil || s3.Dir != s.Dir {
		t.Errorf("by commit: %v, %v", s3, err)
	}
}

// TestRenamedRepo: gpt2 redirects to openai-community/gpt2 (as on the
// Hub); the cache keeps the name asked for, as huggingface_hub does.
func TestRenamedRepo(t *testing.T) {
	h := hubtest.New(t)
	h.Add("openai-community/gpt2", model())
	h.Rename("gpt2", "openai-community/gpt2")
	c, _ := client(t, h)
	s, err := c.Pull(context.Background(), "gpt2", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Path("model.safetensors")); err != nil || !strings.Contains(s.Dir, "models--gpt2") {
		t.Errorf("%s: %v", s.Dir, err)
	}
	s2, err := c.Pull(context.Background(), "openai-community/gpt2", "", nil)
	if err != nil || !strings.Contains(s2.Dir, "models--openai-community--gpt2") {
		t.Errorf("%v %v", s2, err)
	}
}

// TestTokenNotToCDN: the token reaches the endpoint (the private repo
// answers) but not the CDN, another port of the same host, which net/http
// alone would send it to; a wrong or missing token is one line.
func TestTokenNotToCDN(t *testing.T) {
	h := hubtest.New(t)
	r := model()
	r.Token = secret
	h.Add("me/private", r)
	c, _ := client(t, h)
	_, err := c.Pull(context.Background(), "me/private", "", nil)
	oneLine(t, err, "me/private", "HF_TOKEN")
	c.Token = "hf_wrong"
	_, err = c.Pull(context.Background(), "me/private", "", nil)
	oneLine(t, err, "HF_TOKEN")
	if strings.Contains(err.Error(), "hf_wrong") {
		t.Errorf("error shows the token: %v", err)
	}
	c.Token = secret
	if _, err := c.Pull(context.Background(), "me/private", "", nil); err != nil {
		t.Fatal(err)
	}
	if h.Count("cdn") == 0 || h.CDNAuth() != 0 {
		t.Errorf("CDN requests %d, with a token %d; want some, none with a token", h.Count("cdn"), h.CDNAuth())
	}
	if s := fmt.Sprintf("%v %+v %#v", c, *c, c.Token); strings.Contains(s, secret) {
		t.Errorf("a printed client shows the token: %s", s)
	}
}

// TestResume: a body cut mid-transfer is resumed with Range in the same
// pull; a pull that gives up leaves the partial file, which the next pull
// continues instead of starting over.
func TestResume(t *testing.T) {
	h := hubtest.New(t)
	r := model()
	h.Add("gpt2", r)
	size := int64(len(r.Files["model.safetensors"].Data))
	c, notes := client(t, h)
	h.Cut(100000, 1)
	s, err := c.Pull(context.Background(), "gpt2", "", []string{"model.safetensors", "config.json"})
	if err != nil {
		t.Fatal(err)
	}
	if h.Count("cdn") != 2 || !strings.Contains(strings.Join(*notes, "|"), "resuming") {
		t.Errorf("cdn requests %d (want 2), notes %q", h.Count("cdn"), *notes)
	}
	if b, _ := os.ReadFile(s.Path("model.safetensors")); !bytes.Equal(b, r.Files["model.safetensors"].Data) {
		t.Error("resumed file differs")
	}

	c2, _ := client(t, h)
	c2.MaxRetries = 1
	h.Cut(50000, 1000)
	_, err = c2.Pull(context.Background(), "gpt2", "", []string{"model.safetensors", "config.json"})
	oneLine(t, err, "model.safetensors", "pull again")
	part := filepath.Join(string(c2.Cache), "models--gpt2", "blobs", r.Etag("model.safetensors")+".incomplete")
	info, serr := os.Stat(part)
	if serr != nil || info.Size() != 100000 {
		t.Fatalf("partial file: %v %v", info, serr)
	}
	if _, err := os.Stat(filepath.Join(string(c2.Cache), "models--gpt2", "snapshots", commitA, "model.safetensors")); err == nil {
		t.Error("a partial download is visible in the snapshot")
	}
	h.Cut(0, 0)
	s, err = c2.Pull(context.Background(), "gpt2", "", []string{"model.safetensors", "config.json"})
	if err != nil {
		t.Fatal(err)
	}
	if want := size - 100000 + int64(len(r.Files["config.json"].Data)); s.Fetched != want {
		t.Errorf("fetched %d bytes after the cut, want %d (the rest only)", s.Fetched, want)
	}
	if b, _ := os.ReadFile(s.Path("model.safetensors")); !bytes.Equal(b, r.Files["model.safetensors"].Data) {
		t.Error("resumed file differs")
	}
}

// TestBadBodies: a body whose hash is not the announced one, or that is
// longer than announced, is rejected in one line and nothing is kept.
func TestBadBodies(t *testing.T) {
	for _, tc := range []struct {
		name  string
		set   func(h *hubtest.Hub)
		err   error
		words []string
	}{
		{"tampered", func(h *hubtest.Hub) { h.Tamper(true) }, hub.ErrChecksum, []string{"checksum", "nothing was kept"}},
		{"oversized", func(h *hubtest.Hub) { h.Oversize(4096) }, hub.ErrTooLarge, []string{"more than", "nothing was kept"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hubtest.New(t)
			h.Add("gpt2", model())
			tc.set(h)
			c, _ := client(t, h)
			_, err := c.Pull(context.Background(), "gpt2", "", nil)
			oneLine(t, err, tc.words...)
			if !errors.Is(err, tc.err) {
				t.Errorf("error %v is not %v", err, tc.err)
			}
			repo := filepath.Join(string(c.Cache), "models--gpt2")
			for _, d := range []string{"blobs", "snapshots/" + commitA} {
				ents, _ := os.ReadDir(filepath.Join(repo, d))
				if len(ents) != 0 {
					t.Errorf("%s holds %d entries after a rejected body", d, len(ents))
				}
			}
		})
	}
}

// TestOffline: HF_HUB_OFFLINE answers from the cache with no request;
// an empty cache is one line saying what to do; an unreachable Hub falls
// back to the cache with a notice.
func TestOffline(t *testing.T) {
	h := hubtest.New(t)
	h.Add("gpt2", model())
	c, notes := client(t, h)
	if _, err := c.Pull(context.Background(), "gpt2", "", nil); err != nil {
		t.Fatal(err)
	}
	n := h.Count("api") + h.Count("head") + h.Count("get") + h.Count("cdn")
	c.Offline = true
	s, err := c.Pull(context.Background(), "gpt2", "", nil)
	if err != nil || !s.Cached || len(s.Files) != 3 {
		t.Fatalf("offline: %+v %v", s, err)
	}
	if m := h.Count("api") + h.Count("head") + h.Count("get") + h.Count("cdn"); m != n {
		t.Errorf("offline pull made %d requests", m-n)
	}
	_, err = c.Pull(context.Background(), "gpt2-medium", "", nil)
	oneLine(t, err, "gpt2-medium", "HF_HUB_OFFLINE", "druto pull")
	if !errors.Is(err, hub.ErrNotCached) {
		t.Errorf("%v is not ErrNotCached", err)
	}
	c.Offline = false
	h.Server.Close()
	s, err = c.Pull(context.Background(), "gpt2", "", nil)
	if err != nil || !s.Cached || !strings.Contains(strings.Join(*notes, "|"), "cannot be reached") {
		t.Errorf("unreachable Hub: %+v %v %q", s, err, *notes)
	}
	_, err = c.Pull(context.Background(), "gpt2-large", "", nil)
	oneLine(t, err, "cannot reach", "HF_HUB_OFFLINE")
}

// TestStatuses: 429 and 5xx are retried; answers that stay bad, and 401,
// 404 and an unknown revision, are one line each naming cause and cure.
func TestStatuses(t *testing.T) {
	h := hubtest.New(t)
	h.Add("gpt2", model())
	c, _ := client(t, h)
	h.Fail(429, 503, 500)
	if _, err := c.Pull(context.Background(), "gpt2", "", nil); err != nil {
		t.Fatalf("after 429, 503, 500 and a retry budget of 3: %v", err)
	}
	for _, tc := range []struct {
		name  string
		fail  []int
		repo  string
		rev   string
		words []string
	}{
		{"rate limited", []int{429, 429, 429, 429, 429}, "gpt2", "", []string{"429", "wait"}},
		{"server error", []int{502, 502, 502, 502, 502}, "gpt2", "", []string{"502", "try again later"}},
		{"unauthorized", []int{401}, "gpt2", "", []string{"401", "HF_TOKEN"}},
		{"unknown repo", nil, "gtp2", "", []string{"no model gtp2", "check the name"}},
		{"unknown revision", nil, "gpt2", "v9", []string{"no revision", "v9"}},
		{"not a name", nil, "../etc", "", []string{"not a model name"}},
		{"bad revision", nil, "gpt2", "../../x", []string{"not a branch"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.Fail(tc.fail...)
			c, _ := client(t, h)
			_, err := c.Pull(context.Background(), tc.repo, tc.rev, nil)
			oneLine(t, err, tc.words...)
		})
	}
	c.Endpoint = h.Server.URL + "/nothub"
	h.Add("x", &hubtest.Repo{Commit: commitA})
	_, err := c.Pull(context.Background(), "gpt2", "", nil)
	oneLine(t, err, "HTTP")
}

// TestHostileNames: names, commits and etags a server sends are checked
// before anything is written; a symlinked folder inside a snapshot is not
// written through.
func TestHostileNames(t *testing.T) {
	for _, name := range []string{"../evil", "/abs/evil", "a/../../evil", "sub\\..\\evil", "C:evil", "./x", "a//b", "ok\x00x"} {
		t.Run(fmt.Sprintf("%q", name), func(t *testing.T) {
			h := hubtest.New(t)
			r := model()
			r.Extra = []string{name}
			h.Add("gpt2", r)
			c, _ := client(t, h)
			_, err := c.Pull(context.Background(), "gpt2", "", hub.AllFiles)
			oneLine(t, err, "not a safe relative path")
		})
	}
	top := t.TempDir()
	h := hubtest.New(t)
	r := model()
	r.ETags = map[string]string{"config.json": "../../../../evil"}
	h.Add("gpt2", r)
	c, _ := client(t, h)
	_, err := c.Pull(context.Background(), "gpt2", "", nil)
	oneLine(t, err, "ETag", "refusing")

	bad := model()
	bad.Commit = "../../../evil"
	h.Add("bad", bad)
	_, err = c.Pull(context.Background(), "bad", "", nil)
	oneLine(t, err, "not a commit id")

	// A folder of the snapshot that is a symlink out of the cache.
	r2 := model()
	r2.Files["sub/tok.json"] = hubtest.File{Data: []byte("{}")}
	h.Add("nested", r2)
	c2, _ := client(t, h)
	snap := filepath.Join(string(c2.Cache), "models--nested", "snapshots", commitA)
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(top, filepath.Join(snap, "sub")); err != nil {
		t.Fatal(err)
	}
	_, err = c2.Pull(context.Background(), "nested", "", hub.AllFiles)
	oneLine(t, err, "symlink")
	if ents, _ := os.ReadDir(top); len(ents) != 0 {
		t.Errorf("wrote %d files through the symlink", len(ents))
	}
}

// TestTransformersCache: a cache laid out by hand as huggingface_hub
// writes it (built here without pkg/hub) is found offline, and online a
// pull of the same commit downloads nothing.
func TestTransformersCache(t *testing.T) {
	cache := t.TempDir()
	r := model()
	repo := filepath.Join(cache, "models--openai-community--gpt2")
	for _, d := range []string{"blobs", "refs", "snapshots/" + commitA} {
		if err := os.MkdirAll(filepath.Join(repo, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"model.safetensors", "config.json", "vocab.json"} {
		if err := os.WriteFile(filepath.Join(repo, "blobs", r.Etag(f)), r.Files[f].Data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../../blobs/"+r.Etag(f), filepath.Join(repo, "snapshots", commitA, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(repo, "refs", "main"), []byte(commitA), 0o644); err != nil {
		t.Fatal(err)
	}
	h := hubtest.New(t)
	h.Add("openai-community/gpt2", r)
	c := &hub.Client{Endpoint: h.Server.URL, Cache: hub.Cache(cache), Offline: true}
	s, err := c.Pull(context.Background(), "openai-community/gpt2", "", nil)
	if err != nil || len(s.Files) != 3 {
		t.Fatalf("%+v %v", s, err)
	}
	c.Offline = false
	s, err = c.Pull(context.Background(), "openai-community/gpt2", "", nil)
	if err != nil || s.Fetched != 0 || h.Count("cdn")+h.Count("get")+h.Count("head") != 0 {
		t.Errorf("online over a full cache: %+v %v; %d file requests", s, err, h.Count("cdn")+h.Count("get")+h.Count("head"))
	}
}

// TestFromEnv: the environment means what it means to huggingface_hub.
func TestFromEnv(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HUGGINGFACE_HUB_CACHE", "")
	t.Setenv("HF_HOME", home)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_TOKEN_PATH", "")
	t.Setenv("HF_ENDPOINT", "")
	t.Setenv("HF_HUB_OFFLINE", "")
	if err := os.WriteFile(filepath.Join(home, "token"), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := hub.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if string(c.Cache) != filepath.Join(home, "hub") || c.Endpoint != hub.DefaultEndpoint || c.Offline || string(c.Token) != secret {
		t.Errorf("defaults: cache %s endpoint %s offline %v token set %v", c.Cache, c.Endpoint, c.Offline, c.Token != "")
	}
	t.Setenv("HF_HUB_CACHE", "/x/cache")
	t.Setenv("HF_ENDPOINT", "http://127.0.0.1:1/")
	t.Setenv("HF_HUB_OFFLINE", "TRUE")
	t.Setenv("HF_TOKEN", "hf_other")
	c, err = hub.FromEnv()
	if err != nil || c.Cache != "/x/cache" || c.Endpoint != "http://127.0.0.1:1" || !c.Offline || c.Token != "hf_other" {
		t.Errorf("%v %v", c, err)
	}
	t.Setenv("HF_ENDPOINT", "ftp://x")
	_, err = hub.FromEnv()
	oneLine(t, err, "HF_ENDPOINT")
}

// TestTwoProcesses: two processes pulling the same model at once share
// the work through the blob's lock: each blob is downloaded once, and
// both see the whole snapshot.
func TestTwoProcesses(t *testing.T) {
	if os.Getenv("HUBTEST_CHILD") != "" {
		return
	}
	h := hubtest.New(t)
	r := model()
	h.Add("gpt2", r)
	h.Delay(60 * time.Millisecond) // ~300 ms for the weights: the two pulls overlap
	cache := t.TempDir()
	var wg sync.WaitGroup
	outs := make([][]byte, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(os.Args[0], "-test.run=^TestChildPull$", "-test.v")
			cmd.Env = append(os.Environ(), "HUBTEST_CHILD=1", "HF_ENDPOINT="+h.Server.URL, "HF_HUB_CACHE="+cache, "HF_TOKEN=", "HF_HUB_OFFLINE=")
			outs[i], errs[i] = cmd.CombinedOutput()
		}()
	}
	wg.Wait()
	for i := range 2 {
		if errs[i] != nil || !bytes.Contains(outs[i], []byte("PASS")) {
			t.Fatalf("process %d: %v\n%s", i, errs[i], outs[i])
		}
	}
	if h.Count("cdn") != 1 || h.Count("get") != 3 {
		t.Errorf("blob requests: cdn %d (want 1), resolve GETs %d (want 3: each file once)", h.Count("cdn"), h.Count("get"))
	}
	b, err := os.ReadFile(filepath.Join(cache, "models--gpt2", "snapshots", commitA, "model.safetensors"))
	if err != nil || !bytes.Equal(b, r.Files["model.safetensors"].Data) {
		t.Errorf("snapshot file: %v", err)
	}
}

// TestChildPull is the child process of TestTwoProcesses.
func TestChildPull(t *testing.T) {
	if os.Getenv("HUBTEST_CHILD") == "" {
		t.Skip("a child of TestTwoProcesses") // skip: runs only as the child process of another test
	}
	c, err := hub.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Pull(context.Background(), "gpt2", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(s.Path("model.safetensors")); err != nil || len(b) != 320000 {
		t.Fatalf("%d bytes, %v", len(b), err)
	}
}

var _ = http.StatusOK
