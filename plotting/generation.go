package plotting

// generation.go: the generation figure: decode tokens per second by model
// and system (druto's modes, PyTorch's paths), with the bound that reading
// the weights once a step sets.

import (
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/druto/druto/internal/boundedread"
	"github.com/druto/druto/pkg/record"
)

// Decode is one generation measurement: System (e.g. "druto fused+fp32",
// "PyTorch kv-cache") generating for Config at batch Batch.
type Decode struct {
	System     string
	Config     string
	Batch      int
	TokensPerS float64 // decode tokens per second, every sequence's
	BoundTokS  float64 // the weight-read bound, 0 when not known
}

// ReadSample reads the generation records of a druto bench --sample report
// (its "sample" list) as Decode values named "druto MODE".
func ReadSample(path string) ([]Decode, error) {
	f, _, err := boundedread.Open(path, maxBenchBytes)
	if err != nil {
		return nil, fmt.Errorf("plotting: %w", err)
	}
	defer f.Close()
	samples, err := record.ParseSamples(f)
	if err != nil {
		return nil, fmt.Errorf("plotting: %s: %w", path, err)
	}
	if len(samples) == 0 {
		return nil, fmt.Errorf("plotting: %s holds no generation records (druto bench --sample writes them)", path)
	}
	out := make([]Decode, len(samples))
	for i, r := range samples {
		out[i] = Decode{System: "druto " + r.Mode, Config: r.Config, Batch: r.Batch, TokensPerS: r.DecodeTokS, BoundTokS: r.BoundTokS}
	}
	return out, nil
}

// ReadTorchSample reads the JSON lines torch_sample_bench.py prints (one per
// path: "kv-cache", "recompute") as Decode values named "PyTorch PATH" for
// config; a path run more than once (before and after druto's run) counts
// at its fastest.
func ReadTorchSample(path, config string) ([]Decode, error) {
	f, _, err := boundedread.Open(path, maxBenchBytes)
	if err != nil {
		return nil, fmt.Errorf("plotting: %w", err)
	}
	defer f.Close()
	var out []Decode
	dec := json.NewDecoder(f)
	for {
		var l struct {
			Mode string  `json:"mode"`
			TokS float64 `json:"tok_s"`
		}
		if err := dec.Decode(&l); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("plotting: %s: %w", path, err)
		}
		if l.Mode == "" {
			continue
		}
		d := Decode{System: "PyTorch " + l.Mode, Config: config, Batch: 1, TokensPerS: l.TokS}
		if i := slices.IndexFunc(out, func(o Decode) bool { return o.System == d.System }); i >= 0 {
			out[i].TokensPerS = math.Max(out[i].TokensPerS, d.TokensPerS) // runs before and after druto's: the faster
			continue
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("plotting: %s holds no torch_sample_bench.py result", path)
	}
	return out, nil
}

// Generation draws decode tokens per second as bars, one group per model
// (and batch), one bar per system, each labelled with its value; a dashed
// mark over a bar is its weight-read bound.
func Generation(recs []Decode, opts ...Option) (*plot.Plot, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, errors.New("plotting: Generation: no records")
	}
	var groups, systems []string
	gi, si := map[string]int{}, map[string]int{}
	val := map[[2]int]Decode{}
	top := 0.0
	for _, r := range recs {
		if !(r.TokensPerS >= 0) || math.IsInf(r.TokensPerS, 0) || !(r.BoundTokS >= 0) || math.IsInf(r.BoundTokS, 0) {
			return nil, fmt.Errorf("plotting: Generation: %s %s: tokens/s %v, bound %v", r.System, r.Config, r.TokensPerS, r.BoundTokS)
		}
		g := r.Config
		if r.Batch > 1 {
			g = fmt.Sprintf("%s ×%d", r.Config, r.Batch)
		}
		if _, ok := gi[g]; !ok {
			gi[g] = len(groups)
			groups = append(groups, g)
		}
		if _, ok := si[r.System]; !ok {
			si[r.System] = len(systems)
			systems = append(systems, r.System)
		}
		k := [2]int{gi[g], si[r.System]}
		if _, dup := val[k]; dup {
			return nil, fmt.Errorf("plotting: Generation: %s %s measured twice", r.System, g)
		}
		val[k] = r
		top = math.Max(top, math.Max(r.TokensPerS, r.BoundTokS))
	}
	lo := top
	for _, r := range recs {
		if r.TokensPerS > 0 {
			lo = math.Min(lo, r.TokensPerS)
		}
	}
	// Rates of a small model and a large one differ by 100x or more: then a
	// log axis, the bars standing on its lowest decade.
	logY := lo > 0 && top/lo > 30
	floor := 0.0
	if logY {
		floor = math.Pow(10, math.Floor(math.Log10(lo/2)))
	}
	f := newFigure(cfg, msgGenerationTitle)
	f.axes(f.loc.msg(msgConfig), f.loc.msg(msgDecodeTokS))
	f.grid(false)
	w := 0.8 / float64(len(systems))
	for j, s := range systems {
		var xs, hs []float64
		var at plotter.XYs
		var texts []string
		var bound plotter.XYs
		for i := range groups {
			r, ok := val[[2]int{i, j}]
			if !ok {
				continue
			}
			x := float64(i) - 0.4 + w*(float64(j)+0.5)
			xs, hs = append(xs, x), append(hs, r.TokensPerS)
			at = append(at, plotter.XY{X: x, Y: math.Max(r.TokensPerS, r.BoundTokS)}) // above the bound's mark
			texts = append(texts, formatRate(r.TokensPerS))
			if r.BoundTokS > 0 {
				bound = append(bound, plotter.XY{X: x - w*0.45, Y: r.BoundTokS}, plotter.XY{X: x + w*0.45, Y: r.BoundTokS})
			}
		}
		var bottoms []float64
		if logY {
			bottoms = make([]float64, len(xs))
			for k := range bottoms {
				bottoms[k] = floor
				hs[k] = math.Max(hs[k]-floor, 0)
			}
		}
		b := newBars(xs, bottoms, hs, w*0.9, colorOf(j))
		f.p.Add(b)
		f.legend(f.systemName(s), b)
		if err := f.values(at, texts); err != nil {
			return nil, err
		}
		for k := 0; k+1 < len(bound); k += 2 {
			l, err := plotter.NewLine(bound[k : k+2])
			if err != nil {
				return nil, fmt.Errorf("plotting: Generation: %w", err)
			}
			l.Color, l.Width, l.Dashes = color.Gray{0x30}, vg.Points(1.2), []vg.Length{vg.Points(3), vg.Points(2)}
			f.p.Add(l)
			if j == 0 && k == 0 {
				f.legend(f.loc.msg(msgWeightBound), l)
			}
		}
	}
	f.nominalX(groups)
	f.p.Y.Min, f.p.Y.Max = 0, math.Max(top*1.3, 1e-9)
	if logY {
		f.p.Y.Scale, f.p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
		f.p.Y.Min, f.p.Y.Max = floor, top*4
	}
	return f.finish()
}

// systemName localises the words of a system's name ("druto", "PyTorch" and
// the modes stay as they are; the KV-cache paths and "(here)" are
// translated).
func (f *figure) systemName(s string) string {
	s = strings.Replace(s, "kv-cache", f.loc.msg(msgKVCache), 1)
	s = strings.Replace(s, "(here)", "("+f.loc.msg(msgHere)+")", 1)
	return strings.Replace(s, "recompute", f.loc.msg(msgRecompute), 1)
}

// formatRate writes a rate with three significant digits at most.
func formatRate(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}
