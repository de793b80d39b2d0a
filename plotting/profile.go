package plotting

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"strconv"

	"github.com/druto/druto/pkg/record"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// StepProfile plots where one training step's time goes (a record.Profile:
// bench.ProfileStep, `druto bench --profile`): a horizontal bar of milliseconds per op class,
// largest at the top, each labelled with its share of the step and, where
// its work is counted, its percentage of the measured ceiling (matmul peak
// or copy bandwidth). Options: Lang, BanglaDigits, Title.
func StepProfile(p *record.Profile, opts ...Option) (*plot.Plot, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if p == nil || len(p.Rows) == 0 {
		return nil, errors.New("plotting: StepProfile: an empty profile (run bench.ProfileStep or druto bench --profile)")
	}
	f := newFigure(cfg, msgProfileTitle)
	if cfg.title == nil {
		f.p.Title.Text = f.str(f.loc.msg(msgProfileTitle) + " · " + p.Config + " · " + f.word(p.Mode))
	}
	f.axes(f.loc.msg(msgMsPerStep), "")
	n := len(p.Rows)
	vals := make(plotter.Values, n)
	ticks := make(plot.ConstantTicks, n)
	var at plotter.XYs
	var texts []string
	top := 0.0
	for i, r := range p.Rows {
		y := float64(n - 1 - i) // the largest class at the top
		if !finite(r.Ms) || r.Ms < 0 {
			return nil, fmt.Errorf("plotting: StepProfile: class %q has %v ms", r.Class, r.Ms)
		}
		vals[n-1-i] = r.Ms
		ticks[n-1-i] = plot.Tick{Value: y, Label: f.str(f.word(r.Class))}
		top = math.Max(top, r.Ms)
		label := strconv.FormatFloat(100*r.Share, 'f', 1, 64) + "%"
		if r.Pct > 0 {
			label += " · " + f.loc.msg(msgOfCeiling, strconv.FormatFloat(r.Pct, 'f', 0, 64)+"%")
		}
		at = append(at, plotter.XY{X: r.Ms, Y: y})
		texts = append(texts, label)
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(11))
	if err != nil {
		return nil, fmt.Errorf("plotting: StepProfile: %w", err)
	}
	bars.Horizontal = true
	bars.Color = colorOf(0)
	bars.LineStyle.Color = color.Transparent
	f.p.Add(bars)
	if err := f.values(at, texts); err != nil {
		return nil, err
	}
	for _, l := range f.labels {
		for i := range l.TextStyle {
			l.TextStyle[i].XAlign = 0 // left of the text at the bar's end
			l.TextStyle[i].YAlign = -0.5
		}
		l.Offset = vg.Point{X: vg.Points(3)}
	}
	f.p.Y.Tick.Marker = ticks
	f.p.Y.Tick.Length = 0
	f.p.Y.Min, f.p.Y.Max = -0.6, float64(n)-0.4
	f.p.X.Min, f.p.X.Max = 0, top*1.45
	f.grid(true)
	return f.finish()
}
