package plotting

import (
	"math"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"
)

// fixtureScales is two scalers over 12 steps: the second backs off once
// more than the first.
func fixtureScales() []ScaleTrace {
	a := []float64{16, 16, 32, 32, 16, 16, 32, 32, 64, 32, 32, 32}
	b := []float64{16, 16, 32, 32, 16, 16, 32, 32, 64, 32, 16, 16}
	return []ScaleTrace{{Label: "druto", Scale: a, Skipped: []int{4, 9}}, {Label: "yours", Scale: b, Skipped: []int{4, 9, 10}}}
}

// TestLossScale checks the figure's data (log2 of each scale, a cross at
// each skipped step, on the line) and its errors.
func TestLossScale(t *testing.T) {
	tr := fixtureScales()
	for _, tr := range tr {
		if _, err := LossScale([]ScaleTrace{tr}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := LossScale(tr, Lang("bn"), BanglaDigits(true)); err != nil {
		t.Fatal(err)
	}
	line, skips, err := scalePoints(tr[1])
	if err != nil {
		t.Fatal(err)
	}
	if len(line) != 12 || line[8] != (plotter.XY{X: 9, Y: 6}) {
		t.Errorf("step 9 drawn at %v, want (9, 6): scale 64 is 2^6", line[8])
	}
	if len(skips) != 3 || skips[2] != (plotter.XY{X: 10, Y: 5}) {
		t.Errorf("skips drawn at %v, want the third at (10, 5), on the line", skips)
	}
	for _, c := range []struct {
		name   string
		traces []ScaleTrace
		want   string
	}{
		{"none", nil, "no traces"},
		{"empty", []ScaleTrace{{Label: "x"}}, "no steps"},
		{"zero", []ScaleTrace{{Label: "x", Scale: []float64{1, 0}}}, "scale 0 at step 2"},
		{"inf", []ScaleTrace{{Label: "x", Scale: []float64{math.Inf(1)}}}, "positive and finite"},
		{"skip", []ScaleTrace{{Label: "x", Scale: []float64{1, 2}, Skipped: []int{3}}}, "skips step 3 of 2"},
	} {
		if _, err := LossScale(c.traces); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one with %q", c.name, err, c.want)
		}
	}
}
