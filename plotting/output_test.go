package plotting

import (
	"bytes"
	"encoding/gob"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/janpfeifer/gonb/gonbui"
	"github.com/janpfeifer/gonb/gonbui/protocol"
	"gonum.org/v1/plot/vg"
)

var (
	pngMagic = []byte("\x89PNG\r\n\x1a\n")
	pdfMagic = []byte("%PDF-")
)

func TestSave(t *testing.T) {
	p, err := LossCurves(fixtureRuns())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, magic := range map[string][]byte{
		"loss.png": pngMagic, "loss.PNG": pngMagic, "loss.svg": []byte("<?xml"), "loss.pdf": pdfMagic,
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte("old contents"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := Save(p, path, 5*vg.Inch, 3*vg.Inch); err != nil {
			t.Fatalf("Save %s: %v", name, err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(got, magic) {
			t.Errorf("%s starts with %q, want %q", name, got[:min(8, len(got))], magic)
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
			t.Errorf("%s mode %v", name, fi.Mode())
		}
	}
	for _, bad := range []string{"loss.jpg", "loss", "loss.svgz"} {
		err := Save(p, filepath.Join(dir, bad), 0, 0)
		if err == nil || !strings.Contains(err.Error(), "unknown image extension") {
			t.Errorf("Save %s: %v, want an unknown-extension error", bad, err)
		}
	}
	if err := Save(p, filepath.Join(dir, "no", "such", "dir.png"), 0, 0); err == nil {
		t.Error("Save into a missing folder: no error")
	}
	// PNG size: by default the pixels Show draws; DPI and Size change it.
	for _, c := range []struct {
		opts []Option
		w, h int
	}{
		{nil, 1152, 768},
		{[]Option{DPI(96)}, 576, 384},
		{[]Option{DPI(300), Size(4*vg.Inch, 2*vg.Inch)}, 1200, 600},
	} {
		path := filepath.Join(t.TempDir(), "size.png")
		if err := Save(p, path, 0, 0, c.opts...); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := png.DecodeConfig(f)
		f.Close()
		if err != nil || cfg.Width != c.w || cfg.Height != c.h {
			t.Errorf("Save with %d options: %dx%d (%v), want %dx%d", len(c.opts), cfg.Width, cfg.Height, err, c.w, c.h)
		}
	}
	if err := Save(p, filepath.Join(dir, "dpi.png"), 0, 0, DPI(5)); err == nil || !strings.Contains(err.Error(), "24 to 2400") {
		t.Errorf("Save with DPI(5): %v, want a range error", err)
	}
	if err := Save(p, filepath.Join(dir, "neg.png"), -1, 10); err == nil {
		t.Error("Save with a negative width: no error")
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
	if len(entries) != 4 {
		t.Errorf("%d files in the folder, want the 4 images", len(entries))
	}
}

// TestBanglaFormats renders a Bangla plot as PNG, SVG and PDF: Bengali text
// must be drawn as paths everywhere (no Bengali <text> in SVG, none of
// gonum's WinAnsi text in PDF), Latin text stays text.
func TestBanglaFormats(t *testing.T) {
	needFont(t)
	p, err := LossCurves(fixtureRuns(), Lang("bn"))
	if err != nil {
		t.Fatal(err)
	}
	svg, err := Render(p, "svg", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if hasBengali(string(svg)) {
		t.Error("the SVG holds Bengali text, which viewers would shape (or not) on their own")
	}
	if !bytes.Contains(svg, []byte(">fused+bf16<")) {
		t.Error("a Latin-only legend entry is not SVG text")
	}
	if bytes.Contains(svg, []byte(">fused+bf16 ")) {
		t.Error("the Latin part of a mixed legend entry is SVG text: a viewer's font would not line up with the Bengali paths")
	}
	en, err := LossCurves(fixtureRuns())
	if err != nil {
		t.Fatal(err)
	}
	enPDF, err := Render(en, "pdf", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	bnPDF, err := Render(p, "pdf", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(bnPDF, pdfMagic) || !bytes.Contains(bnPDF[len(bnPDF)-16:], []byte("%%EOF")) {
		t.Error("not a complete PDF")
	}
	if len(bnPDF) <= len(enPDF) {
		t.Errorf("Bangla PDF %d bytes, English %d: Bengali glyph paths missing?", len(bnPDF), len(enPDF))
	}
	png, err := Render(p, "png", 0, 0)
	if err != nil || !bytes.HasPrefix(png, pngMagic) {
		t.Errorf("PNG: %v", err)
	}
}

func TestShowOutsideNotebook(t *testing.T) {
	if gonbui.IsNotebook {
		t.Skip("running inside GoNB") // skip: inside GoNB (not a missing tool)
	}
	// Outside a notebook Show does nothing, not even render.
	if err := Show(nil); err != nil {
		t.Errorf("Show outside a notebook: %v", err)
	}
	if err := Show(nil, Size(-1, 1)); err == nil {
		t.Error("Show with a bad size: no error")
	}
}

// TestShowInNotebook runs Show against fake GoNB pipes (plain files) and
// decodes what it sent: by default an image/png display drawn at twice its
// size with width and height metadata at the size, and no SVG (nbconvert's
// HTML export would pick the SVG and strip it); with SVG(true) an
// image/svg+xml display.
func TestShowInNotebook(t *testing.T) {
	dir := t.TempDir()
	out, back := filepath.Join(dir, "pipe"), filepath.Join(dir, "back")
	for _, f := range []string{out, back} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(protocol.GONB_PIPE_ENV, out)
	t.Setenv(protocol.GONB_PIPE_BACK_ENV, back)
	gonbui.IsNotebook = true
	defer func() { gonbui.IsNotebook = false }()
	syncs := 0
	syncDisplay = func() { syncs++ }
	defer func() { syncDisplay = gonbui.Sync }()

	p, err := SpeedUp(fixtureBench().Records)
	if err != nil {
		t.Fatal(err)
	}
	if err := Show(p, Size(4*vg.Inch, 3*vg.Inch)); err != nil {
		t.Fatal(err)
	}
	if err := Show(p, SVG(true)); err != nil {
		t.Fatal(err)
	}
	if err := Show(nil); err == nil {
		t.Error("Show(nil) in a notebook: no error")
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := gob.NewDecoder(f)
	var msgs []protocol.DisplayData
	for {
		var d protocol.DisplayData
		if err := dec.Decode(&d); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, d)
	}
	if len(msgs) != 2 {
		t.Fatalf("%d displays sent, want 2", len(msgs))
	}
	if syncs != 2 {
		t.Errorf("Show waited for GoNB %d times, want once per display", syncs)
	}

	img, ok := msgs[0].Data[protocol.MIMEImagePNG].([]byte)
	if !ok || !bytes.HasPrefix(img, pngMagic) {
		t.Fatalf("first display is not a PNG: %T", msgs[0].Data[protocol.MIMEImagePNG])
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	// 4 x 3 inches at 96 CSS pixels to the inch, drawn at ShowScale.
	if cfg.Width != 4*96*ShowScale || cfg.Height != 3*96*ShowScale {
		t.Errorf("PNG is %dx%d pixels, want %dx%d", cfg.Width, cfg.Height, 4*96*ShowScale, 3*96*ShowScale)
	}
	md, _ := msgs[0].Metadata[string(protocol.MIMEImagePNG)].(map[string]int)
	if md["width"] != 4*96 || md["height"] != 3*96 {
		t.Errorf("PNG metadata %v, want width 384 and height 288 (CSS pixels)", msgs[0].Metadata)
	}
	for mime := range msgs[0].Data {
		if mime != protocol.MIMEImagePNG && mime != protocol.MIMETextPlain {
			t.Errorf("the default display also carries %s", mime)
		}
	}
	if alt, _ := msgs[0].Data[protocol.MIMETextPlain].(string); alt != "Speed-up over the baseline" {
		t.Errorf("text/plain %q", alt)
	}

	svg, ok := msgs[1].Data[protocol.MIMEImageSVG].(string)
	if !ok || !strings.Contains(svg, "<svg") || !strings.Contains(svg, "Speed-up over the baseline") {
		t.Errorf("SVG(true) display is not the SVG plot: %T", msgs[1].Data[protocol.MIMEImageSVG])
	}
	if _, ok := msgs[1].Data[protocol.MIMEImagePNG]; ok {
		t.Error("the SVG display also carries PNG")
	}
}
