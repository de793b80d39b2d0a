package plotting

import (
	"fmt"
	"image/color"
	"math"
	"strconv"
	"strings"
	"sync"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// sans is the Latin font of druto's plots (in gonum's default cache).
var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

// palette is the Okabe-Ito colour-blind-safe palette, yellow moved last.
var palette = []color.RGBA{
	{0x00, 0x72, 0xB2, 0xFF}, // blue
	{0xD5, 0x5E, 0x00, 0xFF}, // vermillion
	{0x00, 0x9E, 0x73, 0xFF}, // green
	{0xCC, 0x79, 0xA7, 0xFF}, // reddish purple
	{0xE6, 0x9F, 0x00, 0xFF}, // orange
	{0x56, 0xB4, 0xE9, 0xFF}, // sky blue
	{0x00, 0x00, 0x00, 0xFF}, // black
	{0xF0, 0xE4, 0x42, 0xFF}, // yellow
}

// colorOf returns the i-th palette colour, cycling.
func colorOf(i int) color.RGBA { return palette[i%len(palette)] }

// fade returns c blended with white, a of c: an opaque pale colour (vgpdf
// does not draw translucent strokes faithfully).
func fade(c color.RGBA, a float64) color.RGBA {
	f := func(v uint8) uint8 { return uint8(math.Round(float64(v)*a + 255*(1-a))) }
	return color.RGBA{f(c.R), f(c.G), f(c.B), 0xFF}
}

// figure builds one plot: it records every string put in the plot so that
// finish knows whether Bengali shaping is needed, and the plotters that
// draw text.
type figure struct {
	loc     locale
	words   func(string) string // Words; nil: data words as given
	p       *plot.Plot
	texts   []string
	labels  []*plotter.Labels
	nominal bool // the x axis names things (configs, kernels)
}

// newFigure returns a plot with druto's fonts and title (the Title option,
// else the message def).
func newFigure(cfg config, def msg) *figure {
	f := &figure{loc: localeOf(cfg), words: cfg.words, p: plot.New()}
	p := f.p
	p.Title.TextStyle.Font = font.From(sans, 14)
	p.Title.Padding = vg.Points(6)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(sans, 11)
		a.Tick.Label.Font = font.From(sans, 9)
	}
	p.Legend.TextStyle.Font = font.From(sans, 9)
	p.Legend.Top = true
	p.Legend.ThumbnailWidth = vg.Points(20)
	p.Title.Text = f.loc.msg(def)
	if cfg.title != nil {
		p.Title.Text = *cfg.title
	}
	f.str(p.Title.Text)
	return f
}

// str records s as drawn text and returns it.
func (f *figure) str(s string) string {
	f.texts = append(f.texts, s)
	return s
}

// axes sets the axis labels.
func (f *figure) axes(x, y string) {
	f.p.X.Label.Text = f.str(x)
	f.p.Y.Label.Text = f.str(y)
}

// legend adds a legend entry.
func (f *figure) legend(name string, thumbs ...plot.Thumbnailer) {
	f.p.Legend.Add(f.str(f.word(name)), thumbs...)
}

// word is a data word (a mode, a class) in the plot's language (Words).
func (f *figure) word(s string) string {
	if f.words == nil {
		return s
	}
	return f.words(s)
}

// grid adds light grid lines; vertical ones only when vertical is set.
func (f *figure) grid(vertical bool) {
	g := plotter.NewGrid()
	g.Horizontal.Color = color.Gray{0xE0}
	g.Vertical.Color = color.Gray{0xE0}
	if !vertical {
		g.Vertical.Color = nil
	}
	f.p.Add(g)
}

// nominalX labels the integer x positions 0..n-1 with names.
func (f *figure) nominalX(names []string) {
	ticks := make(plot.ConstantTicks, len(names))
	for i, n := range names {
		ticks[i] = plot.Tick{Value: float64(i), Label: f.str(f.word(n))}
	}
	f.p.X.Tick.Marker = ticks
	f.nominal = true
	f.p.X.Tick.Length = 0
	f.p.X.Min, f.p.X.Max = -0.5, float64(len(names))-0.5
}

