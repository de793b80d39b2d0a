package plotting

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
)

// renderWithin parses metrics, plots them (log: LogY) and saves an SVG,
// failing the test when that takes more than a minute (an endless tick
// loop) or panics. It returns LossCurves's error and the x axis's label.
func renderWithin(t *testing.T, runs []Run, opts ...Option) (string, error) {
	t.Helper()
	type result struct {
		label string
		err   error
	}
	done := make(chan result, 1)
	path := filepath.Join(t.TempDir(), "loss.svg")
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- result{err: fmt.Errorf("panic: %v", r)}
			}
		}()
		p, err := LossCurves(runs, opts...)
		if err != nil {
			done <- result{err: err}
			return
		}
		if err := Save(p, path, 0, 0); err != nil {
			done <- result{err: fmt.Errorf("Save: %w", err)}
			return
		}
		done <- result{label: p.X.Label.Text}
	}()
	select {
	case r := <-done:
		if r.err != nil && strings.HasPrefix(r.err.Error(), "panic") || r.err != nil && strings.HasPrefix(r.err.Error(), "Save") {
			t.Fatal(r.err)
		}
		if r.err == nil {
			if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
				t.Fatalf("no figure written: %v", err)
			}
		}
		return r.label, r.err
	case <-time.After(time.Minute): // a generous bound: the plot takes milliseconds
		t.Fatal("the plot did not finish within a minute (an endless tick loop?)")
		return "", nil
	}
}

// runOf is a run whose loss takes the values vs at steps 1, 2, ...
func runOf(vs ...float64) Run {
	r := Run{Label: "r"}
	for i, v := range vs {
		r.Metrics = append(r.Metrics, Metric{Step: i + 1, Loss: v, HasLoss: true})
	}
	return r
}

// TestLossCurvesAnyFiniteData plots metrics files whose values reach the
// ends of float64: each renders in bounded time with the moved points
// noted, and a log axis refuses values at or below zero.
func TestLossCurvesAnyFiniteData(t *testing.T) {
	alternating := ""
	for s := 1; s <= 40; s++ {
		alternating += fmt.Sprintf("{\"step\":%d,\"loss\":%g}\n", s, math.Copysign(1e308, float64(s%2)-0.5))
	}
	for _, c := range []struct {
		name    string
		metrics string
		log     bool
		note    string // in the x axis's label; "" none
		err     string
	}{
		{"alternating ±1e308", alternating, false, "40 points beyond ±1e300 drawn at the edge", ""},
		{"alternating ±1e308, log", alternating, true, "", "a log axis needs positive losses, and run \"r\" has -1e+308 at step 2"},
		{"largest float", `{"step":1,"loss":1.7976931348623157e308}` + "\n" + `{"step":2,"loss":-1.7976931348623157e308}`, false, "2 points beyond", ""},
		{"one huge value", `{"step":1,"loss":1e308}`, false, "1 points beyond", ""},
		{"one huge value, log", `{"step":1,"loss":1e308}`, true, "1 points beyond", ""},
		{"equal to 17 digits", `{"step":1,"loss":1e299}` + "\n" + `{"step":2,"loss":1.0000000000000001e299}`, false, "", ""},
		{"smallest and largest, log", `{"step":1,"loss":5e-324}` + "\n" + `{"step":2,"loss":1e300}`, true, "", ""},
		{"zero, log", `{"step":1,"loss":1}` + "\n" + `{"step":2,"loss":0}`, true, "", "has 0 at step 2"},
		{"validation loss negative, log", `{"step":1,"loss":1,"val_loss":-2}`, true, "", "has -2 at step 1"},
		{"steps at the ends of int64", `{"step":-9223372036854775808,"loss":1}` + "\n" + `{"step":9223372036854775807,"loss":2}`, false, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			run, err := ParseMetrics(strings.NewReader(c.metrics), "r")
			if err != nil {
				t.Fatal(err)
			}
			label, err := renderWithin(t, []Run{run}, LogY(c.log))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one saying %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.note == "" && label != "step" || !strings.Contains(label, c.note) {
				t.Errorf("x label %q, want the note %q", label, c.note)
			}
		})
	}
}

