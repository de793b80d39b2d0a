package device

import (
	"math"
	"sort"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// refSample is SampleRow's rule written the slow, obvious way: sort the
// allowed tokens by logit, cut by K and by P, then walk the kept ones in
// id order.
func refSample(logits []float32, st []int32, left int, o Sampling, u float32) int {
	var ids []int
	for i := range logits {
		if e := st[i]; e != TableNo && int(e>>8) <= left {
			ids = append(ids, i)
		}
	}
	if len(ids) == 0 {
		return SampleNone
	}
	sort.SliceStable(ids, func(a, b int) bool { return logits[ids[a]] > logits[ids[b]] })
	if o.Temperature == 0 {
		return ids[0]
	}
	keep := map[int]bool{}
	for _, i := range ids {
		if o.TopK == 0 || o.TopK >= len(ids) || logits[i] >= logits[ids[o.TopK-1]] {
			keep[i] = true
		}
	}
	w := func(i int) float64 {
		return math.Exp((float64(logits[i]) - float64(logits[ids[0]])) / float64(o.Temperature))
	}
	if o.TopP > 0 && o.TopP < 1 {
		var total, c float64
		for i := range keep {
			total += w(i)
		}
		tau := 0.0
		for _, i := range ids {
			if keep[i] {
				c += w(i)
				if c >= float64(o.TopP)*total {
					tau = w(i)
					break
				}
			}
		}
		for i := range keep {
			if w(i) < tau {
				delete(keep, i)
			}
		}
	}
	var total float64
	for i := range keep {
		total += w(i)
	}
	r, c, last := float64(u)*total, 0.0, -1
	for i := range logits {
		if keep[i] {
			last = i
			if c += w(i); c > r {
				return i
			}
		}
	}
	return last
}

// TestSampleRow: the one sampling rule against its slow statement, over
// random logits (with ties), masks, needs, and every option.
func TestSampleRow(t *testing.T) {
	rng := tensor.NewRNG(3)
	var sc SampleScratch
	for trial := range 3000 {
		V := 1 + rng.Intn(70)
		logits := make([]float32, V)
		st := make([]int32, V)
		for i := range logits {
			logits[i] = float32(rng.Intn(9)) / 4 // ties are common
			switch rng.Intn(5) {
			case 0:
				st[i] = TableNo
			default:
				st[i] = TableEntry(rng.Intn(3), rng.Intn(3))
			}
		}
		left := rng.Intn(3)
		o := Sampling{}
		if trial%4 != 0 {
			o.Temperature = []float32{0.5, 1, 2}[rng.Intn(3)]
			if rng.Intn(2) == 0 {
				o.TopK = rng.Intn(V + 2)
			}
			if rng.Intn(2) == 0 {
				o.TopP = []float32{0, 0.1, 0.5, 0.9, 1}[rng.Intn(5)]
			}
		}
		u := Uniform(uint64(trial), uint32(trial))
		got, e := SampleRow(logits, st, left, o, u, &sc)
		want := refSample(logits, st, left, o, u)
		if got != want {
			t.Fatalf("trial %d (V %d, %+v, u %v): SampleRow %d, reference %d", trial, V, o, u, got, want)
		}
		if got >= 0 && e != st[got] {
			t.Fatalf("trial %d: entry %d, table says %d", trial, e, st[got])
		}
	}
	nan := []float32{0, float32(math.NaN()), 1}
	if id, _ := SampleRow(nan, make([]int32, 3), 0, Sampling{}, 0.5, &sc); id != SampleNotFinite {
		t.Errorf("a NaN logit gave %d, want SampleNotFinite", id)
	}
	inf := []float32{0, float32(math.Inf(1)), 1}
	if id, _ := SampleRow(inf, []int32{0, TableNo, 0}, 0, Sampling{}, 0.5, &sc); id != 2 {
		t.Errorf("an infinite logit of a token not allowed counted: %d", id)
	}
}

// TestUniform: draws lie in [0,1), differ by seed and step, and are spread
// evenly (a coarse histogram).
func TestUniform(t *testing.T) {
	var bins [10]int
	seen := map[float32]bool{}
	for s := range uint64(100) {
		for i := range uint32(100) {
			u := Uniform(s, i)
			if !(u >= 0 && u < 1) {
				t.Fatalf("Uniform(%d, %d) = %v", s, i, u)
			}
			bins[int(u*10)]++
			seen[u] = true
		}
	}
	for i, n := range bins {
		if n < 850 || n > 1150 {
			t.Errorf("bin %d holds %d of 10000 draws", i, n)
		}
	}
	if len(seen) < 9990 {
		t.Errorf("only %d distinct draws of 10000", len(seen))
	}
}