// values adds text labels (bar values) centred just above the points xys.
func (f *figure) values(xys plotter.XYs, texts []string) error {
	for i := range texts {
		texts[i] = f.str(f.loc.num(texts[i]))
	}
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: texts})
	if err != nil {
		return fmt.Errorf("plotting: %w", err)
	}
	for i := range l.TextStyle {
		l.TextStyle[i].Font = font.From(sans, 8)
		l.TextStyle[i].XAlign = draw.XCenter
		l.TextStyle[i].YAlign = draw.YBottom
	}
	l.Offset = vg.Point{Y: vg.Points(2)}
	f.labels = append(f.labels, l)
	f.p.Add(l)
	return nil
}

// plotLimit bounds the magnitude of what a figure draws: within it an
// axis's range (max - min) cannot overflow float64, which would send gonum's
// tick search into an endless loop.
const plotLimit = 1e300

// tally counts the data points a figure leaves out or moves, for its note.
type tally struct{ skipped, clamped int }

// point returns v ready to be drawn: false for NaN and ±Inf (left out),
// magnitudes beyond plotLimit clamped to it; both are counted.
func (t *tally) point(v float64) (float64, bool) {
	switch {
	case !finite(v):
		t.skipped++
		return 0, false
	case math.Abs(v) > plotLimit:
		t.clamped++
		return math.Copysign(plotLimit, v), true
	}
	return v, true
}

// note writes what t counted under the figure, below the x axis's label.
func (f *figure) note(t tally) {
	var parts []string
	if t.skipped > 0 {
		parts = append(parts, f.loc.msg(msgSkippedPoints, f.loc.num(strconv.Itoa(t.skipped))))
	}
	if t.clamped > 0 {
		parts = append(parts, f.loc.msg(msgClampedPoints, f.loc.num(strconv.Itoa(t.clamped))))
	}
	if len(parts) > 0 {
		f.p.X.Label.Text = f.str(f.p.X.Label.Text + "\n" + strings.Join(parts, "; "))
	}
}

// safeRange makes a's range one that gonum can draw and tick: within
// ±plotLimit, and wide enough for its magnitude (a single value, or values
// equal to 16 digits, would give a range of zero: "illegal range"). A log
// axis must hold positive values only (its plot checks); it widens by a
// factor of 2 each way.
func safeRange(a *plot.Axis, log bool) {
	if a.Min > a.Max {
		return // nothing drawn on it
	}
	if math.IsNaN(a.Min) || math.IsNaN(a.Max) { // a range a plot computed from overflowing values
		a.Min, a.Max = 0, 1
	}
	a.Min = math.Max(math.Min(a.Min, plotLimit), -plotLimit)
	a.Max = math.Max(math.Min(a.Max, plotLimit), -plotLimit)
	if log {
		if a.Min > 0 && !(a.Max > a.Min*(1+1e-9)) {
			// Halving the smallest subnormal gives 0, which a log axis
			// cannot take (gonum panics): keep such an end where it is.
			if lo := a.Min / 2; lo > 0 {
				a.Min = lo
			}
			if hi := a.Max * 2; hi <= plotLimit {
				a.Max = hi
			}
		}
		return
	}
	if mag := math.Max(math.Abs(a.Min), math.Abs(a.Max)); !(a.Max-a.Min > 1e-9*mag) {
		pad := math.Max(mag/2, 1)
		a.Min, a.Max = a.Min-pad, a.Max+pad
	}
}

