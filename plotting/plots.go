package plotting

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// finite reports whether v is a finite number.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// LossCurves plots the training loss of each run against the step: the raw
// loss as a thin pale line, its exponential moving average (Smooth, default
// DefaultSmooth) as a solid line named after the run, and the validation
// losses as dots. Options: Lang, BanglaDigits, LogY, Smooth, Title.
func LossCurves(runs []Run, opts ...Option) (*plot.Plot, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if len(runs) == 0 {
		return nil, errors.New("plotting: LossCurves: no runs")
	}
	f := newFigure(cfg, msgLossTitle)
	f.axes(f.loc.msg(msgStep), f.loc.msg(msgLoss))
	f.grid(true)
	var t tally
	for i, r := range runs {
		var raw, val plotter.XYs
		for _, m := range r.Metrics {
			for _, pt := range []struct {
				has  bool
				v    float64
				into *plotter.XYs
			}{{m.HasLoss, m.Loss, &raw}, {m.HasValLoss, m.ValLoss, &val}} {
				if !pt.has {
					continue
				}
				if cfg.logY && pt.v <= 0 {
					return nil, fmt.Errorf("plotting: a log axis needs positive losses, and run %q has %g at step %d; plot it without LogY (druto plot: without --log)", r.Label, pt.v, m.Step)
				}
				if y, ok := t.point(pt.v); ok {
					*pt.into = append(*pt.into, plotter.XY{X: float64(m.Step), Y: y})
				}
			}
		}
		if len(raw) == 0 && len(val) == 0 {
			return nil, fmt.Errorf("plotting: LossCurves: run %q has no loss to plot", r.Label)
		}
		c := colorOf(i)
		var thumbs []plot.Thumbnailer
		if len(raw) > 0 {
			rawLine, err := plotter.NewLine(raw)
			if err != nil {
				return nil, fmt.Errorf("plotting: run %q: %w", r.Label, err)
			}
			rawLine.Color, rawLine.Width = c, vg.Points(1.2)
			if cfg.alpha < 1 {
				rawLine.Color, rawLine.Width = fade(c, 0.35), vg.Points(0.6)
			}
			f.p.Add(rawLine)
			thumbs = append(thumbs, rawLine)
		}
		if len(raw) > 0 && cfg.alpha < 1 {
			smooth := make(plotter.XYs, len(raw))
			s := raw[0].Y
			for j, xy := range raw {
				s = cfg.alpha*xy.Y + (1-cfg.alpha)*s
				smooth[j] = plotter.XY{X: xy.X, Y: s}
			}
			line, err := plotter.NewLine(smooth)
			if err != nil {
				return nil, fmt.Errorf("plotting: run %q: %w", r.Label, err)
			}
			line.Color, line.Width = c, vg.Points(1.5)
			f.p.Add(line)
			thumbs = append(thumbs, line)
		}
		if len(thumbs) > 0 {
			f.legend(r.Label, thumbs...)
		}
		if len(val) > 0 {
			sc, err := plotter.NewScatter(val)
			if err != nil {
				return nil, fmt.Errorf("plotting: run %q: %w", r.Label, err)
			}
			sc.GlyphStyle = draw.GlyphStyle{Color: c, Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}
			f.p.Add(sc)
			f.legend(f.loc.msg(msgVal, r.Label), sc)
		}
	}
	if cfg.logY {
		f.p.Y.Scale = plot.LogScale{}
		f.p.Y.Tick.Marker = logTicks{}
	}
	f.note(t)
	return f.finish()
}