// TestLossCurvesNotFinite: NaN and ±Inf points (a run built in code; JSON
// holds neither) are left out and counted under the figure, in the plot's
// language.
func TestLossCurvesNotFinite(t *testing.T) {
	r := runOf(3, math.NaN(), 2, math.Inf(1), math.Inf(-1), 1)
	r.Metrics[0].ValLoss, r.Metrics[0].HasValLoss = math.NaN(), true
	label, err := renderWithin(t, []Run{r})
	if err != nil {
		t.Fatal(err)
	}
	if want := "step\n4 points left out (NaN or ±Inf)"; label != want {
		t.Errorf("x label %q, want %q", label, want)
	}
	needFont(t)
	label, err = renderWithin(t, []Run{r}, Lang("bn"), BanglaDigits(true))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(label, "৪টি বিন্দু বাদ") {
		t.Errorf("Bangla x label %q, want the note with ৪টি বিন্দু বাদ", label)
	}
	if _, err := renderWithin(t, []Run{runOf(math.NaN(), math.Inf(1))}); err == nil || !strings.Contains(err.Error(), "no loss to plot") {
		t.Errorf("a run of NaN only: %v, want \"no loss to plot\"", err)
	}
}

// TestLossCurvesRandomRanges plots random runs whose values span random
// magnitudes of either sign: no panic, no hang, an error only for a log
// axis given values at or below zero.
func TestLossCurvesRandomRanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 1))
	for i := range 60 {
		n := 1 + rng.IntN(20)
		vs := make([]float64, n)
		pos := true
		for j := range vs {
			vs[j] = math.Pow(10, float64(rng.IntN(615)-307)) * (1 + rng.Float64())
			if rng.IntN(4) == 0 {
				vs[j] = -vs[j]
			}
			pos = pos && vs[j] > 0
		}
		log := i%2 == 1
		_, err := renderWithin(t, []Run{runOf(vs...)}, LogY(log))
		if (err != nil) != (log && !pos) {
			t.Errorf("values %v, log %v: error %v", vs, log, err)
		}
	}
}

// TestBenchPlotsHugeValues: the benchmark plots of records whose times,
// throughputs and memories reach 1e308 (sums overflow to +Inf) finish in
// bounded time without a panic: drawn, or refused with an error.
func TestBenchPlotsHugeValues(t *testing.T) {
	b := fixtureBench()
	for i := range b.Records {
		r := &b.Records[i]
		if i%2 == 0 {
			r.StepMs, r.TokensPerS = 1e308, 1e308
			r.Memory = MemoryUse{Params: 1e308, Grads: 1e308, Optimizer: 1e308, Activations: 1e308}
			for k := range r.Kernels {
				r.Kernels[k].GBps, r.Kernels[k].CeilingGBps = 1e308, 1e308
			}
		} else {
			r.StepMs = 5e-324
		}
	}
	for name, h := range map[string]func([]BenchRecord, ...Option) (*plot.Plot, error){
		"speedup": SpeedUp, "throughput": Throughput, "memory": Memory, "utilisation": Utilisation, "bandwidth": Bandwidth,
	} {
		done := make(chan error, 1)
		go func() {
			defer func() {
				if r := recover(); r != nil {
					done <- fmt.Errorf("panic: %v", r)
				}
			}()
			p, err := h(b.Records)
			if err == nil {
				err = Save(p, filepath.Join(t.TempDir(), name+".svg"), 0, 0)
				if err != nil {
					err = fmt.Errorf("Save: %w", err)
				}
			}
			done <- err
		}()
		select {
		case err := <-done:
			t.Logf("%s: %v", name, err)
			if err != nil && (strings.HasPrefix(err.Error(), "panic") || strings.HasPrefix(err.Error(), "Save")) {
				t.Errorf("%s: %v", name, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s did not finish within a minute", name)
		}
	}
}
