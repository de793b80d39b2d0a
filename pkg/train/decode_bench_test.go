package train

import (
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/gpt"
)

// BenchmarkDecode: greedy generation over the key/value cache, tokens per
// second of the decode phase (b.N tokens after a 16-token prompt), per
// preset, on the CPU with 2 threads.
func BenchmarkDecode(b *testing.B) {
	for _, name := range []string{"tiny", "small", "gpt2-124M"} {
		b.Run(name, func(b *testing.B) {
			cfg, _ := gpt.Preset(name)
			m, err := gpt.New(cpu.New(device.Options{Fused: true, Threads: 2}), cfg, amp.FP32)
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			if err := m.Init(1); err != nil {
				b.Fatal(err)
			}
			s, err := NewSampler(m, allTokens(cfg.Vocab), SampleOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			prompt := make([]int32, 16)
			n := min(b.N+1, cfg.MaxSeq-16)
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; done += n - 1 {
				if _, err := s.Generate(prompt, n, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(s.Stats().DecodeRate(), "tokens/s")
		})
	}
}