// finish localises the tick labels and, when any text is Bangla or has
// Bengali digits, sets the shaping text handler on every text of the plot.
func (f *figure) finish() (*plot.Plot, error) {
	p := f.p
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		_, log := a.Scale.(plot.LogScale)
		safeRange(a, log)
		if _, ok := a.Tick.Marker.(plot.DefaultTicks); ok {
			a.Tick.Marker = linearTicks{}
		}
	}
	p.X.Tick.Marker = localTicks{Inner: p.X.Tick.Marker, Nominal: f.nominal, loc: f.loc}
	p.Y.Tick.Marker = localTicks{Inner: p.Y.Tick.Marker, loc: f.loc}
	need := f.loc.bn || f.loc.digits
	for _, s := range f.texts {
		need = need || hasBengali(s)
	}
	if !need {
		return p, nil
	}
	h, err := sharedHandler()
	if err != nil {
		return nil, err
	}
	ApplyTextHandler(p, h)
	// Bangla takes the shaped text's real extents: the title's box reaches
	// up to its ink, and legend rows, which gonum spaces by the ascent
	// alone, are padded by the descent (below-base forms such as ু and ্র
	// reach into the next row otherwise).
	p.Title.TextStyle.Handler = titleHandler{h}
	p.Legend.Padding = max(p.Legend.Padding, h.Extents(p.Legend.TextStyle.Font).Descent)
	for _, l := range f.labels {
		for i := range l.TextStyle {
			l.TextStyle[i].Handler = h
		}
	}
	return p, nil
}

// handlers caches one TextHandler per font file.
var handlers = struct {
	sync.Mutex
	m map[string]*TextHandler
}{m: make(map[string]*TextHandler)}

// sharedHandler returns the TextHandler of the font FindFont finds now.
func sharedHandler() (*TextHandler, error) {
	path, err := FindFont()
	if err != nil {
		return nil, err
	}
	handlers.Lock()
	defer handlers.Unlock()
	if h, ok := handlers.m[path]; ok {
		return h, nil
	}
	h, err := NewTextHandler(path)
	if err != nil {
		return nil, err
	}
	handlers.m[path] = h
	return h, nil
}

// localTicks writes the labels of Inner's ticks in the plot's digits;
// names (Nominal) are kept as they are.
type localTicks struct {
	Inner   plot.Ticker
	Nominal bool
	loc     locale
}

// Ticks returns Inner's ticks with localised labels.
func (t localTicks) Ticks(min, max float64) []plot.Tick {
	ts := t.Inner.Ticks(min, max)
	out := make([]plot.Tick, len(ts))
	for i, tk := range ts {
		if !t.Nominal {
			tk.Label = t.loc.num(tk.Label)
		}
		out[i] = tk
	}
	return out
}

// linearTicks are gonum's default ticks labelled with the shortest decimal
// that shows them ("2500", "1.5"), not a fixed number of decimals.
type linearTicks struct{}

// Ticks returns the ticks of [min, max].
func (linearTicks) Ticks(min, max float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(min, max)
	var span float64
	for _, tk := range ts {
		span = math.Max(span, math.Abs(tk.Value))
	}
	for i, tk := range ts {
		if tk.Label == "" {
			continue
		}
		v := tk.Value
		if math.Abs(v) < 1e-9*span {
			v = 0
		}
		v, _ = strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
		ts[i].Label = strconv.FormatFloat(v, 'f', -1, 64)
	}
	return ts
}

// logTicks marks a log axis at the integers times powers of ten; it labels
// those at 1, 2 and 5 times powers of ten when the range spans a decade or
// more, and all of them when it spans less.
type logTicks struct{}

// Ticks returns the ticks of [min, max].
func (logTicks) Ticks(min, max float64) []plot.Tick {
	if !(min > 0) || !(max > min) {
		return plot.DefaultTicks{}.Ticks(math.Max(min, 0), math.Max(max, min+1))
	}
	all := max/min < 10
	var ts []plot.Tick
	for e := math.Floor(math.Log10(min)); math.Pow(10, e) <= max; e++ {
		for k := 1; k <= 9; k++ {
			v := float64(k) * math.Pow(10, e)
			if v < min*(1-1e-9) || v > max*(1+1e-9) {
				continue
			}
			tk := plot.Tick{Value: v}
			if all || k == 1 || k == 2 || k == 5 {
				v, _ = strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
				tk.Label = strconv.FormatFloat(v, 'f', -1, 64)
			}
			ts = append(ts, tk)
		}
	}
	return ts
}

