package gpt

import (
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/tensor"
)

// BenchmarkRecompute times one forward and backward of the tiny preset at
// B 8, T 128 on the CPU (fused, fp32) at each recomputation level,
// reporting tokens/s, the activation MiB the level keeps and the FLOPs it
// adds (percent of a step's), so that its time cost can be read against
// both.
//
//	go test -bench Recompute -run XXX ./pkg/gpt
func BenchmarkRecompute(b *testing.B) {
	cfg, _ := Preset("tiny")
	for _, r := range RecomputeLevels {
		b.Run(r.String(), func(b *testing.B) {
			m, err := New(cpu.New(device.Options{Fused: true}), cfg, amp.FP32)
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			if err := m.SetRecompute(r); err != nil {
				b.Fatal(err)
			}
			if err := m.Init(1); err != nil {
				b.Fatal(err)
			}
			in, tg := randomTokens(tensor.NewRNG(2), B*T, cfg.Vocab)
			if _, err := m.Gradients(in, tg, B, T, 1); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m.ZeroGrad()
				if _, err := m.Gradients(in, tg, B, T, 1); err != nil {
					b.Fatal(err)
				}
			}
			sec := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(float64(B*T)/sec, "tokens/s")
			b.ReportMetric(float64(MemoryFor(cfg, B, T, amp.FP32, r).Activations)/(1<<20), "act-MiB")
			b.ReportMetric(100*cfg.RecomputeFLOPsPerToken(T, r)/cfg.FLOPsPerToken(T), "%FLOPs-added")
		})
	}
}
