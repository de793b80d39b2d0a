package plotting

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-text/typesetting/di"
	"github.com/go-text/typesetting/language"
	"github.com/go-text/typesetting/shaping"
	"golang.org/x/image/math/fixed"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/vgimg"
)

// testHandler returns a TextHandler on the system Bengali font.
func testHandler(t *testing.T) *TextHandler {
	t.Helper()
	path := needFont(t)
	h, err := NewTextHandler(path)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestShapeGlyphSequence checks that HarfBuzz shaping through the handler
// forms the conjuncts and puts the pre-base vowel signs first.
func TestShapeGlyphSequence(t *testing.T) {
	h := testHandler(t)
	t.Logf("font: %s", h.FontPath())
	nominal := func(r rune) int {
		g, ok := h.face.NominalGlyph(r)
		if !ok {
			t.Fatalf("font has no glyph for %q", r)
		}
		return int(g)
	}

	title := []rune("প্রশিক্ষণের ক্ষতি")
	if len(title) != 17 {
		t.Fatalf("title has %d runes, want 17", len(title))
	}
	if runs := h.itemize(title); len(runs) != 1 || !runs[0].bengali || runs[0].end != 17 {
		t.Fatalf("itemize = %+v, want one Bengali run of 17 runes", runs)
	}
	h.mu.Lock()
	gs := h.shapeRun(title, 0, len(title))
	h.mu.Unlock()
	for i, g := range gs {
		t.Logf("glyph %2d: id %3d cluster %2d (%d runes) advance %4.0f", i, g.id, g.cluster, g.clusterRunes, g.adv)
	}
	if len(gs) != 11 {
		t.Fatalf("%d glyphs, want 11", len(gs))
	}
	// Runes: প0 ্1 র2 শ3 ি4 ক5 ্6 ষ7 ণ8 ে9 র10 ' '11 ক12 ্13 ষ14 ত15 ি16.
	conj := -1 // a glyph that is no single rune's glyph, covering a 3-rune cluster
	want := []struct {
		id, cluster, runes int
	}{
		{conj, 0, 3},          // প্র
		{nominal('ি'), 3, 2},  // ি before শ
		{nominal('শ'), 3, 2},  //
		{conj, 5, 3},          // ক্ষ
		{nominal('ে'), 8, 2},  // ে before ণ
		{nominal('ণ'), 8, 2},  //
		{nominal('র'), 10, 1}, //
		{nominal(' '), 11, 1}, //
		{conj, 12, 3},         // ক্ষ
		{nominal('ি'), 15, 2}, // ি before ত
		{nominal('ত'), 15, 2}, //
	}
	for i, w := range want {
		g := gs[i]
		if g.cluster != w.cluster || g.clusterRunes != w.runes {
			t.Errorf("glyph %d: cluster %d of %d runes, want %d of %d", i, g.cluster, g.clusterRunes, w.cluster, w.runes)
		}
		if w.id != conj {
			if int(g.id) != w.id {
				t.Errorf("glyph %d: id %d, want %d (%q)", i, g.id, w.id, title[w.cluster:w.cluster+w.runes])
			}
			continue
		}
		for _, r := range title[w.cluster : w.cluster+w.runes] {
			if int(g.id) == nominal(r) {
				t.Errorf("glyph %d: id %d is the plain glyph of %q, want a conjunct", i, g.id, r)
			}
		}
	}
	if gs[3].id != gs[8].id {
		t.Errorf("the two ক্ষ conjuncts differ: %d and %d", gs[3].id, gs[8].id)
	}
	// Pre-base order, through cluster indices: in each cluster holding a
	// consonant and ি/ে, the vowel sign's glyph comes first although its rune
	// comes after the consonant's.
	for _, c := range []struct {
		cons, sign rune
		cluster    int
	}{{'শ', 'ি', 3}, {'ণ', 'ে', 8}, {'ত', 'ি', 15}} {
		is, ic := -1, -1
		for i, g := range gs {
			if g.cluster != c.cluster {
				continue
			}
			switch int(g.id) {
			case nominal(c.sign):
				is = i
			case nominal(c.cons):
				ic = i
			}
		}
		if is < 0 || ic < 0 || is > ic {
			t.Errorf("cluster %d: %q glyph at %d, %q glyph at %d; want the sign first", c.cluster, c.sign, is, c.cons, ic)
		}
	}

	step := []rune("ধাপ")
	h.mu.Lock()
	gs = h.shapeRun(step, 0, len(step))
	h.mu.Unlock()
	if len(gs) != 3 {
		t.Fatalf("ধাপ: %d glyphs, want 3", len(gs))
	}
	for i, r := range step {
		if int(gs[i].id) != nominal(r) {
			t.Errorf("ধাপ glyph %d: id %d, want %d (%q)", i, gs[i].id, nominal(r), r)
		}
	}
}

// TestItemize checks how mixed Bengali and Latin lines are split into runs.
func TestItemize(t *testing.T) {
	h := testHandler(t)
	show := func(s string) string {
		rs := []rune(s)
		var parts []string
		for _, r := range h.itemize(rs) {
			tag := "L"
			if r.bengali {
				tag = "B"
			}
			parts = append(parts, tag+":"+string(rs[r.start:r.end]))
		}
		return strings.Join(parts, "|")
	}
	for _, c := range []struct{ in, want string }{
		{"ধাপ", "B:ধাপ"},
		{"step 12", "L:step 12"},
		{"মেমরি (GiB)", "B:মেমরি|L: (GiB)"},
		{"fused+bf16 (যাচাই)", "L:fused+bf16 (|B:যাচাই|L:)"},
		{"ক্ষতি (ন্যাট/টোকেন)", "B:ক্ষতি (ন্যাট/টোকেন)"},
		{"৩.১×", "B:৩.১×"},
		{"অর্জিত ব্যান্ডউইথ (GB/s)", "B:অর্জিত ব্যান্ডউইথ|L: (GB/s)"},
		{"১২ GB", "B:১২|L: GB"},
	} {
		if got := show(c.in); got != c.want {
			t.Errorf("itemize(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestBoxAndExtents checks the handler's measures: the shaped advance for
// Bengali (not gonum's per-rune sum), gonum's own width for Latin, and
// vertical metrics that hold both fonts.
func TestBoxAndExtents(t *testing.T) {
	h := testHandler(t)
	fnt := font.From(sans, 24)
	plain := text.Plain{Fonts: font.DefaultCache}

	title := []rune("প্রশিক্ষণের ক্ষতি")
	var sh shaping.HarfbuzzShaper
	out := sh.Shape(shaping.Input{Text: title, RunEnd: len(title), Direction: di.DirectionLTR, Face: h.face,
		Size: fixed.I(int(h.upem)), Script: language.Bengali, Language: language.NewLanguage("bn")})
	want := float64(out.Advance) / 64 * 24 / h.upem
	w, asc, desc := h.Box(string(title), fnt)
	t.Logf("title at 24 pt: width %.1f pt (shaped), ascent %.2f, descent %.2f", w.Points(), asc.Points(), desc.Points())
	if math.Abs(w.Points()-want) > 1e-6 {
		t.Errorf("title width %.3f pt, want the shaped advance %.3f pt", w.Points(), want)
	}
	if pw, _, _ := plain.Box(string(title), fnt); math.Abs(pw.Points()-w.Points()) < 1 {
		t.Errorf("shaped width %.1f equals gonum's unshaped %.1f: shaping had no effect", w.Points(), pw.Points())
	}

	for _, s := range []string{"fused+bf16", "0.5", "gpt2-124M"} {
		got, _, _ := h.Box(s, fnt)
		pw, _, _ := plain.Box(s, fnt)
		if got != pw {
			t.Errorf("Box(%q) width %v, want gonum's %v", s, got, pw)
		}
	}

	e, pe := h.Extents(fnt), plain.Extents(fnt)
	if e.Ascent < pe.Ascent || e.Descent < pe.Descent || e.Height < pe.Height {
		t.Errorf("extents %+v smaller than the Latin font's %+v", e, pe)
	}
	if got := vg.Length(h.desc) * 24 / vg.Length(h.upem); e.Descent < got {
		t.Errorf("descent %v below the Bengali font's %v", e.Descent, got)
	}
}

// inkMask renders the black-on-white image img as a mask of pixels darker
// than mid-grey.
func inkMask(img image.Image) []bool {
	b := img.Bounds()
	m := make([]bool, 0, b.Dx()*b.Dy())
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			g := color.GrayModel.Convert(img.At(x, y)).(color.Gray)
			m = append(m, g.Y < 128)
		}
	}
	return m
}

// TestShapingMatchesReference draws Bengali strings with the handler and
// compares the ink with rsvg-convert's rendering of the same strings as SVG
// text in the same font (Pango + HarfBuzz + cairo, a browser-grade text
// stack): the pixels must overlap almost entirely.
func TestShapingMatchesReference(t *testing.T) {
	h := testHandler(t)
	rsvg, err := exec.LookPath("rsvg-convert")
	if err != nil {
		if os.Getenv("DRUTO_SKIP_FONTS") == "1" {
			t.Skip("DRUTO_SKIP_FONTS=1: no rsvg-convert") // skip: DRUTO_SKIP_FONTS=1 opts out; a missing rsvg-convert fails by default
		}
		t.Fatal("rsvg-convert not found: apt-get install librsvg2-bin (or DRUTO_SKIP_FONTS=1 to skip)")
	}
	family := h.face.Describe().Family
	const (
		W, H     = 520, 110
		size     = 48.0
		x0, base = 20.0, 36.0 // baseline from the bottom, points = pixels at 72 dpi
	)
	dir := t.TempDir()
	for i, s := range []string{"প্রশিক্ষণের ক্ষতি", "ধাপ", "গতিবৃদ্ধি ক্ষ্ম", "কার্নেলের ব্যান্ডউইথ", "জিপিইউ ব্যবহার"} {
		c := vgimg.NewWith(vgimg.UseWH(W, H), vgimg.UseDPI(72))
		c.SetColor(color.White)
		c.Fill(rectPath(0, 0, W, H))
		c.SetColor(color.Black)
		h.drawLine(c, s, font.From(sans, size), vg.Point{X: x0, Y: base})
		ours := inkMask(c.Image())

		svg := fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d">`+
			`<rect width="100%%" height="100%%" fill="white"/>`+
			`<text x="%g" y="%g" font-family="%s" font-size="%g" fill="black">%s</text></svg>`,
			W, H, x0, H-base, family, size, s)
		in, out := filepath.Join(dir, fmt.Sprint(i, ".svg")), filepath.Join(dir, fmt.Sprint(i, ".png"))
		if err := os.WriteFile(in, []byte(svg), 0o644); err != nil {
			t.Fatal(err)
		}
		if msg, err := exec.Command(rsvg, "-o", out, in).CombinedOutput(); err != nil {
			t.Fatalf("rsvg-convert: %v: %s", err, msg)
		}
		raw, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := png.Decode(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		theirs := inkMask(ref)
		if len(theirs) != len(ours) {
			t.Fatalf("%q: reference is %v, ours %dx%d", s, ref.Bounds(), W, H)
		}
		var both, either, nOurs, nTheirs int
		for j := range ours {
			if ours[j] {
				nOurs++
			}
			if theirs[j] {
				nTheirs++
			}
			if ours[j] && theirs[j] {
				both++
			}
			if ours[j] || theirs[j] {
				either++
			}
		}
		iou := float64(both) / float64(max(either, 1))
		t.Logf("%-22q ink %5d px (reference %5d), overlap %.1f%% of the union", s, nOurs, nTheirs, 100*iou)
		if nTheirs < 500 {
			t.Fatalf("%q: the reference has only %d ink pixels: did fontconfig find %q?", s, nTheirs, family)
		}
		if iou < 0.9 {
			t.Errorf("%q: ink overlap %.3f with the reference rendering, want >= 0.9", s, iou)
		}

		// Control: the same runes drawn one nominal glyph after another, as
		// gonum draws them, must be told apart from the reference.
		if s == "ধাপ" { // no conjunct or reordering: same either way
			continue
		}
		c = vgimg.NewWith(vgimg.UseWH(W, H), vgimg.UseDPI(72))
		c.SetColor(color.White)
		c.Fill(rectPath(0, 0, W, H))
		c.SetColor(color.Black)
		var path vg.Path
		x := float64(x0)
		for _, r := range s {
			g, _ := h.face.NominalGlyph(r)
			h.appendGlyph(&path, g, x, base, size/h.upem)
			x += float64(h.face.HorizontalAdvance(g)) * size / h.upem
		}
		c.Fill(path)
		control := inkMask(c.Image())
		both, either = 0, 0
		for j := range control {
			if control[j] && theirs[j] {
				both++
			}
			if control[j] || theirs[j] {
				either++
			}
		}
		ctl := float64(both) / float64(max(either, 1))
		t.Logf("%-22q unshaped control overlap %.1f%%", s, 100*ctl)
		if ctl > 0.8 {
			t.Errorf("%q: unshaped drawing overlaps the reference %.3f: the comparison cannot tell shaping apart", s, ctl)
		}
	}
}

// rectPath returns a closed rectangle path.
func rectPath(x0, y0, x1, y1 vg.Length) vg.Path {
	var p vg.Path
	p.Move(vg.Point{X: x0, Y: y0})
	p.Line(vg.Point{X: x1, Y: y0})
	p.Line(vg.Point{X: x1, Y: y1})
	p.Line(vg.Point{X: x0, Y: y1})
	p.Close()
	return p
}

// TestLatinPaths checks that Latin runs drawn as outlines (inside lines with
// Bengali) land where gonum's canvas text puts them.
func TestLatinPaths(t *testing.T) {
	h := testHandler(t)
	const W, H = 420, 80
	fnt := font.From(sans, 36)
	s := "fused+bf16 (GB/s) 42%"
	draw := func(f func(c *vgimg.Canvas)) []bool {
		c := vgimg.NewWith(vgimg.UseWH(W, H), vgimg.UseDPI(72))
		c.SetColor(color.White)
		c.Fill(rectPath(0, 0, W, H))
		c.SetColor(color.Black)
		f(c)
		return inkMask(c.Image())
	}
	text := draw(func(c *vgimg.Canvas) { c.FillString(h.plain.Fonts.Lookup(fnt, fnt.Size), vg.Point{X: 10, Y: 25}, s) })
	paths := draw(func(c *vgimg.Canvas) {
		var p vg.Path
		h.mu.Lock()
		adv := h.appendLatin(&p, fnt, []rune(s), 10, 25)
		h.mu.Unlock()
		face := h.plain.Fonts.Lookup(fnt, fnt.Size)
		if w := face.Width(s); math.Abs(adv-float64(w)) > 1e-9 {
			t.Errorf("path advance %v, gonum width %v", adv, w)
		}
		c.Fill(p)
	})
	var both, either int
	for i := range text {
		if text[i] && paths[i] {
			both++
		}
		if text[i] || paths[i] {
			either++
		}
	}
	iou := float64(both) / float64(max(either, 1))
	t.Logf("Latin as paths vs canvas text: overlap %.1f%% of %d px", 100*iou, either)
	if iou < 0.95 {
		t.Errorf("overlap %.3f, want >= 0.95", iou)
	}
}

func BenchmarkShapeTitle(b *testing.B) {
	path, err := FindFont()
	if err != nil {
		b.Skip(err) // skip: a benchmark (CI runs none)
	}
	h, err := NewTextHandler(path)
	if err != nil {
		b.Fatal(err)
	}
	title := []rune("প্রশিক্ষণের ক্ষতি")
	b.ReportAllocs()
	for b.Loop() {
		h.mu.Lock()
		clear(h.shaped) // measure shaping, not the cache
		h.shapeRun(title, 0, len(title))
		h.mu.Unlock()
	}
}

func BenchmarkNewTextHandler(b *testing.B) {
	path, err := FindFont()
	if err != nil {
		b.Skip(err) // skip: a benchmark (CI runs none)
	}
	for b.Loop() {
		if _, err := NewTextHandler(path); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLossCurvesPNG(b *testing.B) {
	runs := fixtureRuns()
	for _, lang := range []string{"en", "bn"} {
		b.Run(lang, func(b *testing.B) {
			if _, err := LossCurves(runs, Lang(lang)); err != nil {
				b.Skip(err) // skip: a benchmark (CI runs none)
			}
			for b.Loop() {
				p, err := LossCurves(runs, Lang(lang), BanglaDigits(lang == "bn"))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := Render(p, "png", 0, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestConcurrentPlots renders Bangla plots from several goroutines through
// the shared handler (run with -race) and checks they come out identical.
func TestConcurrentPlots(t *testing.T) {
	needFont(t)
	runs := fixtureRuns()
	const n = 4
	out := make([][]byte, n)
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			p, err := LossCurves(runs, Lang("bn"), BanglaDigits(true))
			if err == nil {
				out[i], err = Render(p, "png", 0, 0)
			}
			errs <- err
		}()
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if len(out[0]) == 0 {
		t.Fatal("render 0 is empty")
	}
	for i := 1; i < n; i++ {
		if !bytes.Equal(out[i], out[0]) {
			t.Errorf("render %d differs from render 0", i)
		}
	}
}
