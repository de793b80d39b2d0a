package plotting

// scale.go: the loss-scale figure: a GradScaler's scale step by step, in
// log2, with the steps it skipped marked.

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// ScaleTrace is one scaler's run: the loss scale in use at each step
// (Scale[i] is step i+1's) and the steps it skipped (1-based).
type ScaleTrace struct {
	Label   string
	Scale   []float64
	Skipped []int
}

// LossScale draws each trace's loss scale against the step as a step line
// on a log2 axis, and each skipped step as a cross on its line. Traces
// after the first are drawn dashed over it, so two scalers that agree
// show one line. Options: Lang, BanglaDigits, Title, Words.
func LossScale(traces []ScaleTrace, opts ...Option) (*plot.Plot, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if len(traces) == 0 {
		return nil, errors.New("plotting: LossScale: no traces")
	}
	f := newFigure(cfg, msgScaleTitle)
	f.axes(f.loc.msg(msgStep), f.loc.msg(msgLossScaleLog2))
	f.grid(true)
	for i, tr := range traces {
		line, skips, err := scalePoints(tr)
		if err != nil {
			return nil, err
		}
		l, err := plotter.NewLine(line)
		if err != nil {
			return nil, fmt.Errorf("plotting: LossScale: %w", err)
		}
		l.StepStyle = plotter.PreStep
		l.Color, l.Width = colorOf(i), vg.Points(2.2-0.8*float64(min(i, 1)))
		if i > 0 {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		f.p.Add(l)
		f.legend(tr.Label, l)
		if len(skips) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(skips)
		if err != nil {
			return nil, fmt.Errorf("plotting: LossScale: %w", err)
		}
		sc.GlyphStyle = draw.GlyphStyle{Shape: draw.CrossGlyph{}, Color: colorOf(i), Radius: vg.Points(3.5 - float64(min(i, 1)))}
		f.p.Add(sc)
		f.legend(f.loc.msg(msgSkippedStep, tr.Label), sc)
	}
	f.p.Legend.Top = false
	f.p.Legend.Left = false
	return f.finish()
}

// scalePoints returns a trace's line (log2 of each step's scale) and the
// points of its skipped steps, on the line.
func scalePoints(tr ScaleTrace) (line, skips plotter.XYs, err error) {
	if len(tr.Scale) == 0 {
		return nil, nil, fmt.Errorf("plotting: LossScale: trace %q has no steps", tr.Label)
	}
	line = make(plotter.XYs, len(tr.Scale))
	for k, s := range tr.Scale {
		if !(s > 0) || math.IsInf(s, 0) {
			return nil, nil, fmt.Errorf("plotting: LossScale: trace %q has scale %v at step %d; a loss scale is positive and finite", tr.Label, s, k+1)
		}
		line[k] = plotter.XY{X: float64(k + 1), Y: math.Log2(s)}
	}
	for _, k := range tr.Skipped {
		if k < 1 || k > len(tr.Scale) {
			return nil, nil, fmt.Errorf("plotting: LossScale: trace %q skips step %d of %d", tr.Label, k, len(tr.Scale))
		}
		skips = append(skips, line[k-1])
	}
	return line, skips, nil
}
