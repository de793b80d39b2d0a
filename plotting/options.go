package plotting

import (
	"fmt"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/vgimg"
)

// DefaultWidth and DefaultHeight are the size Show renders at and Save uses
// when given zero sizes.
const (
	DefaultWidth  = 6 * vg.Inch
	DefaultHeight = 4 * vg.Inch
)

// DefaultSmooth is the default EMA weight of the newest point in LossCurves.
const DefaultSmooth = 0.1

// Option changes how a plot is drawn, read or shown. Each function documents
// the options it uses; the others are ignored.
type Option func(*config)

// config collects the options of one call.
type config struct {
	lang     string
	digits   bool
	logY     bool
	alpha    float64
	title    *string
	grouped  bool
	runLabel string
	svg      bool
	words    func(string) string
	dpi      int
	w, h     vg.Length
	err      error
}

// newConfig applies opts to the defaults and returns the first invalid one.
func newConfig(opts []Option) (config, error) {
	c := config{lang: "en", alpha: DefaultSmooth, w: DefaultWidth, h: DefaultHeight, dpi: ShowScale * vgimg.DefaultDPI}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c, c.err
}

// setErr keeps the first option error.
func (c *config) setErr(err error) {
	if c.err == nil {
		c.err = err
	}
}

// Lang selects the language of every label: "en" (the default) or "bn".
// Bangla labels are shaped with a system Bengali font (see FindFont).
func Lang(code string) Option {
	return func(c *config) {
		switch code {
		case "en", "bn":
			c.lang = code
		default:
			c.setErr(fmt.Errorf("plotting: unknown language %q (want \"en\" or \"bn\")", code))
		}
	}
}

// Words translates the data words a plot shows: legend entries (modes,
// run labels), category tick labels and the step profile's op classes and
// mode. nbui.PlotOptions passes nbui's message catalogue, so a Bangla
// notebook's plots show "ফিউজড+bf16" where an English one shows
// "fused+bf16". Without it, data words are drawn as given.
func Words(translate func(string) string) Option { return func(c *config) { c.words = translate } }

// BanglaDigits writes tick labels and values on bars with the Bengali digits
// ০-৯ instead of 0-9.
func BanglaDigits(on bool) Option { return func(c *config) { c.digits = on } }

// LogY draws the loss axis of LossCurves on a log scale.
func LogY(on bool) Option { return func(c *config) { c.logY = on } }

// Smooth sets the weight of the newest point of the exponential moving
// average LossCurves draws over the raw loss: s = alpha*x + (1-alpha)*s.
// alpha must be in (0, 1]; 1 means no smoothing (raw curves only).
func Smooth(alpha float64) Option {
	return func(c *config) {
		if !(alpha > 0 && alpha <= 1) {
			c.setErr(fmt.Errorf("plotting: smoothing weight %v not in (0, 1]", alpha))
			return
		}
		c.alpha = alpha
	}
}

// Title replaces the default title of a plot; "" removes the title.
func Title(s string) Option { return func(c *config) { c.title = &s } }

// Grouped draws Memory's components side by side instead of stacked.
func Grouped(on bool) Option { return func(c *config) { c.grouped = on } }

// RunLabel names the run ReadMetrics returns (default: the file name without
// its extension).
func RunLabel(s string) Option { return func(c *config) { c.runLabel = s } }

// SVG makes Show send an image/svg+xml output instead of its PNG: sharp at
// any zoom in live Jupyter, but nbconvert's HTML export (6.5) strips SVG
// outputs, so a published notebook shows a blank box where the plot was.
func SVG(on bool) Option { return func(c *config) { c.svg = on } }

// DPI sets the resolution Save draws a PNG at, in dots per inch (default
// ShowScale × 96, the pixels Show sends); it must be 24 to 2400.
func DPI(dpi int) Option {
	return func(c *config) {
		if dpi < 24 || dpi > 2400 {
			c.setErr(fmt.Errorf("plotting: DPI %d is out of range; use 24 to 2400 (96 is a screen's, 300 a printer's)", dpi))
			return
		}
		c.dpi = dpi
	}
}

// Size sets the size Show renders at and Save writes at when given zero
// sizes (default DefaultWidth x DefaultHeight).
func Size(w, h vg.Length) Option {
	return func(c *config) {
		if w <= 0 || h <= 0 {
			c.setErr(fmt.Errorf("plotting: size %v x %v must be positive", w, h))
			return
		}
		c.w, c.h = w, h
	}
}