// speedUps returns, per config in order, the baseline record and the
// speed-up (baseline step_ms / step_ms) of each mode measured at the
// baseline's batch and sequence length (NaN where a mode was not).
func speedUps(recs []BenchRecord) (cfgs, modes []string, base map[string]BenchRecord, su map[string][]float64, err error) {
	if len(recs) == 0 {
		return nil, nil, nil, nil, errors.New("plotting: no benchmark records")
	}
	if base, err = baselines(recs); err != nil {
		return nil, nil, nil, nil, err
	}
	cfgs = order(recs, func(r BenchRecord) string { return r.Config })
	modes = order(recs, func(r BenchRecord) string { return r.Mode })
	su = make(map[string][]float64)
	for _, c := range cfgs {
		b := base[c]
		if !(b.StepMs > 0) {
			return nil, nil, nil, nil, fmt.Errorf("plotting: baseline of %q has step_ms %v", c, b.StepMs)
		}
		vals := make([]float64, len(modes))
		for j, m := range modes {
			vals[j] = math.NaN()
			for _, r := range recs {
				if r.Config != c || r.Mode != m || r.Batch != b.Batch || r.Seq != b.Seq {
					continue
				}
				if !math.IsNaN(vals[j]) {
					return nil, nil, nil, nil, fmt.Errorf("plotting: %q %q batch %d seq %d measured twice", c, m, b.Batch, b.Seq)
				}
				if !(r.StepMs > 0) {
					return nil, nil, nil, nil, fmt.Errorf("plotting: %q %q has step_ms %v", c, m, r.StepMs)
				}
				vals[j] = b.StepMs / r.StepMs
			}
		}
		su[c] = vals
	}
	return cfgs, modes, base, su, nil
}

// SpeedUp plots, for each config, one bar per mode with its speed-up over
// the config's baseline record (baseline step_ms / mode step_ms, measured at
// the baseline's batch and sequence length), the value printed on each bar
// ("3.1×") and a dashed line at 1×. Options: Lang, BanglaDigits, Title.
func SpeedUp(recs []BenchRecord, opts ...Option) (*plot.Plot, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	cfgs, modes, _, su, err := speedUps(recs)
	if err != nil {
		return nil, err
	}
	f := newFigure(cfg, msgSpeedUpTitle)
	f.axes(f.loc.msg(msgConfig), f.loc.msg(msgSpeedUp))
	f.grid(false)
	one := plotter.NewFunction(func(float64) float64 { return 1 })
	one.Color, one.Width, one.Dashes = color.Gray{0x80}, vg.Points(0.8), []vg.Length{vg.Points(4), vg.Points(3)}
	f.p.Add(one)
	w := 0.8 / float64(len(modes))
	top := 1.0
	for j, m := range modes {
		var xs, hs []float64
		var at plotter.XYs
		var texts []string
		for i, c := range cfgs {
			v := su[c][j]
			if math.IsNaN(v) {
				continue
			}
			x := float64(i) - 0.4 + w*(float64(j)+0.5)
			xs, hs = append(xs, x), append(hs, v)
			at = append(at, plotter.XY{X: x, Y: v})
			texts = append(texts, formatTimes(v))
			top = math.Max(top, v)
		}
		if len(xs) == 0 {
			continue
		}
		b := newBars(xs, nil, hs, w*0.9, colorOf(j))
		f.p.Add(b)
		f.legend(m, b)
		if err := f.values(at, texts); err != nil {
			return nil, err
		}
	}
	f.nominalX(cfgs)
	f.p.Y.Min, f.p.Y.Max = 0, top*1.35
	return f.finish()
}

