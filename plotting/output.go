package plotting

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/janpfeifer/gonb/gonbui"
	"github.com/janpfeifer/gonb/gonbui/protocol"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
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
// mean DefaultWidth and DefaultHeight. The file is written to a temporary
// file in the same folder and renamed into place, so readers never see a
// partial image.
func Save(p *plot.Plot, path string, w, h vg.Length) error {
	ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	if !formats[ext] {
		return fmt.Errorf("plotting: %s: unknown image extension (want .png, .svg or .pdf)", path)
	}
	data, err := Render(p, ext, w, h)
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

// Show displays p inline in a GoNB notebook cell as a real image/svg+xml
// output (or image/png with the PNG option), at Size (default DefaultWidth
// x DefaultHeight). Outside a notebook (gonbui.IsNotebook false) it does
// nothing and returns nil. Options: PNG, Size.
func Show(p *plot.Plot, opts ...Option) error {
	cfg, err := newConfig(opts)
	if err != nil {
		return err
	}
	if !gonbui.IsNotebook {
		return nil
	}
	format, mime := "svg", protocol.MIMEImageSVG
	if cfg.png {
		format, mime = "png", protocol.MIMEImagePNG
	}
	img, err := Render(p, format, cfg.w, cfg.h)
	if err != nil {
		return err
	}
	var content any = img // PNG: bytes, sent base64-encoded by GoNB
	if !cfg.png {
		content = string(img)
	}
	alt := p.Title.Text
	if alt == "" {
		alt = "plot"
	}
	gonbui.SendData(&protocol.DisplayData{Data: map[protocol.MIMEType]any{
		mime:                   content,
		protocol.MIMETextPlain: alt,
	}})
	// Wait until GoNB has the display: a cell's program that exits right
	// after Show would otherwise lose what is still in the pipe.
	syncDisplay()
	if err := gonbui.Error(); err != nil {
		return fmt.Errorf("plotting: showing the plot: %w", err)
	}
	return nil
}
