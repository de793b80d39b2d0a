package record

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseResults reads bench results files of any bytes: ParseResults
// refuses them with an error, or returns at least one record, each that
// passes Check, and one baseline for each config with step times. Classify
// never panics on them. Seeds: the committed bench/results files.
func FuzzParseResults(f *testing.F) {
	seeds, _ := filepath.Glob("../../bench/results/*.json")
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		if len(b) < 64<<10 {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"records":[{"config":"tiny","mode":"fused","baseline":true,"step_ms":1e308}]}`))
	f.Add([]byte(`{"records":[{"config":"tiny","mode":"k","kernels":[{"name":"ln","mode":"fused","ms":1,"gbps":2}]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = Classify(b)
		res, err := ParseResults(bytes.NewReader(b))
		if err != nil {
			return
		}
		if len(res.Records) == 0 {
			t.Fatal("accepted with no records")
		}
		for i, r := range res.Records {
			if err := r.Check(); err != nil {
				t.Fatalf("record %d accepted with %v", i, err)
			}
		}
		steps := StepResults(res.Records)
		base, err := Baselines(steps)
		if err != nil {
			t.Fatalf("accepted with %v", err)
		}
		for _, r := range steps {
			if !base[r.Config].Baseline {
				t.Fatalf("config %q accepted without its baseline", r.Config)
			}
		}
	})
}

// FuzzMetricLine reads metrics lines of any bytes: a line Metric reads is
// written again as valid JSON that reads back to the same Metric (NaN for
// NaN), and ParsePoints reads or refuses it without a panic.
func FuzzMetricLine(f *testing.F) {
	for _, s := range []string{
		`{"step":1,"loss":5.54,"lr":0.0006,"grad_norm":1.2,"tokens_per_s":9000,"ms_per_step":110,"loss_scale":65536,"skipped_steps":0,"val_loss":5.1}`,
		`{"step":3,"loss":null,"skipped":true,"skipped_steps":2}`,
		`{"step":3,"loss":2,"skipped":4}`,
		`{"event":"sample","step":3}`,
		`{"step":1,"loss":1e308}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ParsePoints(bytes.NewReader(b))
		var m Metric
		if json.Unmarshal(b, &m) != nil {
			return
		}
		out, err := json.Marshal(m)
		if err != nil || !json.Valid(out) {
			t.Fatalf("%+v written as %s: %v", m, out, err)
		}
		var back Metric
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("%s does not read back: %v", out, err)
		}
		if !sameMetric(m, back) {
			t.Fatalf("%+v read back as %+v (line %s)", m, back, out)
		}
	})
}

// sameMetric compares two metrics, a NaN or infinite value equal to any
// other that is not finite (both are written as null).
func sameMetric(a, b Metric) bool {
	eq := func(x, y float64) bool {
		fx, fy := !math.IsNaN(x) && !math.IsInf(x, 0), !math.IsNaN(y) && !math.IsInf(y, 0)
		return (!fx && !fy) || x == y
	}
	return a.Step == b.Step && eq(float64(a.Loss), float64(b.Loss)) && eq(float64(a.LR), float64(b.LR)) &&
		eq(float64(a.GradNorm), float64(b.GradNorm)) && eq(a.TokensPerS, b.TokensPerS) && eq(a.MsPerStep, b.MsPerStep) &&
		eq(float64(a.LossScale), float64(b.LossScale)) && a.StepSkipped == b.StepSkipped && a.Skipped == b.Skipped &&
		eq(float64(a.ValLoss), float64(b.ValLoss)) && a.Sample == b.Sample
}