// formatTimes writes a speed-up as "3.1×" (one decimal below 10, none above).
func formatTimes(v float64) string {
	if v >= 10 {
		return strconv.FormatFloat(v, 'f', 0, 64) + "×"
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + "×"
}

// Throughput plots tokens/s against batch size (log axis, ticks at the batch
// sizes measured), one line per mode (per config and mode, and sequence
// length, where records differ in them). Options: Lang, BanglaDigits, Title.
func Throughput(recs []BenchRecord, opts ...Option) (*plot.Plot, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, errors.New("plotting: Throughput: no benchmark records")
	}
	type key struct {
		cfg, mode string
		seq       int
	}
	series := make(map[key][]BenchRecord)
	var keys []key
	var maxTPS float64
	var batches []float64
	seenBatch := make(map[int]bool)
	for _, r := range recs {
		if r.Batch <= 0 {
			return nil, fmt.Errorf("plotting: Throughput: %q %q has batch %d", r.Config, r.Mode, r.Batch)
		}
		k := key{r.Config, r.Mode, r.Seq}
		if _, ok := series[k]; !ok {
			keys = append(keys, k)
		}
		for _, o := range series[k] {
			if o.Batch == r.Batch {
				return nil, fmt.Errorf("plotting: Throughput: %q %q batch %d seq %d measured twice", r.Config, r.Mode, r.Batch, r.Seq)
			}
		}
		series[k] = append(series[k], r)
		maxTPS = math.Max(maxTPS, r.TokensPerS)
		if !seenBatch[r.Batch] {
			seenBatch[r.Batch] = true
			batches = append(batches, float64(r.Batch))
		}
	}
	div, ylabel := 1.0, msgTokensPerS
	switch {
	case maxTPS >= 1e6:
		div, ylabel = 1e6, msgMTokensPerS
	case maxTPS >= 1e3:
		div, ylabel = 1e3, msgKTokensPerS
	}
	f := newFigure(cfg, msgThroughputTitle)
	f.axes(f.loc.msg(msgBatch), f.loc.msg(ylabel))
	f.grid(true)
	firsts := make([]BenchRecord, len(keys))
	for i, k := range keys {
		firsts[i] = series[k][0]
	}
	names := recordLabels(firsts, " ")
	for i, k := range keys {
		rs := series[k]
		sort.Slice(rs, func(a, b int) bool { return rs[a].Batch < rs[b].Batch })
		xys := make(plotter.XYs, len(rs))
		for j, r := range rs {
			xys[j] = plotter.XY{X: float64(r.Batch), Y: r.TokensPerS / div}
		}
		line, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, fmt.Errorf("plotting: Throughput: %w", err)
		}
		c := colorOf(i)
		line.Color, line.Width = c, vg.Points(1.5)
		pts.GlyphStyle = draw.GlyphStyle{Color: c, Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}
		f.p.Add(line, pts)
		f.legend(names[i], line, pts)
	}
	sort.Float64s(batches)
	ticks := make(plot.ConstantTicks, len(batches))
	for i, b := range batches {
		ticks[i] = plot.Tick{Value: b, Label: strconv.Itoa(int(b))}
	}
	f.p.X.Tick.Marker = ticks
	if batches[0] < batches[len(batches)-1] {
		f.p.X.Scale = plot.LogScale{}
		f.p.X.Min, f.p.X.Max = batches[0]/1.25, batches[len(batches)-1]*1.25
	} else {
		f.p.X.Min, f.p.X.Max = batches[0]-1, batches[0]+1
	}
	f.p.Y.Min = 0
	f.p.Y.Max = math.Max(f.p.Y.Max*1.3, 1e-9)
	f.p.Legend.Left = true
	return f.finish()
}

// byteUnit picks the binary unit for a largest value of max bytes.
func byteUnit(max float64) (string, float64) {
	switch {
	case max >= 1<<30:
		return "GiB", 1 << 30
	case max >= 1<<20:
		return "MiB", 1 << 20
	case max >= 1<<10:
		return "KiB", 1 << 10
	}
	return "B", 1
}