// bars draws vertical bars whose width is in data units, so bars keep their
// share of the axis at any canvas size; each bar may start above zero
// (stacked bars).
type bars struct {
	X, Bottom, Height []float64
	Width             float64 // data units
	Color             color.Color
	Line              draw.LineStyle
}

// newBars returns bars of colour c at xs with heights hs from bottoms (nil:
// from zero).
func newBars(xs, bottoms, hs []float64, width float64, c color.Color) *bars {
	if bottoms == nil {
		bottoms = make([]float64, len(xs))
	}
	return &bars{X: xs, Bottom: bottoms, Height: hs, Width: width, Color: c,
		Line: draw.LineStyle{Color: color.Gray{0x40}, Width: vg.Points(0.5)}}
}

// Plot draws the bars.
func (b *bars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for i := range b.X {
		x0, x1 := trX(b.X[i]-b.Width/2), trX(b.X[i]+b.Width/2)
		y0, y1 := trY(b.Bottom[i]), trY(b.Bottom[i]+b.Height[i])
		pts := []vg.Point{{X: x0, Y: y0}, {X: x0, Y: y1}, {X: x1, Y: y1}, {X: x1, Y: y0}}
		c.FillPolygon(b.Color, c.ClipPolygonXY(pts))
		pts = append(pts, pts[0])
		c.StrokeLines(b.Line, c.ClipLinesXY(pts)...)
	}
}

// DataRange returns the range the bars cover.
func (b *bars) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, ymin = math.Inf(1), math.Inf(1)
	xmax, ymax = math.Inf(-1), math.Inf(-1)
	for i := range b.X {
		xmin = math.Min(xmin, b.X[i]-b.Width/2)
		xmax = math.Max(xmax, b.X[i]+b.Width/2)
		lo, hi := b.Bottom[i], b.Bottom[i]+b.Height[i]
		ymin = math.Min(ymin, math.Min(lo, hi))
		ymax = math.Max(ymax, math.Max(lo, hi))
	}
	return xmin, xmax, ymin, ymax
}

// Thumbnail draws the legend swatch.
func (b *bars) Thumbnail(c *draw.Canvas) {
	pts := []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Min.X, Y: c.Max.Y},
		{X: c.Max.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Min.Y}}
	c.FillPolygon(b.Color, pts)
	c.StrokeLines(b.Line, append(pts, pts[0]))
}

// order returns the distinct keys in order of first appearance.
func order[T any](xs []T, key func(T) string) []string {
	seen := make(map[string]bool)
	var out []string
	for _, x := range xs {
		if k := key(x); !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// recordLabels names each record by its mode and, where the records differ
// in them, its config, and its batch and sequence length when those tell
// apart records of the same config and mode; the parts are joined by sep.
// With sep "\n" (axis names) a mode such as "decomposed+fp32" is broken
// after its "+" to keep names narrow.
func recordLabels(recs []BenchRecord, sep string) []string {
	cfgs := len(order(recs, func(r BenchRecord) string { return r.Config })) > 1
	varies := func(key func(BenchRecord) int) bool {
		first := make(map[[2]string]int)
		for _, r := range recs {
			id := [2]string{r.Config, r.Mode}
			if v, ok := first[id]; ok && v != key(r) {
				return true
			}
			first[id] = key(r)
		}
		return false
	}
	batch := varies(func(r BenchRecord) int { return r.Batch })
	seq := varies(func(r BenchRecord) int { return r.Seq })
	out := make([]string, len(recs))
	for i, r := range recs {
		s := r.Mode
		if sep == "\n" {
			s = strings.ReplaceAll(s, "+", "+\n")
		}
		if cfgs {
			s = r.Config + sep + s
		}
		if batch {
			s += sep + "B=" + strconv.Itoa(r.Batch)
		}
		if seq {
			s += sep + "T=" + strconv.Itoa(r.Seq)
		}
		out[i] = s
	}
	return out
}
