package notebooks

// Browser tests: the notebooks as readers see them, in Debian's Chromium
// driven through the DevTools protocol (github.com/chromedp/chromedp).
//
//   - TestPublishedHTML publishes the notebooks with
//     scripts/publish-notebooks.sh (reusing what TestExecute executed) and
//     checks in the browser that every figure of every page has ink, and
//     that the loss figure of 03-train looks like the committed screenshot
//     in each language (so that Bangla shaped wrong fails).
//   - TestLiveJupyter starts a Jupyter Notebook server, opens 03-train in
//     English and in Bangla, runs all cells from the Cell menu and checks
//     what the page shows: no error, the progress bar at 100%, the loss
//     figure drawn.
//   - TestLiveJupyterHang checks that a cell that never ends is stopped at
//     the deadline with a screenshot and leaves no process behind.
//
// DRUTO_BROWSER_TESTS gates them as DRUTO_NOTEBOOK_TESTS gates TestExecute:
// unset, a missing browser or Jupyter skips them with a message; "require"
// (set by .ci/run) makes that a failure; "off" skips them.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/druto/druto/nbui"
	"github.com/druto/druto/pkg/lab"
	"github.com/druto/druto/plotting"
	"golang.org/x/image/font/opentype"
	"gonum.org/v1/plot/font"
	plottext "gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Environment variables of the browser tests.
const (
	// browserEnv: "require" makes a missing browser, Jupyter server or GoNB
	// a failure instead of a skip; "off" skips the browser tests.
	browserEnv = "DRUTO_BROWSER_TESTS"
	// browserLimitEnv is the longest a notebook may run in live Jupyter
	// before the test calls it hung, as a Go duration (default 15m; always
	// less than what is left before the test binary's deadline).
	browserLimitEnv = "DRUTO_BROWSER_LIMIT"
	// chromiumEnv names the browser binary (default: chromium on PATH).
	chromiumEnv = "DRUTO_CHROMIUM"
	// executedEnv names a folder of notebooks executed before (DIR/en and
	// DIR/bn, as DRUTO_NOTEBOOK_OUT keeps them) for TestPublishedHTML to
	// publish when TestExecute did not run: for work on the browser tests.
	executedEnv = "DRUTO_BROWSER_EXECUTED"
	// updateGoldenEnv=1 rewrites the committed figure screenshots instead
	// of comparing with them.
	updateGoldenEnv = "DRUTO_UPDATE_GOLDEN"
)

// installHint is how to get what the browser tests need.
const installHint = "run scripts/install-test-deps.sh (apt-get install chromium jupyter-notebook jupyter-nbconvert, and GoNB)"

// goldenDir holds the committed screenshots of the loss figure of 03-train
// as the exported page shows it, one a language.
const goldenDir = "testdata/browser"

// Golden comparison. Only the figure's text and frame count: its neutral
// (grey to black) ink; the coloured curves follow the training run, which
// may differ a little from machine to machine, and the non-blank check
// covers them. A neutral ink pixel of one image is matched when a pixel
// within matchRadius of it in the other is within matchDelta in every
// channel. The images are cut into tiles of tileSize pixels, and the figure
// passes when no tile has more than maxTileMismatch unmatched pixels: a
// misshaped word (a vowel sign after its consonant, a conjunct broken into
// letters with a visible hasanta, a dotted circle) is a cluster of them,
// while rendering noise is scattered. TestGoldenCompareSensitive and the
// unshaped control in TestPublishedHTML check both sides.
const (
	matchRadius     = 1
	matchDelta      = 80
	tileSize        = 16
	maxTileMismatch = 12
)

// browserDeps finds what the browser tests need, or skips (fails under
// require) saying what is missing and how to install it.
func browserDeps(t *testing.T, needServer bool) (chromium, jupyter string) {
	t.Helper()
	mode := os.Getenv(browserEnv)
	if mode == "off" {
		t.Skipf("%s=off", browserEnv) // skip: an opt-out (=off)
	}
	missing := func(what string) {
		t.Helper()
		msg := what + "; " + installHint + " and put $(go env GOPATH)/bin on PATH"
		if mode == "require" {
			t.Fatalf("%s=require: %s", browserEnv, msg)
		}
		t.Skipf("%s (set %s=require to make this a failure)", msg, browserEnv) // require: DRUTO_BROWSER_TESTS
	}
	chromium, err := findChromium()
	if err != nil {
		missing(err.Error())
	}
	jupyter, why := tools()
	if why != "" {
		missing(why)
	}
	if needServer {
		if err := exec.Command(jupyter, "notebook", "--version").Run(); err != nil {
			missing("the Jupyter Notebook server is not installed (jupyter notebook --version: " + err.Error() + ")")
		}
	}
	if testing.Short() && mode != "require" {
		t.Skip("-short: not running the browser tests") // skip: -short
	}
	return chromium, jupyter
}

func findChromium() (string, error) {
	if p := os.Getenv(chromiumEnv); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no chromium on PATH (or set " + chromiumEnv + ")")
}

