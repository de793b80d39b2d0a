package plotting

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/janpfeifer/gonb/gonbui"
	"github.com/janpfeifer/gonb/gonbui/protocol"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// formats are the image formats Render and Save write.
var formats = map[string]bool{"png": true, "svg": true, "pdf": true}

// Render draws p at w x h in format "png", "svg" or "pdf" and returns the
// encoded image. Zero sizes mean DefaultWidth and DefaultHeight.
func Render(p *plot.Plot, format string, w, h vg.Length) ([]byte, error) {
	if p == nil {
		return nil, fmt.Errorf("plotting: nil plot")
	}
	if !formats[format] {
		return nil, fmt.Errorf("plotting: unknown image format %q (want png, svg or pdf)", format)
	}
	if w == 0 {
		w = DefaultWidth
	}
	if h == 0 {
		h = DefaultHeight
	}
	if w < 0 || h < 0 {
		return nil, fmt.Errorf("plotting: size %v x %v must be positive", w, h)
	}
	wt, err := p.WriterTo(w, h, format)
	if err != nil {
		return nil, fmt.Errorf("plotting: %w", err)
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("plotting: encoding %s: %w", format, err)
	}
	return buf.Bytes(), nil
}

// Save writes p at w x h to path as PNG, SVG or PDF, chosen by the extension
// (.png, .svg, .pdf, any case); any other extension is an error. Zero sizes
// mean the Size option's, else DefaultWidth and DefaultHeight. A PNG is
// drawn at the DPI option's resolution, by default what Show draws
// (ShowScale × 96 dots per inch: 1152×768 pixels at the default size);
// Lang, Title and the other plot options do not apply here (the plot is
// already made). The file is written to a temporary file in the same
// folder and renamed into place, so readers never see a partial image.
func Save(p *plot.Plot, path string, w, h vg.Length, opts ...Option) error {
	ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	if !formats[ext] {
		return fmt.Errorf("plotting: %s: unknown image extension (want .png, .svg or .pdf)", path)
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return err
	}
	if w == 0 {
		w = cfg.w
	}
	if h == 0 {
		h = cfg.h
	}
	var data []byte
	if ext == "png" {
		if p == nil {
			return fmt.Errorf("plotting: nil plot")
		}
		if w < 0 || h < 0 {
			return fmt.Errorf("plotting: size %v x %v must be positive", w, h)
		}
		data, err = renderPNG(p, w, h, cfg.dpi)
	} else {
		data, err = Render(p, ext, w, h)
	}
	if err != nil {
		return err
	}
	return writeAtomic(path, data)
}

// writeAtomic writes data to path through a temporary file and a rename.
func writeAtomic(path string, data []byte) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("plotting: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("plotting: writing %s: %w", path, err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("plotting: writing %s: %w", path, err)
	}
	if err = tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("plotting: writing %s: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("plotting: writing %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("plotting: %w", err)
	}
	return nil
}

// syncDisplay waits for GoNB to acknowledge what was sent (a variable so
// the test's fake pipe, which cannot acknowledge, can count the calls).
var syncDisplay = gonbui.Sync

// ShowScale is how many image pixels Show draws per CSS pixel: its PNG is
// drawn at ShowScale times the size it is displayed at, so that it stays
// sharp on high-density screens.
const ShowScale = 2

// Show displays p inline in a GoNB notebook cell at Size (default
// DefaultWidth x DefaultHeight). Outside a notebook (gonbui.IsNotebook
// false) it does nothing and returns nil. Options: Size, SVG.
//
// By default it sends an image/png output drawn at ShowScale times the
// size, with width and height metadata (in CSS pixels, 96 to the inch) that
// display it at the size, and the title as text/plain. PNG is the one image
// type every viewer shows, live and saved: Jupyter Notebook, JupyterLab, VS
// Code, GitHub, and nbconvert's HTML export, which (Debian's 6.5.3) strips
// SVG elements from image/svg+xml outputs and leaves a blank box in the
// published page. Bengali is drawn as shaped glyph outlines either way, so
// the image needs no font on the reader's side.
//
// With SVG(true) it sends image/svg+xml instead: sharp at any zoom in live
// Jupyter, but blank in nbconvert's HTML export.
func Show(p *plot.Plot, opts ...Option) error {
	cfg, err := newConfig(opts)
	if err != nil {
		return err
	}
	if !gonbui.IsNotebook {
		return nil
	}
	d, err := display(p, cfg)
	if err != nil {
		return err
	}
	gonbui.SendData(d)
	// Wait until GoNB has the display: a cell's program that exits right
	// after Show would otherwise lose what is still in the pipe.
	syncDisplay()
	if err := gonbui.Error(); err != nil {
		return fmt.Errorf("plotting: showing the plot: %w", err)
	}
	return nil
}

// display is the output Show sends for p.
func display(p *plot.Plot, cfg config) (*protocol.DisplayData, error) {
	if p == nil {
		return nil, fmt.Errorf("plotting: nil plot")
	}
	alt := p.Title.Text
	if alt == "" {
		alt = "plot"
	}
	if cfg.svg {
		img, err := Render(p, "svg", cfg.w, cfg.h)
		if err != nil {
			return nil, err
		}
		return &protocol.DisplayData{Data: map[protocol.MIMEType]any{
			protocol.MIMEImageSVG:  string(img),
			protocol.MIMETextPlain: alt,
		}}, nil
	}
	img, err := renderPNG(p, cfg.w, cfg.h, ShowScale*vgimg.DefaultDPI)
	if err != nil {
		return nil, err
	}
	// CSS pixels: 96 to the inch, the DPI Render and Save use for PNG.
	cssW := int(math.Round(float64(cfg.w/vg.Inch) * vgimg.DefaultDPI))
	cssH := int(math.Round(float64(cfg.h/vg.Inch) * vgimg.DefaultDPI))
	return &protocol.DisplayData{
		Data: map[protocol.MIMEType]any{
			protocol.MIMEImagePNG:  img, // bytes: GoNB sends them base64-encoded
			protocol.MIMETextPlain: alt,
		},
		Metadata: map[string]any{
			string(protocol.MIMEImagePNG): map[string]int{"width": cssW, "height": cssH},
		},
	}, nil
}

// renderPNG draws p at w x h as a PNG at dpi dots per inch.
func renderPNG(p *plot.Plot, w, h vg.Length, dpi int) ([]byte, error) {
	c := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(dpi))
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("plotting: encoding png: %w", err)
	}
	return buf.Bytes(), nil
}