// Memory plots each record's device memory by component (parameters,
// gradients, optimizer state, activations) as stacked bars with the total
// on top, or side by side with Grouped(true); the unit (B, KiB, MiB, GiB)
// follows the largest value. Options: Lang, BanglaDigits, Grouped, Title.
func Memory(recs []BenchRecord, opts ...Option) (*plot.Plot, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, errors.New("plotting: Memory: no benchmark records")
	}
	var maxV float64
	for _, r := range recs {
		m := r.Memory
		if cfg.grouped {
			maxV = math.Max(maxV, math.Max(math.Max(m.Params, m.Grads), math.Max(m.Optimizer, m.Activations)))
		} else {
			maxV = math.Max(maxV, m.Total())
		}
	}
	if !(maxV > 0) {
		return nil, errors.New("plotting: Memory: records have no memory figures")
	}
	unit, div := byteUnit(maxV)
	f := newFigure(cfg, msgMemoryTitle)
	f.axes(f.loc.msg(msgConfig), f.loc.msg(msgMemory, unit))
	f.grid(false)
	comps := []struct {
		name msg
		get  func(MemoryUse) float64
	}{
		{msgParams, func(m MemoryUse) float64 { return m.Params }},
		{msgGrads, func(m MemoryUse) float64 { return m.Grads }},
		{msgOptimizer, func(m MemoryUse) float64 { return m.Optimizer }},
		{msgActivations, func(m MemoryUse) float64 { return m.Activations }},
	}
	n := len(recs)
	bottoms := make([]float64, n)
	w := 0.6
	if cfg.grouped {
		w = 0.8 / float64(len(comps))
	}
	for j, c := range comps {
		xs, hs := make([]float64, n), make([]float64, n)
		var bot []float64
		for i, r := range recs {
			xs[i], hs[i] = float64(i), c.get(r.Memory)/div
			if cfg.grouped {
				xs[i] = float64(i) - 0.4 + w*(float64(j)+0.5)
			}
		}
		if !cfg.grouped {
			bot = append([]float64(nil), bottoms...)
			for i := range bottoms {
				bottoms[i] += hs[i]
			}
		}
		width := w
		if cfg.grouped {
			width = w * 0.9
		}
		b := newBars(xs, bot, hs, width, colorOf(j))
		f.p.Add(b)
		f.legend(f.loc.msg(c.name), b)
	}
	if !cfg.grouped {
		at := make(plotter.XYs, n)
		texts := make([]string, n)
		for i := range recs {
			at[i] = plotter.XY{X: float64(i), Y: bottoms[i]}
			texts[i] = strconv.FormatFloat(bottoms[i], 'f', precision(maxV/div), 64)
		}
		if err := f.values(at, texts); err != nil {
			return nil, err
		}
	}
	f.nominalX(recordLabels(recs, "\n"))
	f.p.Y.Min, f.p.Y.Max = 0, maxV/div*1.45
	f.p.Legend.Left = true
	return f.finish()
}

// precision returns the decimals that show about three significant digits
// of values up to max.
func precision(max float64) int {
	switch {
	case max >= 100:
		return 0
	case max >= 10:
		return 1
	}
	return 2
}

// Utilisation plots GPU utilisation (%) against time for each record that
// has utilisation samples, one line per record. Options: Lang,
// BanglaDigits, Title.
func Utilisation(recs []BenchRecord, opts ...Option) (*plot.Plot, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	var withUtil []BenchRecord
	for _, r := range recs {
		if len(r.Util) > 0 {
			withUtil = append(withUtil, r)
		}
	}
	if len(withUtil) == 0 {
		return nil, errors.New("plotting: Utilisation: no record has utilisation samples")
	}
	f := newFigure(cfg, msgUtilTitle)
	f.axes(f.loc.msg(msgTime), f.loc.msg(msgUtil))
	f.grid(true)
	names := recordLabels(withUtil, " ")
	for i, r := range withUtil {
		xys := make(plotter.XYs, len(r.Util))
		for j, u := range r.Util {
			xys[j] = plotter.XY{X: u.TS, Y: u.GPUUtil}
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("plotting: Utilisation: %w", err)
		}
		line.Color, line.Width = colorOf(i), vg.Points(1.2)
		f.p.Add(line)
		f.legend(names[i], line)
	}
	f.p.Y.Min, f.p.Y.Max = 0, 110
	f.p.Y.Tick.Marker = plot.ConstantTicks{{Value: 0, Label: "0"}, {Value: 25, Label: "25"},
		{Value: 50, Label: "50"}, {Value: 75, Label: "75"}, {Value: 100, Label: "100"}}
	f.p.Legend.Left = true
	f.p.Legend.Top = false
	return f.finish()
}

