package bench

import (
	"testing"
	"time"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/train"
)

func TestTmpSampleTiny(t *testing.T) {
	cfg, _ := gpt.Preset("tiny")
	c := Case{Name: "tiny", Config: cfg, Batch: 1, Seq: 16}
	m := Mode{Fused: true, Policy: amp.FP32}
	dev := cpu.New(device.Options{Fused: true, Threads: 2})
	model, _ := gpt.NewInference(dev, cfg, amp.FP32)
	model.Init(1)
	s, _ := train.NewSampler(model, train.Unmasked(cfg.Vocab), train.SampleOptions{})
	prompt := make([]int32, 16)
	for i := range 6 {
		r, err := Sample(dev, c, m, 128, 10, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		r2, _ := Sample(dev, c, m, 100, 10, 0, nil)
		st := time.Now()
		s.Generate(prompt, 100, nil)
		t.Logf("%d: Sample(128) decode %.0f tok/s prefill %.2f ms | Sample(100) %.0f | Generate(100) %.0f tok/s wall %v", i, r.DecodeTokS, r.PrefillMs, r2.DecodeTokS, s.Stats().DecodeRate(), time.Since(st))
	}
}