// artifacts returns a folder for the test's screenshots and logs. It is
// removed when the test passes and kept, with its path logged, when it
// fails, so that the files an error names can be looked at.
func artifacts(t *testing.T) string {
	t.Helper()
	name := regexp.MustCompile(`[^A-Za-z0-9_-]+`).ReplaceAllString(t.Name(), "_")
	dir, err := os.MkdirTemp("", "druto-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("screenshots and logs kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}

// newBrowser starts headless Chromium and returns a context for its tab;
// the browser stops at the test's end.
func newBrowser(t *testing.T, chromium string) context.Context {
	t.Helper()
	ctx, stop, err := startBrowser(chromium)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return ctx
}

// startBrowser starts headless Chromium. A browser that does not start is
// an error of one line that names it and how to install it.
func startBrowser(chromium string) (context.Context, func(), error) {
	var log syncBuffer
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox, // root in CI and containers
		chromedp.WindowSize(1280, 1024),
		chromedp.Flag("hide-scrollbars", true),
		// Pages load no remote scripts (MathJax, require.js from a CDN):
		// the tests are hermetic and need no network.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
		chromedp.CombinedOutput(&log),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	stop := func() { cancel(); cancelAlloc() }
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	var err error
	select {
	case err = <-started:
	case <-time.After(2 * time.Minute):
		err = errors.New("no answer within 2 minutes")
	}
	if err != nil {
		stop()
		msg := strings.Join(strings.Fields(err.Error()), " ")
		return nil, nil, fmt.Errorf("browser: %s did not start: %s (%s); %s", chromium, msg, lastLine(log.String()), installHint)
	}
	return ctx, stop, nil
}

// newTab opens a tab of the browser for one notebook; it is closed at the
// test's end without asking the page (the notebook's "leave the page?"
// dialog would block the next navigation in a shared tab).
func newTab(t *testing.T, browser context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	opened := make(chan error, 1)
	go func() { opened <- chromedp.Do(ctx) }() // the tab lives as long as ctx
	select {
	case err := <-opened:
		if err != nil {
			t.Fatalf("browser: opening a tab: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("browser: opening a tab took more than 2 minutes")
	}
	return ctx
}

// run runs a browser action with a timeout.
func run[T any](ctx context.Context, d time.Duration, a chromedp.Action[T]) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return chromedp.Run(ctx, a)
}

// screenshotPage saves what the browser shows (the whole page) to
// dir/name.png and returns the path, or says why it could not.
func screenshotPage(ctx context.Context, dir, name string) string {
	img, err := run(ctx, time.Minute, chromedp.FullScreenshot(100))
	if err != nil {
		return fmt.Sprintf("(no screenshot: %v)", err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, img, 0o644); err != nil {
		return fmt.Sprintf("(no screenshot: %v)", err)
	}
	return path
}

// figure is an image a page shows.
type figure struct {
	Index  int    `json:"index"`
	Kind   string `json:"kind"` // img, svg or box (an image output with neither)
	Mime   string `json:"mime"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
	Loaded bool   `json:"loaded"` // an img that decoded
}

// findFigures marks every image in the page's outputs (data-druto-fig=N)
// and describes them. root is a CSS selector of the outputs to search.
const findFiguresJS = `(() => {
	const outs = [...document.querySelectorAll(%q)];
	const figs = [];
	for (const o of outs) {
		const mime = o.getAttribute('data-mime-type') || '';
		let els = [...o.querySelectorAll('img, svg')].filter(e => !e.parentElement.closest('svg'));
		if (els.length === 0 && mime.startsWith('image/')) els = [o];
		for (const e of els) {
			const i = figs.length;
			e.setAttribute('data-druto-fig', String(i));
			e.scrollIntoView({block: 'center'});
			const r = e.getBoundingClientRect();
			const tag = e.tagName.toLowerCase();
			figs.push({index: i, kind: tag === 'img' || tag === 'svg' ? tag : 'box', mime: mime,
				width: Math.round(r.width), height: Math.round(r.height),
				loaded: tag === 'img' ? (e.complete && e.naturalWidth > 0) : true});
		}
	}
	return figs;
})()`

// shootFigure returns a screenshot of figure i, decoded. The figure is
// scrolled into view first: Jupyter Notebook scrolls its cells inside a
// container (#site), not the window, so the screenshot's own scrolling
// leaves a figure that findFiguresJS scrolled past (another figure below
// it) outside the viewport, and the clip shows the page's grey instead.
func shootFigure(ctx context.Context, i int) (image.Image, []byte, error) {
	sel := fmt.Sprintf(`[data-druto-fig="%d"]`, i)
	if _, err := run(ctx, time.Minute, chromedp.Evaluate[bool](fmt.Sprintf(
		`(() => { const e = document.querySelector(%q); if (e) e.scrollIntoView({block: 'center'}); return !!e; })()`, sel))); err != nil {
		return nil, nil, err
	}
	raw, err := run(ctx, time.Minute, chromedp.Screenshot(chromedp.CSS(sel)))
	if err != nil {
		return nil, nil, err
	}
	img, err := png.Decode(bytes.NewReader(raw))
	return img, raw, err
}

// ink is the share of an image's pixels that differ from its background
// (its most common colour) by more than a faint anti-aliasing edge.
func ink(img image.Image) float64 {
	b := img.Bounds()
	if b.Empty() {
		return 0
	}
	counts := map[color.RGBA]int{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			counts[rgba(img, x, y)]++
		}
	}
	var bg color.RGBA
	for c, n := range counts {
		if n > counts[bg] {
			bg = c
		}
	}
	inked := 0
	for c, n := range counts {
		if far(c, bg, 40) {
			inked += n
		}
	}
	return float64(inked) / float64(b.Dx()*b.Dy())
}

// memoryFigure is the index of the memory plot among 04-benchmark's figures
// (speed-up, throughput, memory, ...).
const memoryFigure = 2

// legendBlue is the first colour of plotting's palette: the legend's first
// thumbnail.
var legendBlue = color.RGBA{0x00, 0x72, 0xB2, 0xFF}

// banglaLayout checks a screenshot of a Bangla figure: its top row of
// pixels has no ink (the title stays inside the figure), and, for the
// memory plot, its legend's four rows of text are four bands of ink with
// blank rows between them (rows spaced by the shaped text's real extents).
// It returns what is wrong, or "".
func banglaLayout(img image.Image, legend bool) string {
	b := img.Bounds()
	bg := rgba(img, b.Min.X, b.Min.Y+b.Dy()/2)
	for x := b.Min.X; x < b.Max.X; x++ {
		if c := rgba(img, x, b.Min.Y); far(c, bg, 64) && neutral(c) {
			return fmt.Sprintf("the title inks the top row of pixels at x=%d", x-b.Min.X)
		}
	}
	if !legend {
		return ""
	}
	// The first thumbnail: blue in the upper left quarter (the bars' blue
	// segments are at the bottom).
	tx, ty := -1, -1
	for y := b.Min.Y; y < b.Min.Y+b.Dy()/3 && tx < 0; y++ {
		for x := b.Min.X; x < b.Min.X+b.Dx()/3; x++ {
			if !far(rgba(img, x, y), legendBlue, 40) {
				tx, ty = x, y
				break
			}
		}
	}
	if tx < 0 {
		return "no legend thumbnail in the upper left of the memory plot"
	}
	tw := 0
	for x := tx; x < b.Max.X && !far(rgba(img, x, ty+1), legendBlue, 40); x++ {
		tw++
	}
	// The text column: right of the thumbnails, as wide as the thumbnail
	// column again three times, from above the first row to below the last.
	x0, x1 := tx+tw+tw/4, min(b.Max.X, tx+tw+3*tw)
	y0, y1 := max(b.Min.Y, ty-tw/2), min(b.Max.Y, ty+5*tw)
	text := func(x, y int) bool { c := rgba(img, x, y); return far(c, bg, 64) && neutral(c) }
	// A column inked through most of the range is a line (a bar's edge,
	// a grid line), not text: leave it out.
	var cols []int
	for x := x0; x < x1; x++ {
		n := 0
		for y := y0; y < y1; y++ {
			if text(x, y) {
				n++
			}
		}
		if n < (y1-y0)*3/4 {
			cols = append(cols, x)
		}
	}
	bands, inBand := 0, false
	for y := y0; y < y1; y++ {
		inked := false
		for _, x := range cols {
			if text(x, y) {
				inked = true
				break
			}
		}
		if inked && !inBand {
			bands++
		}
		inBand = inked
	}
	if bands < 4 {
		return fmt.Sprintf("the legend's 4 rows of text make %d separate bands of ink: rows touch", bands)
	}
	return ""
}

// minInk is the least ink a figure must have: druto's plots have axes,
// labels and curves (about 5-10% of their pixels); an empty box has none.
const minInk = 0.01

func rgba(img image.Image, x, y int) color.RGBA {
	r, g, b, _ := img.At(x, y).RGBA()
	return color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), 255}
}

func far(a, b color.RGBA, d int) bool {
	abs := func(x int) int { return max(x, -x) }
	return abs(int(a.R)-int(b.R)) > d || abs(int(a.G)-int(b.G)) > d || abs(int(a.B)-int(b.B)) > d
}

// neutral reports whether c is grey-to-black ink: not near white, and no
// channel far from the others (text and axes, not curves).
func neutral(c color.RGBA) bool {
	lo := min(c.R, c.G, c.B)
	hi := max(c.R, c.G, c.B)
	return lo < 200 && hi-lo < 40
}

// diff is how two screenshots of a figure differ.
type diff struct {
	Unmatched int         // neutral ink pixels of either image unmatched in the other
	Ink       int         // neutral ink pixels of both
	Worst     int         // unmatched pixels in the worst tile
	At        image.Point // that tile's top-left corner
	SizeA     image.Point
	SizeB     image.Point
}

func (d diff) ok() bool { return d.SizeA == d.SizeB && d.Worst <= maxTileMismatch }

func (d diff) String() string {
	if d.SizeA != d.SizeB {
		return fmt.Sprintf("sizes differ: %v and %v", d.SizeA, d.SizeB)
	}
	return fmt.Sprintf("%d of %d text pixels unmatched, %d in the worst %dx%d tile (at %v; limit %d)",
		d.Unmatched, d.Ink, d.Worst, tileSize, tileSize, d.At, maxTileMismatch)
}

// compare compares two screenshots of a figure (see maxTileMismatch).
func compare(a, b image.Image) diff {
	d := diff{SizeA: a.Bounds().Size(), SizeB: b.Bounds().Size()}
	if d.SizeA != d.SizeB {
		return d
	}
	w, h := d.SizeA.X, d.SizeA.Y
	tiles := map[image.Point]int{}
	for _, p := range [][2]image.Image{{a, b}, {b, a}} {
		x0, y0 := p[0].Bounds().Min.X, p[0].Bounds().Min.Y
		u0, v0 := p[1].Bounds().Min.X, p[1].Bounds().Min.Y
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				c := rgba(p[0], x0+x, y0+y)
				if !neutral(c) {
					continue
				}
				d.Ink++
				found := false
				for dy := -matchRadius; dy <= matchRadius && !found; dy++ {
					for dx := -matchRadius; dx <= matchRadius && !found; dx++ {
						u, v := x+dx, y+dy
						if u >= 0 && v >= 0 && u < w && v < h && !far(c, rgba(p[1], u0+u, v0+v), matchDelta) {
							found = true
						}
					}
				}
				if !found {
					d.Unmatched++
					tiles[image.Pt(x/tileSize*tileSize, y/tileSize*tileSize)]++
				}
			}
		}
	}
	for at, n := range tiles {
		if n > d.Worst {
			d.Worst, d.At = n, at
		}
	}
	return d
}

// compareGolden compares a figure's screenshot with the committed one (or
// rewrites it under DRUTO_UPDATE_GOLDEN=1). On a mismatch it saves the
// screenshot in dir and names it in the error.
func compareGolden(t *testing.T, got image.Image, raw []byte, name, dir string) {
	t.Helper()
	path := filepath.Join(goldenDir, name+".png")
	if os.Getenv(updateGoldenEnv) == "1" {
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s=1: wrote %s", updateGoldenEnv, path)
		return
	}
	want, err := readPNG(path)
	if err != nil {
		t.Fatalf("%v (run with %s=1 to write it)", err, updateGoldenEnv)
	}
	d := compare(got, want)
	t.Logf("%s against %s: %v", name, path, d)
	if !d.ok() {
		saved := filepath.Join(dir, name+".png")
		if err := os.WriteFile(saved, raw, 0o644); err != nil {
			saved = fmt.Sprintf("(not saved: %v)", err)
		}
		t.Errorf("%s: the figure differs from %s: %v: screenshot %s", name, path, d, saved)
	}
}

func readPNG(path string) (image.Image, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return img, nil
}

// imageOutputs counts the image outputs of an executed notebook.
func imageOutputs(nb notebook) int {
	n := 0
	for _, c := range codeCells(nb) {
		n += images(c)
	}
	return n
}

// TestPublishedHTML publishes every notebook with
// scripts/publish-notebooks.sh and looks at each page in Chromium: it has
// as many figures as the notebook has image outputs, every figure has ink,
// and the loss figure of 03-train matches the committed screenshot of each
// language. The index page links every page.
func TestPublishedHTML(t *testing.T) {
	chromium, jupyter := browserDeps(t, false)
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := artifacts(t)
	site := filepath.Join(t.TempDir(), "site")
	args := []string{site}
	if root, ok := executedAll(); ok {
		args = []string{"--executed", root, site}
		t.Logf("publishing the notebooks TestExecute executed in %s", root)
	} else if root := os.Getenv(executedEnv); root != "" {
		args = []string{"--executed", root, site}
		t.Logf("%s: publishing the notebooks executed in %s", executedEnv, root)
	} else {
		t.Log("TestExecute did not execute every notebook in this run: the script executes them")
	}
	// The script executes notebooks when TestExecute did not: stop it (and
	// the kernels it started) a minute before the test binary's deadline.
	sctx, cancel := context.WithCancel(context.Background())
	if dl, ok := t.Deadline(); ok {
		sctx, cancel = context.WithDeadline(context.Background(), dl.Add(-time.Minute))
	}
	defer cancel()
	cmd := exec.CommandContext(sctx, filepath.Join(repo, "scripts", "publish-notebooks.sh"), args...)
	cmd.Env = kernelEnv(t, repo, filepath.Join(dir, "runs"))
	cmd.Env = append(cmd.Env, "PATH="+filepath.Dir(jupyter)+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { killTree(cmd.Process.Pid); return nil }
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/publish-notebooks.sh %s: %v\n%s", strings.Join(args, " "), err, tail(string(out), 4000))
	}
	t.Logf("published in %.1fs", time.Since(start).Seconds())

	index, err := os.ReadFile(filepath.Join(site, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, lang := range langs {
		for _, name := range names {
			href := fmt.Sprintf(`href="%s/%s.html"`, lang, name)
			if !bytes.Contains(index, []byte(href)) {
				t.Errorf("index.html has no link %s", href)
			}
		}
	}

	ctx := newBrowser(t, chromium)
	if _, err := run(ctx, time.Minute, chromedp.EmulateViewport(1280, 1024)); err != nil {
		t.Fatal(err)
	}
	for _, lang := range langs {
		for _, name := range names {
			page := filepath.Join(site, lang, name+".html")
			nb := readNotebook(t, filepath.Join(site, lang, name+".ipynb"))
			want := imageOutputs(nb)
			if _, err := run(ctx, 2*time.Minute, chromedp.Navigate("file://"+page)); err != nil {
				t.Errorf("%s/%s: opening %s: %v", lang, name, page, err)
				continue
			}
			figs, err := run(ctx, time.Minute, chromedp.Evaluate[[]figure](fmt.Sprintf(findFiguresJS, ".jp-OutputArea-output")))
			if err != nil {
				t.Errorf("%s/%s: finding figures: %v", lang, name, err)
				continue
			}
			if len(figs) != want {
				t.Errorf("%s/%s: the page shows %d figures, the notebook has %d image outputs: page screenshot %s",
					lang, name, len(figs), want, screenshotPage(ctx, dir, lang+"-"+name))
			}
			for _, f := range figs {
				where := fmt.Sprintf("%s/%s figure %d (%s %s, %dx%d)", lang, name, f.Index+1, f.Kind, f.Mime, f.Width, f.Height)
				img, raw, err := shootFigure(ctx, f.Index)
				if err != nil {
					t.Errorf("%s: screenshot: %v", where, err)
					continue
				}
				shot := filepath.Join(dir, fmt.Sprintf("%s-%s-fig%d.png", lang, name, f.Index+1))
				if in := ink(img); !f.Loaded || f.Width < 100 || f.Height < 100 || in < minInk {
					os.WriteFile(shot, raw, 0o644)
					t.Errorf("%s is blank (loaded %v, %.2f%% ink, want at least %.0f%%): screenshot %s",
						where, f.Loaded, 100*in, 100*minInk, shot)
				}
				if name == "03-train" && f.Index == 0 {
					compareGolden(t, img, raw, "loss_"+lang, dir)
				}
				if lang == "bn" && f.Kind == "img" {
					if msg := banglaLayout(img, name == "04-benchmark" && f.Index == memoryFigure); msg != "" {
						os.WriteFile(shot, raw, 0o644)
						t.Errorf("%s: %s: screenshot %s", where, msg, shot)
					}
				}
			}
			if want > 0 {
				t.Logf("%s/%s: %d figures drawn", lang, name, len(figs))
			}
		}
	}
	metrics := filepath.Join(site, "bn", "runs", "03-train", "metrics.jsonl")
	if len(args) == 3 {
		metrics = filepath.Join(args[1], "bn", "runs", "03-train", "metrics.jsonl")
	}
	if os.Getenv(updateGoldenEnv) != "1" {
		unshapedControl(t, ctx, metrics, dir)
	}
}

// unshapedControl draws the Bangla loss figure again from the run's
// metrics as the notebook does, once with plotting's shaped text and once
// with gonum's own text drawing (rune after rune, unshaped, as gonum draws
// Bengali) in the same font, shows each as Show does (a 2x PNG at 576x384
// CSS pixels) and compares both with the committed screenshot: the first
// must match and the second must not.
func unshapedControl(t *testing.T, ctx context.Context, metrics, dir string) {
	t.Helper()
	run1, err := plotting.ReadMetrics(metrics, plotting.RunLabel("tiny, fused"))
	if err != nil {
		t.Fatalf("the unshaped control needs the Bangla run's metrics: %v", err)
	}
	want, err := readPNG(filepath.Join(goldenDir, "loss_bn.png"))
	if err != nil {
		t.Fatal(err)
	}
	fontPath, err := plotting.FindFont()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(fontPath)
	if err != nil {
		t.Fatal(err)
	}
	otf, err := opentype.Parse(raw)
	if err != nil {
		t.Fatalf("%s: %v", fontPath, err)
	}
	// Every text of the plot falls back to the one typeface of the cache,
	// whatever its variant (gonum asks for Liberation Sans).
	var coll font.Collection
	for _, v := range []font.Variant{"", "Sans", "Serif", "Mono"} {
		coll = append(coll, font.Face{Font: font.Font{Typeface: "Bengali", Variant: v}, Face: otf})
	}
	unshaped := plottext.Plain{Fonts: font.NewCache(coll)}
	for _, shaped := range []bool{true, false} {
		p, err := plotting.LossCurves([]plotting.Run{run1}, nbui.PlotOptions("bn")...) // as notebook 03 draws it
		if err != nil {
			t.Fatal(err)
		}
		name := "control-shaped"
		if !shaped {
			plotting.ApplyTextHandler(p, unshaped)
			name = "control-unshaped"
		}
		c := vgimg.NewWith(vgimg.UseWH(plotting.DefaultWidth, plotting.DefaultHeight), vgimg.UseDPI(plotting.ShowScale*vgimg.DefaultDPI))
		p.Draw(draw.New(c))
		var img bytes.Buffer
		if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(&img); err != nil {
			t.Fatal(err)
		}
		page := filepath.Join(dir, name+".html")
		html := fmt.Sprintf(`<!DOCTYPE html><html><body style="margin:8px"><img src="data:image/png;base64,%s" width="576" height="384"></body></html>`,
			base64.StdEncoding.EncodeToString(img.Bytes()))
		if err := os.WriteFile(page, []byte(html), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := run(ctx, time.Minute, chromedp.Navigate("file://"+page)); err != nil {
			t.Fatal(err)
		}
		figs, err := run(ctx, time.Minute, chromedp.Evaluate[[]figure](fmt.Sprintf(findFiguresJS, "body")))
		if err != nil || len(figs) != 1 {
			t.Fatalf("%s: %d figures, %v", name, len(figs), err)
		}
		got, shot, err := shootFigure(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		d := compare(got, want)
		t.Logf("%s against the golden: %v", name, d)
		if d.ok() != shaped {
			p := filepath.Join(dir, name+".png")
			os.WriteFile(p, shot, 0o644)
			if shaped {
				t.Errorf("the Bangla figure drawn again from the run's metrics differs from the golden (%v): screenshot %s", d, p)
			} else {
				t.Errorf("the Bangla figure with unshaped text matches the golden (%v): the comparison would miss Bangla shaped wrong: screenshot %s", d, p)
			}
		}
	}
}

// TestGoldenCompareSensitive checks that the golden comparison tells a
// figure from the same figure gone wrong: each committed screenshot matches
// itself moved by a pixel, but not with its title moved by a few pixels (as
// a vowel sign drawn after its consonant would be), and the two languages
// do not match each other.
func TestGoldenCompareSensitive(t *testing.T) {
	imgs := map[string]image.Image{}
	for _, lang := range langs {
		img, err := readPNG(filepath.Join(goldenDir, "loss_"+lang+".png"))
		if err != nil {
			t.Fatal(err)
		}
		imgs[lang] = img
		if in := ink(img); in < minInk {
			t.Errorf("%s golden has %.2f%% ink", lang, 100*in)
		}
		b := img.Bounds()
		if d := compare(img, img); d.Unmatched != 0 || d.Ink < 1000 {
			t.Errorf("%s against itself: %v", lang, d)
		}
		if d := compare(img, shifted(img, 1, b.Dy())); !d.ok() {
			t.Errorf("%s against itself moved by a pixel: %v; the comparison is too strict", lang, d)
		}
		for _, dx := range []int{3, 6} {
			// The title band: the top 6% of the figure.
			d := compare(img, shifted(img, dx, b.Dy()*6/100))
			t.Logf("%s: title moved by %d px: %v", lang, dx, d)
			if d.ok() {
				t.Errorf("%s: a title moved by %d pixels passes (%v): the comparison would miss Bangla shaped wrong", lang, dx, d)
			}
		}
	}
	if d := compare(imgs["en"], imgs["bn"]); d.ok() {
		t.Errorf("the en and bn figures match: %v", d)
	}
}

// shifted returns img with its top rows moved right by dx pixels (white
// coming in on the left).
func shifted(img image.Image, dx, rows int) image.Image {
	b := img.Bounds()
	out := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	for y := 0; y < b.Dy(); y++ {
		for x := 0; x < b.Dx(); x++ {
			c := rgba(img, b.Min.X+x, b.Min.Y+y)
			if y < rows {
				if x < dx {
					c = color.RGBA{255, 255, 255, 255}
				} else {
					c = rgba(img, b.Min.X+x-dx, b.Min.Y+y)
				}
			}
			out.Set(x, y, c)
		}
	}
	return out
}

// jupyterServer is a Jupyter Notebook server the test started, in its own
// process group.
type jupyterServer struct {
	cmd   *exec.Cmd
	url   string // http://127.0.0.1:PORT
	token string
	log   *syncBuffer
	done  chan struct{} // closed when the process has exited
	err   error         // its exit error, once done is closed
}

// startJupyter starts `jupyter notebook` serving dir on a free port of
// 127.0.0.1 with a random token, and waits until it answers. The server is
// stopped (with every process it started) when the test ends.
func startJupyter(t *testing.T, jupyter, dir string, env []string, logDir string) (*jupyterServer, error) {
	t.Helper()
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		s, err := launchJupyter(jupyter, dir, env)
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() {
			os.WriteFile(filepath.Join(logDir, "jupyter.log"), []byte(s.log.String()), 0o644)
			if left := s.stop(); len(left) > 0 {
				t.Errorf("jupyter server: processes %v survived the stop", left)
			}
		})
		err = s.waitReady(2 * time.Minute)
		if err == nil {
			return s, nil
		}
		lastErr = err
		// Another process may have taken the port between the probe and
		// the server's bind: try another.
		if !strings.Contains(s.log.String(), "already in use") {
			break
		}
	}
	return nil, fmt.Errorf("jupyter server: %v; %s", lastErr, installHint)
}

func launchJupyter(jupyter, dir string, env []string) (*jupyterServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	token := fmt.Sprintf("%x", time.Now().UnixNano()^int64(os.Getpid())<<20)
	args := []string{"notebook", "--no-browser", "--ip=127.0.0.1", "--port=" + strconv.Itoa(port), "--port-retries=0",
		"--NotebookApp.token=" + token, "--notebook-dir=" + dir}
	if os.Geteuid() == 0 {
		args = append(args, "--allow-root")
	}
	s := &jupyterServer{url: fmt.Sprintf("http://127.0.0.1:%d", port), token: token, log: &syncBuffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(jupyter, args...)
	s.cmd.Dir = dir
	s.cmd.Env = env
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("jupyter server: %s notebook did not start: %v; %s", jupyter, err, installHint)
	}
	go func() { s.err = s.cmd.Wait(); close(s.done) }()
	return s, nil
}

// waitReady polls the server's status API until it answers, the process
// exits or d passes.
func (s *jupyterServer) waitReady(d time.Duration) error {
	deadline := time.Now().Add(d)
	client := &http.Client{Timeout: 10 * time.Second}
	for {
		req, _ := http.NewRequest("GET", s.url+"/api/status", nil)
		req.Header.Set("Authorization", "token "+s.token)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.done:
			return fmt.Errorf("exited (%v) before it answered: %s", s.err, lastLine(s.log.String()))
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("did not answer on %s within %v: %s", s.url, d, lastLine(s.log.String()))
		}
	}
}

// stop stops the server and every process it started, and returns the
// ones still alive afterwards (none, normally). The kernels run in
// sessions of their own, out of the server's process group, so the process
// tree is collected first: SIGTERM lets the server shut its kernels down;
// whatever is left after 20 s is killed.
func (s *jupyterServer) stop() []int {
	if s.cmd.Process == nil {
		return nil
	}
	pid := s.cmd.Process.Pid
	tree := descendants(pid)
	syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
	}
	self := syscall.Getpgrp()
	for round := 0; round < 3; round++ {
		// Processes started while the server stopped are children of ones
		// already in the tree.
		for _, p := range tree {
			tree = appendNew(tree, descendants(p)...)
		}
		syscall.Kill(-pid, syscall.SIGKILL)
		for _, p := range tree {
			if pg, err := syscall.Getpgid(p); err == nil && pg != self && pg != 1 {
				syscall.Kill(-pg, syscall.SIGKILL)
			}
			syscall.Kill(p, syscall.SIGKILL)
		}
		<-s.done
		var alive []int
		for _, p := range tree {
			if running(p) {
				alive = append(alive, p)
			}
		}
		if len(alive) == 0 {
			return nil
		}
		if round == 2 {
			return alive
		}
		// Wait for the kills to land before looking again (a poll, not a
		// guess: the loop ends as soon as nothing is left).
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && anyRunning(alive); {
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// killTree kills pid, its process group and every process below it in the
// process tree (kernels run in sessions of their own), with their process
// groups, and returns the processes it found.
func killTree(pid int) []int {
	tree := append([]int{pid}, descendants(pid)...)
	self := syscall.Getpgrp()
	for _, p := range tree {
		if pg, err := syscall.Getpgid(p); err == nil && pg != self && pg > 1 {
			syscall.Kill(-pg, syscall.SIGKILL)
		}
		syscall.Kill(p, syscall.SIGKILL)
	}
	return tree
}

func appendNew(s []int, v ...int) []int {
	for _, x := range v {
		found := false
		for _, y := range s {
			found = found || x == y
		}
		if !found {
			s = append(s, x)
		}
	}
	return s
}

// procStat returns a process's state letter and parent from /proc.
func procStat(pid int) (state byte, ppid int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 2 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	return f[0][0], ppid, true
}

// running reports whether pid is a live process (not a zombie).
func running(pid int) bool {
	st, _, ok := procStat(pid)
	return ok && st != 'Z' && st != 'X'
}

func anyRunning(pids []int) bool {
	for _, p := range pids {
		if running(p) {
			return true
		}
	}
	return false
}

// descendants returns every process below pid in the process tree.
func descendants(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, pp, ok := procStat(p); ok {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// liveEnv is the environment of the Jupyter server and its kernels: the
// notebook tests' kernel environment, with the runs beside each notebook
// (each language its own) and Jupyter's runtime files in the test's folder.
func liveEnv(t *testing.T, repo, runtimeDir string) []string {
	var env []string
	for _, kv := range kernelEnv(t, repo, "") {
		if strings.HasPrefix(kv, nbui.OutEnv+"=") || strings.HasPrefix(kv, "JUPYTER_RUNTIME_DIR=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "JUPYTER_RUNTIME_DIR="+runtimeDir)
}

// notebookLimit is how long one notebook may run in live Jupyter: the
// DRUTO_BROWSER_LIMIT hang guard, but never closer than 90 s to the test
// binary's deadline, so that a hung notebook fails with a screenshot
// rather than a kill.
func notebookLimit(t *testing.T) time.Duration {
	t.Helper()
	limit := 15 * time.Minute
	if s := os.Getenv(browserLimitEnv); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("%s=%q: %v", browserLimitEnv, s, err)
		}
		limit = d
	}
	if dl, ok := t.Deadline(); ok {
		limit = min(limit, time.Until(dl)-90*time.Second)
	}
	if limit < time.Minute {
		t.Fatalf("only %v left before the test binary's deadline; run with a longer -timeout (scripts/test.sh uses 60m)", limit.Round(time.Second))
	}
	return limit
}

// cellState is what the test reads from the classic notebook page.
type cellState struct {
	Ready   bool     `json:"ready"`   // the notebook and its kernel are up
	Busy    bool     `json:"busy"`    // the kernel indicator shows busy
	Queued  int      `json:"queued"`  // code cells waiting or running (prompt *)
	Done    int      `json:"done"`    // code cells with an execution count
	Cells   int      `json:"cells"`   // code cells
	Errors  []string `json:"errors"`  // error outputs and stderr that reports one
	Outputs string   `json:"outputs"` // all stream text, for the hang test
}

const cellStateJS = `(() => {
	const nb = window.Jupyter && Jupyter.notebook;
	const s = {ready: false, busy: false, queued: 0, done: 0, cells: 0, errors: [], outputs: ''};
	if (!nb || !nb.kernel || !nb.kernel.is_connected()) return s;
	s.ready = !!document.querySelector('#kernel_indicator_icon.kernel_idle_icon, #kernel_indicator_icon.kernel_busy_icon');
	s.busy = !!document.querySelector('#kernel_indicator_icon.kernel_busy_icon');
	nb.get_cells().forEach((c, i) => {
		if (c.cell_type !== 'code') return;
		s.cells++;
		if (c.input_prompt_number === '*') s.queued++;
		if (typeof c.input_prompt_number === 'number') s.done++;
		for (const o of c.output_area.outputs) {
			const text = Array.isArray(o.text) ? o.text.join('') : (o.text || '');
			s.outputs += text;
			if (o.output_type === 'error') s.errors.push('cell ' + (i+1) + ': ' + o.ename + ': ' + o.evalue);
			if (o.output_type === 'stream' && o.name === 'stderr' &&
				(text.includes('panic:') || text.includes('exit status') || text.toLowerCase().includes('error')))
				s.errors.push('cell ' + (i+1) + ' stderr: ' + text.trim().split('\n')[0]);
		}
	});
	return s;
})()`

// openNotebook opens a notebook of the server in the browser and waits
// until its kernel is connected and idle.
func openNotebook(ctx context.Context, s *jupyterServer, rel string, d time.Duration) error {
	url := fmt.Sprintf("%s/notebooks/%s?token=%s", s.url, rel, s.token)
	if _, err := run(ctx, 2*time.Minute, chromedp.Navigate(url)); err != nil {
		return fmt.Errorf("opening %s: %v", rel, err)
	}
	_, err := pollState(ctx, d, func(st cellState) bool { return st.Ready && !st.Busy })
	if err != nil {
		return fmt.Errorf("%s: the kernel did not start: %v", rel, err)
	}
	return nil
}

// pollState reads the page's state every 250 ms until cond holds or d
// passes.
func pollState(ctx context.Context, d time.Duration, cond func(cellState) bool) (cellState, error) {
	deadline := time.Now().Add(d)
	var st cellState
	for {
		var err error
		st, err = run(ctx, time.Minute, chromedp.Evaluate[cellState](cellStateJS))
		if err == nil && cond(st) {
			return st, nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return st, fmt.Errorf("not within %v (last read: %v)", d, err)
			}
			return st, fmt.Errorf("not within %v (last state: %d of %d code cells done, %d queued, kernel busy %v)",
				d, st.Done, st.Cells, st.Queued, st.Busy)
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// runAll clicks Cell > Run All and waits until every code cell has run and
// the kernel is idle, or until limit passes: then it saves a screenshot in
// dir, interrupts the kernel, and returns an error naming the screenshot.
func runAll(ctx context.Context, name, dir string, limit time.Duration) (cellState, error) {
	if _, err := run(ctx, time.Minute, chromedp.Click(chromedp.CSS(`#menus li.dropdown:has(#cell_menu) > a`))); err != nil {
		return cellState{}, fmt.Errorf("%s: opening the Cell menu: %v", name, err)
	}
	if _, err := run(ctx, time.Minute, chromedp.Click(chromedp.CSS(`#run_all_cells > a`))); err != nil {
		return cellState{}, fmt.Errorf("%s: clicking Run All: %v", name, err)
	}
	// Run All marks every code cell queued (*) at once; the run is over
	// when none is queued, at least one ran and the kernel is idle.
	st, err := pollState(ctx, limit, func(st cellState) bool {
		return st.Ready && !st.Busy && st.Queued == 0 && st.Done > 0
	})
	if err != nil {
		shot := screenshotPage(ctx, dir, name+"-hung")
		run(ctx, time.Minute, chromedp.Evaluate[bool](`(Jupyter.notebook.kernel.interrupt(), true)`))
		return st, fmt.Errorf("%s did not finish: %v; stopped, screenshot %s", name, err, shot)
	}
	return st, nil
}

// TestLiveJupyter opens 03-train in English and in Bangla in a Jupyter
// Notebook server, runs all cells from the Cell menu, and checks what the
// page shows: every code cell ran, no error, the progress bar at 100%, and
// the loss figure drawn (an image of the size Show asked for, with ink).
func TestLiveJupyter(t *testing.T) {
	chromium, jupyter := browserDeps(t, true)
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := artifacts(t)
	// The server serves copies: Jupyter saves outputs into the notebooks it
	// opens. Each language keeps its folder name, which sets its language.
	served := t.TempDir()
	const name = "03-train"
	for _, lang := range langs {
		copyFile(t, filepath.Join(lang, name+".ipynb"), filepath.Join(served, lang, name+".ipynb"))
	}
	s, err := startJupyter(t, jupyter, served, liveEnv(t, repo, t.TempDir()), dir)
	if err != nil {
		t.Fatal(err)
	}
	browser := newBrowser(t, chromium)
	for _, lang := range langs {
		t.Run(lang, func(t *testing.T) {
			limit := notebookLimit(t)
			ctx := newTab(t, browser)
			rel := lang + "/" + name + ".ipynb"
			if err := openNotebook(ctx, s, rel, 3*time.Minute); err != nil {
				t.Fatalf("%v: screenshot %s", err, screenshotPage(ctx, dir, lang+"-open"))
			}
			start := time.Now()
			st, err := runAll(ctx, lang+"-"+name, dir, limit)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s/%s ran in live Jupyter in %.1fs", lang, name, time.Since(start).Seconds())
			shot := func() string { return screenshotPage(ctx, dir, lang+"-"+name) }
			if st.Done != st.Cells {
				t.Errorf("%d of %d code cells ran: screenshot %s", st.Done, st.Cells, shot())
			}
			if len(st.Errors) > 0 {
				t.Errorf("errors shown: %s: screenshot %s", strings.Join(st.Errors, "; "), shot())
			}
			bar, err := run(ctx, time.Minute, chromedp.Evaluate[struct {
				N     int     `json:"n"`
				Value float64 `json:"value"`
				Max   float64 `json:"max"`
				Text  string  `json:"text"`
			}](`(() => { const b = document.querySelectorAll('.druto-progress progress');
				const l = b[b.length-1];
				return {n: b.length, value: l ? l.value : 0, max: l ? l.max : 0,
					text: l ? l.closest('.druto-progress').textContent : ''}; })()`))
			switch {
			case err != nil:
				t.Errorf("reading the progress bar: %v", err)
			case bar.N != 1 || bar.Max == 0 || bar.Value != bar.Max || !strings.Contains(bar.Text, "100%") && !strings.Contains(bar.Text, "১০০%"):
				t.Errorf("progress display: %d bars, the last at %v of %v (%q), want one bar at 100%%: screenshot %s",
					bar.N, bar.Value, bar.Max, firstLine(bar.Text), shot())
			}
			figs, err := run(ctx, time.Minute, chromedp.Evaluate[[]figure](fmt.Sprintf(findFiguresJS,
				`.cell.code_cell:has(.output_png, .output_svg) .output_subarea`)))
			if err != nil {
				t.Fatalf("finding the figure: %v", err)
			}
			if len(figs) < 1 {
				t.Fatalf("%d figures in the notebook, want the loss curve first: screenshot %s", len(figs), shot())
			}
			f := figs[0] // the loss curve (the generation figure comes after it)
			img, raw, err := shootFigure(ctx, f.Index)
			if err != nil {
				t.Fatalf("screenshot of the figure: %v", err)
			}
			in := ink(img)
			t.Logf("loss figure: %s %dx%d, %.1f%% ink", f.Kind, f.Width, f.Height, 100*in)
			// Show draws 6 x 4 inches: 576 x 384 CSS pixels.
			if f.Kind != "img" || !f.Loaded || f.Width != 576 || f.Height != 384 || in < minInk {
				p := filepath.Join(dir, lang+"-loss.png")
				os.WriteFile(p, raw, 0o644)
				t.Errorf("loss figure: %s %dx%d (want an img of 576x384), loaded %v, %.2f%% ink (want >= %.0f%%): screenshot %s",
					f.Kind, f.Width, f.Height, f.Loaded, 100*in, 100*minInk, p)
			}
			// Free the CPU for the next notebook.
			run(ctx, time.Minute, chromedp.Evaluate[bool](`(Jupyter.notebook.session.delete(), true)`))
		})
	}
}

// TestLiveJupyterHang runs a notebook whose cell never ends: runAll must
// give up at its limit with a screenshot, and stopping the server must end
// the cell's program, the kernel and the server.
func TestLiveJupyterHang(t *testing.T) {
	chromium, jupyter := browserDeps(t, true)
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := artifacts(t)
	served := t.TempDir()
	hang := `{"cells": [{"cell_type": "code", "execution_count": null, "id": "hang", "metadata": {}, "outputs": [],
  "source": "import (\n\t\"fmt\"\n\t\"os\"\n\t\"time\"\n)\n\n%%\nfmt.Printf(\"hung program pid %d\\n\", os.Getpid())\nos.Stdout.Sync()\nfor {\n\ttime.Sleep(time.Hour)\n}"}],
 "metadata": {"kernelspec": {"display_name": "Go (gonb)", "language": "go", "name": "gonb"}},
 "nbformat": 4, "nbformat_minor": 5}`
	if err := os.WriteFile(filepath.Join(served, "hang.ipynb"), []byte(hang), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := startJupyter(t, jupyter, served, liveEnv(t, repo, t.TempDir()), dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := newBrowser(t, chromium)
	if err := openNotebook(ctx, s, "hang.ipynb", 3*time.Minute); err != nil {
		t.Fatalf("%v: screenshot %s", err, screenshotPage(ctx, dir, "hang-open"))
	}
	// The hang guard here is short; the program must have started first
	// (GoNB compiles the cell), so wait for its pid in the output.
	if _, err := run(ctx, time.Minute, chromedp.Click(chromedp.CSS(`#menus li.dropdown:has(#cell_menu) > a`))); err != nil {
		t.Fatal(err)
	}
	if _, err := run(ctx, time.Minute, chromedp.Click(chromedp.CSS(`#run_all_cells > a`))); err != nil {
		t.Fatal(err)
	}
	pidRE := regexp.MustCompile(`hung program pid (\d+)`)
	st, err := pollState(ctx, 5*time.Minute, func(st cellState) bool { return pidRE.MatchString(st.Outputs) })
	if err != nil {
		t.Fatalf("the hanging cell never printed its pid: %v: screenshot %s", err, screenshotPage(ctx, dir, "hang-start"))
	}
	pid, _ := strconv.Atoi(pidRE.FindStringSubmatch(st.Outputs)[1])
	if !running(pid) {
		t.Fatalf("the hanging cell's program (pid %d) is not running", pid)
	}
	// runAll's own Run All click is a no-op for a cell already running: it
	// is queued behind it, so the notebook stays unfinished.
	_, err = runAll(ctx, "hang", dir, 3*time.Second)
	if err == nil {
		t.Fatal("runAll returned no error for a cell that never ends")
	}
	t.Logf("runAll: %v", err)
	m := regexp.MustCompile(`screenshot (\S+\.png)`).FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("the hang error names no screenshot: %v", err)
	}
	if img, err := readPNG(m[1]); err != nil || img.Bounds().Dx() < 100 {
		t.Errorf("the hang screenshot %s is not an image of the page: %v", m[1], err)
	}
	server := s.cmd.Process.Pid
	if left := s.stop(); len(left) > 0 {
		t.Errorf("processes %v survived stopping the server", left)
	}
	for _, p := range []int{server, pid} {
		if running(p) {
			t.Errorf("process %d is still running after the server was stopped", p)
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestStartFailures checks the one-line errors of a browser and a Jupyter
// server that do not start.
func TestStartFailures(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-binary")
	_, err := launchJupyter(missing, t.TempDir(), os.Environ())
	t.Logf("missing Jupyter: %v", err)
	if err == nil ||
		!strings.Contains(err.Error(), "jupyter server") || !strings.Contains(err.Error(), "install-test-deps.sh") || strings.Contains(err.Error(), "\n") {
		t.Errorf("a missing Jupyter: %v, want one line naming the Jupyter server and how to install it", err)
	}
	// A "jupyter" that exits at once.
	fake := filepath.Join(t.TempDir(), "jupyter")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'No module named notebook' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := launchJupyter(fake, t.TempDir(), os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	err = s.waitReady(time.Minute)
	s.stop()
	t.Logf("Jupyter that exits: %v", err)
	if err == nil || !strings.Contains(err.Error(), "No module named notebook") || strings.Contains(err.Error(), "\n") {
		t.Errorf("a Jupyter that exits: %v, want one line with its last message", err)
	}
	_, _, err = startBrowser(missing)
	t.Logf("missing browser: %v", err)
	if err == nil ||
		!strings.HasPrefix(err.Error(), "browser: ") || !strings.Contains(err.Error(), "install-test-deps.sh") || strings.Contains(err.Error(), "\n") {
		t.Errorf("a missing browser: %v, want one line naming the browser and how to install it", err)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes and reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// lastLine is the last non-empty line of a log.
func lastLine(s string) string {
	var last string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			last = l
		}
	}
	if last == "" {
		return "no output"
	}
	return last
}

// htmlLab is the lab whose solved notebooks TestLabHTML exports: its
// checks show feedback and its last cell a figure (the loss scale).
const htmlLab = "03-adamw"

// labsKept records where TestLabs kept the notebooks it executed
// (lab.GradeOptions.Keep, with the graded folder's layout: solution/LANG/NAME.ipynb),
// when every solution passed, for TestLabHTML to export.
var labsKept struct {
	sync.Mutex
	dir string
}

// TestLabHTML exports the solved lab htmlLab of each language to HTML with
// nbconvert, as an instructor publishes a worked lab, and looks at each page
// in Chromium: every check's feedback paragraph and score line are on the
// page, visible, in the notebook's language, and every figure has ink (and,
// in Bangla, its title inside the figure). It uses the notebooks TestLabs
// executed, else executes the two itself through lab.Grade.
func TestLabHTML(t *testing.T) {
	chromium, jupyter := browserDeps(t, false)
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := artifacts(t)
	labsKept.Lock()
	kept := labsKept.dir
	labsKept.Unlock()
	if kept == "" {
		src := filepath.Join(t.TempDir(), "labs")
		for _, lang := range langs {
			b, err := os.ReadFile(filepath.Join("labs", lang, htmlLab+".ipynb"))
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(src, "solution", lang, htmlLab+".ipynb"), b)
		}
		kept = filepath.Join(t.TempDir(), "kept")
		rows, err := lab.Grade(src, lab.GradeOptions{Jupyter: jupyter, Env: kernelEnv(t, repo, t.TempDir()),
			Cell: 3 * time.Minute, Limit: 8 * time.Minute, Jobs: 2, Keep: kept})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.Status != "ok" || r.Passed != r.Exercises {
				t.Fatalf("%s: %d of %d exercises, %s", r.Notebook, r.Passed, r.Exercises, r.Status)
			}
		}
		t.Logf("TestLabs did not keep its notebooks in this run: executed the two solutions of %s", htmlLab)
	}
	ctx := newBrowser(t, chromium)
	if _, err := run(ctx, time.Minute, chromedp.EmulateViewport(1280, 1024)); err != nil {
		t.Fatal(err)
	}
	for _, lang := range langs {
		executed := filepath.Join(kept, "solution", lang, htmlLab+".ipynb")
		site := filepath.Join(t.TempDir(), lang)
		cmd := exec.Command(jupyter, "nbconvert", "--to", "html", "--log-level=WARN", "--output-dir", site, executed)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("nbconvert --to html %s: %v\n%s", executed, err, tail(string(out), 3000))
		}
		nb := readNotebook(t, executed)
		var results []lab.Result
		for _, c := range codeCells(nb) {
			for _, o := range c.Outputs {
				if raw, ok := o.Data[lab.MIME]; ok {
					var str string
					if json.Unmarshal(raw, &str) == nil {
						raw = json.RawMessage(str) // GoNB sends the record as a string
					}
					var r lab.Result
					if err := json.Unmarshal(raw, &r); err != nil {
						t.Fatalf("%s: a lab record that is not JSON: %v", lang, err)
					}
					results = append(results, r)
				}
			}
		}
		if len(results) == 0 {
			t.Fatalf("%s/%s: the executed notebook holds no lab record", lang, htmlLab)
		}
		page := filepath.Join(site, htmlLab+".html")
		if _, err := run(ctx, 2*time.Minute, chromedp.Navigate("file://"+page)); err != nil {
			t.Fatalf("%s: opening %s: %v", lang, page, err)
		}
		text, err := run(ctx, time.Minute, chromedp.Evaluate[string](`document.body.innerText`))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range results {
			for _, want := range []string{r.Feedback, lab.ScoreLine(lang, r)} {
				if !r.Passed || !strings.Contains(text, want) {
					t.Errorf("%s/%s: the page does not show %q (passed %v): page screenshot %s",
						lang, htmlLab, want, r.Passed, screenshotPage(ctx, dir, lang+"-"+htmlLab))
				}
			}
			if (lang == "bn") != hasBengali(r.Feedback) {
				t.Errorf("%s/%s: feedback not in the notebook's language: %q", lang, htmlLab, r.Feedback)
			}
		}
		want := imageOutputs(nb)
		figs, err := run(ctx, time.Minute, chromedp.Evaluate[[]figure](fmt.Sprintf(findFiguresJS, ".jp-OutputArea-output")))
		if err != nil {
			t.Fatal(err)
		}
		if want == 0 || len(figs) != want {
			t.Errorf("%s/%s: the page shows %d figures, the notebook has %d image outputs (want at least one): page screenshot %s",
				lang, htmlLab, len(figs), want, screenshotPage(ctx, dir, lang+"-"+htmlLab))
		}
		for _, f := range figs {
			img, raw, err := shootFigure(ctx, f.Index)
			if err != nil {
				t.Fatalf("%s figure %d: %v", lang, f.Index+1, err)
			}
			shot := filepath.Join(dir, fmt.Sprintf("lab-%s-%s-fig%d.png", lang, htmlLab, f.Index+1))
			if in := ink(img); !f.Loaded || f.Width < 100 || f.Height < 100 || in < minInk {
				os.WriteFile(shot, raw, 0o644)
				t.Errorf("%s/%s figure %d is blank (loaded %v, %dx%d, %.2f%% ink): screenshot %s", lang, htmlLab, f.Index+1, f.Loaded, f.Width, f.Height, 100*in, shot)
			}
			if lang == "bn" {
				if msg := banglaLayout(img, false); msg != "" {
					os.WriteFile(shot, raw, 0o644)
					t.Errorf("bn/%s figure %d: %s: screenshot %s", htmlLab, f.Index+1, msg, shot)
				}
			}
		}
		t.Logf("%s/%s: %d checks' feedback and %d figures shown", lang, htmlLab, len(results), len(figs))
	}
}