// Bandwidth plots the achieved memory bandwidth (GB/s) of each kernel, one
// bar per kernel mode, with the measured ceiling drawn as a dashed line over
// each kernel's bars and the share of the ceiling printed on each bar.
// Kernels are collected from all records; a (kernel, mode) pair may appear
// once. Options: Lang, BanglaDigits, Title.
func Bandwidth(recs []BenchRecord, opts ...Option) (*plot.Plot, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	var ks []Kernel
	seen := make(map[[2]string]bool)
	for _, r := range recs {
		for _, k := range r.Kernels {
			id := [2]string{k.Name, k.Mode}
			if seen[id] {
				return nil, fmt.Errorf("plotting: Bandwidth: kernel %q mode %q appears twice; pass the records of one run", k.Name, k.Mode)
			}
			seen[id] = true
			ks = append(ks, k)
		}
	}
	if len(ks) == 0 {
		return nil, errors.New("plotting: Bandwidth: no record has kernel measurements")
	}
	names := order(ks, func(k Kernel) string { return k.Name })
	modes := order(ks, func(k Kernel) string { return k.Mode })
	idx := make(map[string]int)
	for i, n := range names {
		idx[n] = i
	}
	f := newFigure(cfg, msgBandwidthTitle)
	f.axes(f.loc.msg(msgKernel), f.loc.msg(msgBandwidth))
	f.grid(false)
	w := 0.8 / float64(len(modes))
	top := 0.0
	for j, m := range modes {
		var xs, hs []float64
		var at plotter.XYs
		var texts []string
		for _, k := range ks {
			if k.Mode != m {
				continue
			}
			x := float64(idx[k.Name]) - 0.4 + w*(float64(j)+0.5)
			xs, hs = append(xs, x), append(hs, k.GBps)
			top = math.Max(top, k.GBps)
			if k.CeilingGBps > 0 {
				at = append(at, plotter.XY{X: x, Y: k.GBps})
				texts = append(texts, strconv.FormatFloat(100*k.GBps/k.CeilingGBps, 'f', 0, 64)+"%")
			}
		}
		b := newBars(xs, nil, hs, w*0.9, colorOf(j))
		f.p.Add(b)
		f.legend(m, b)
		if len(at) > 0 {
			if err := f.values(at, texts); err != nil {
				return nil, err
			}
		}
	}
	// The ceiling of each kernel: the largest one given for its modes.
	ceil := make([]float64, len(names))
	for _, k := range ks {
		ceil[idx[k.Name]] = math.Max(ceil[idx[k.Name]], k.CeilingGBps)
	}
	ceilName := f.loc.msg(msgCeiling)
	if same := order(ks, func(k Kernel) string { return strconv.FormatFloat(k.CeilingGBps, 'g', -1, 64) }); len(same) == 1 {
		ceilName = f.loc.msg(msgCeilingAt, f.loc.num(same[0]))
	}
	first := true
	for i, c := range ceil {
		if c <= 0 {
			continue
		}
		top = math.Max(top, c)
		seg, err := plotter.NewLine(plotter.XYs{{X: float64(i) - 0.45, Y: c}, {X: float64(i) + 0.45, Y: c}})
		if err != nil {
			return nil, fmt.Errorf("plotting: Bandwidth: %w", err)
		}
		seg.Color, seg.Width = colorOf(len(palette)-2), vg.Points(1.2)
		seg.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		f.p.Add(seg)
		if first {
			f.legend(ceilName, seg)
			first = false
		}
	}
	f.nominalX(names)
	f.p.Y.Min, f.p.Y.Max = 0, top*1.3
	f.p.Legend.Left = true
	return f.finish()
}
