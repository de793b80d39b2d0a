package plotting

import (
	"math"
	"math/rand/v2"
	"os"
	"testing"
)

// needFont returns the Bengali font path, failing the test with the install
// hint when there is none, or skipping it when DRUTO_SKIP_FONTS=1.
func needFont(t *testing.T) string {
	t.Helper()
	p, err := FindFont()
	if err != nil {
		if os.Getenv("DRUTO_SKIP_FONTS") == "1" {
			t.Skipf("DRUTO_SKIP_FONTS=1: %v", err) // skip: DRUTO_SKIP_FONTS=1 opts out; a missing font fails by default
		}
		t.Fatalf("%v\n(set DRUTO_SKIP_FONTS=1 to skip the Bangla tests)", err)
	}
	return p
}

// fixtureRuns returns two synthetic training runs from a fixed seed: a
// decaying loss with noise, evaluated every 50 steps.
func fixtureRuns() []Run {
	rng := rand.New(rand.NewPCG(7, 11))
	mk := func(label string, floor, rate float64, steps int) Run {
		r := Run{Label: label}
		for s := 1; s <= steps; s++ {
			base := floor + (5.55-floor)*math.Exp(-float64(s)/rate)
			m := Metric{Step: s, Loss: base + 0.12*rng.NormFloat64(), HasLoss: true,
				LR: 6e-4, GradNorm: 1 + 0.2*rng.Float64(), TokensPerS: 9000, MsPerStep: 110, LossScale: 65536}
			if s%50 == 0 {
				m.ValLoss, m.HasValLoss = base+0.05, true
			}
			r.Metrics = append(r.Metrics, m)
		}
		return r
	}
	return []Run{mk("fused+bf16", 1.45, 90, 400), mk("decomposed+fp32", 1.5, 110, 400)}
}

// fixtureBench returns benchmark records shaped like an H200 run of pkg/bench:
// two configs, three modes, a batch sweep for gpt2-124M, utilisation samples
// and kernel micro-benchmarks.
func fixtureBench() Bench {
	b := Bench{Device: "NVIDIA H200", Driver: "570.124", Date: "2026-12-02", Git: "0123abc"}
	modes := []struct {
		name    string
		ms      float64 // gpt2-124M step at B=16
		tinyMs  float64
		actMul  float64
		optimMB float64
	}{
		{"decomposed+fp32", 146, 9.1, 1.0, 1},
		{"fused+fp32", 98, 5.2, 0.8, 1},
		{"fused+bf16", 47.1, 4.4, 0.45, 1},
	}
	const p124 = 124.4e6
	for i, m := range modes {
		for _, bs := range []int{4, 8, 16, 32} {
			ms := m.ms * math.Pow(float64(bs)/16, 0.85)
			r := BenchRecord{Config: "gpt2-124M", Mode: m.name, Baseline: i == 0 && bs == 16,
				Batch: bs, Seq: 1024, StepMs: ms, TokensPerS: float64(bs*1024) / (ms / 1000),
				MFU: 0.12 * (146 / m.ms),
				Memory: MemoryUse{Params: 4 * p124, Grads: 4 * p124, Optimizer: 8 * p124,
					Activations: m.actMul * float64(bs) * 0.9e9}}
			if bs == 16 {
				for k := 0; k < 20; k++ {
					ts := 0.25 * float64(k+1)
					u := 97 - 6*float64(2-i) - 25*math.Exp(-ts*3)
					if k%7 == 3 {
						u -= 8
					}
					r.Util = append(r.Util, UtilSample{TS: ts, GPUUtil: u, MemUsedBytes: 1.2e10})
				}
			}
			if bs == 16 && i == 2 {
				r.Kernels = []Kernel{
					{Name: "layernorm_fwd", Mode: "fused", Ms: 0.021, GBps: 3100, CeilingGBps: 4270},
					{Name: "layernorm_fwd", Mode: "decomposed", Ms: 0.071, GBps: 920, CeilingGBps: 4270},
					{Name: "adamw", Mode: "fused", Ms: 0.41, GBps: 3650, CeilingGBps: 4270},
					{Name: "adamw", Mode: "decomposed", Ms: 2.3, GBps: 650, CeilingGBps: 4270},
					{Name: "softmax_xent", Mode: "fused", Ms: 0.62, GBps: 2800, CeilingGBps: 4270},
					{Name: "softmax_xent", Mode: "decomposed", Ms: 1.9, GBps: 910, CeilingGBps: 4270},
				}
			}
			b.Records = append(b.Records, r)
		}
		t := BenchRecord{Config: "tiny", Mode: m.name, Baseline: i == 0, Batch: 16, Seq: 256,
			StepMs: m.tinyMs, TokensPerS: 16 * 256 / (m.tinyMs / 1000), MFU: 0.05,
			Memory: MemoryUse{Params: 4 * 10.7e6, Grads: 4 * 10.7e6, Optimizer: 8 * 10.7e6, Activations: m.actMul * 0.6e9}}
		b.Records = append(b.Records, t)
	}
	return b
}

// atBaselineBatch returns the records measured at their config's baseline
// batch and sequence length (one per config and mode).
func atBaselineBatch(recs []BenchRecord) []BenchRecord {
	base, _ := baselines(recs)
	var out []BenchRecord
	for _, r := range recs {
		if b := base[r.Config]; r.Batch == b.Batch && r.Seq == b.Seq {
			out = append(out, r)
		}
	}
	return out
}
