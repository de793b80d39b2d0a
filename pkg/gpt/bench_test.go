package gpt

import (
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/tensor"
)

// The tiny preset's batch in the benchmarks below.
const B, T = 8, 128

// tinyBench returns the tiny preset on a CPU device under policy p and a
// random batch, after one step that allocates the activations (outside
// the timing).
func tinyBench(b *testing.B, fused bool, p amp.Policy) (Config, *Model, []int32, []int32) {
	cfg, _ := Preset("tiny")
	m, err := New(cpu.New(device.Options{Fused: fused}), cfg, p)
	if err != nil {
		b.Fatal(err)
	}
	if err := m.Init(1); err != nil {
		b.Fatal(err)
	}
	in, tg := randomTokens(tensor.NewRNG(2), B*T, cfg.Vocab)
	if _, err := m.Gradients(in, tg, B, T, 1); err != nil {
		b.Fatal(err)
	}
	return cfg, m, in, tg
}

// BenchmarkTinyForwardBackward times one forward and backward of the tiny
// preset at B 8, T 128 on the CPU (fused and decomposed), reporting tokens/s
// and GFLOP/s by the 6N + 12·L·C·T formula.
//
//	go test -bench TinyForwardBackward -run XXX ./pkg/gpt
func BenchmarkTinyForwardBackward(b *testing.B) {
	for _, fused := range []bool{true, false} {
		name := "decomposed"
		if fused {
			name = "fused"
		}
		b.Run(name, func(b *testing.B) {
			cfg, m, in, tg := tinyBench(b, fused, amp.FP32)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m.ZeroGrad()
				if _, err := m.Gradients(in, tg, B, T, 1); err != nil {
					b.Fatal(err)
				}
			}
			sec := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(float64(B*T)/sec, "tokens/s")
			b.ReportMetric(cfg.FLOPsPerToken(T)*float64(B*T)/sec/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkTinyPolicies times one forward and backward of the tiny preset at
// B 8, T 128 on the fused CPU device under each precision policy, reporting
// the wall time and the CPU time (all threads) per step: on a machine shared
// with other work the CPU time moves less than the wall clock, so compare
// fp32 and bf16 by it within one run.
//
//	go test -bench TinyPolicies -run XXX ./pkg/gpt
func BenchmarkTinyPolicies(b *testing.B) {
	for _, pol := range []struct {
		name string
		p    amp.Policy
	}{{"fp32", amp.FP32}, {"bf16", amp.BF16}} {
		b.Run(pol.name, func(b *testing.B) {
			_, m, in, tg := tinyBench(b, true, pol.p)
			b.ResetTimer()
			cpu0 := benchCPUTime()
			for i := 0; i < b.N; i++ {
				m.ZeroGrad()
				if _, err := m.Gradients(in, tg, B, T, 1); err != nil {
					b.Fatal(err)
				}
			}
			if cpu := benchCPUTime() - cpu0; cpu > 0 {
				b.ReportMetric(cpu.Seconds()*1e3/float64(b.N), "cpu-ms/op")
			}
			b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N), "ms/op")
		})
	}
}
