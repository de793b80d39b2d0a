package train

import (
	"context"
	"github.com/druto/druto/internal/cputime"
	"runtime/pprof"
	"sort"
	"testing"
	"time"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/data"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/optim"
)

// BenchmarkTrainStepTiny times whole training steps (data, forward,
// backward, grad norm, clipping, AdamW) of the tiny preset at B 8, T 128 on
// the CPU and reports the median step in ms, per precision policy.
//
//	go test -bench TrainStepTiny -run XXX -benchtime 30x ./pkg/train
func BenchmarkTrainStepTiny(b *testing.B) {
	for _, p := range []amp.Policy{amp.FP32, amp.BF16, amp.FP16} {
		b.Run(p.String(), func(b *testing.B) {
			cfg, _ := gpt.Preset("tiny")
			toks, err := data.Encode(data.Corpus(1, 1<<20))
			if err != nil {
				b.Fatal(err)
			}
			o := Options{Config: cfg, Policy: p, Batch: 8, Seq: 128, Optim: optim.Defaults(1 << 20), Seed: 1}
			tr, err := New(cpu.New(device.Options{Fused: true}), o, toks, nil)
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < 3; i++ { // warm-up
				if _, err := tr.Step(); err != nil {
					b.Fatal(err)
				}
			}
			times := make([]float64, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				if _, err := tr.Step(); err != nil {
					b.Fatal(err)
				}
				times = append(times, float64(time.Since(start).Microseconds())/1000)
			}
			sort.Float64s(times)
			b.ReportMetric(times[len(times)/2], "median-ms/step")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkTrainStepBF16VsFP32 times whole training steps of the tiny
// preset (B 8, T 128, fused CPU device) under fp32 and bf16, interleaved
// step by step so that both see the same load from other processes, and
// reports the median wall time of each, their ratio (issue 20: bf16 ≤
// fp32), the ratio of their 10th percentiles and the ratio of their CPU time (all threads), which moves less
// on a machine shared with other work. Each policy's steps carry a pprof label:
//
//	go test -bench TrainStepBF16VsFP32 -run XXX -benchtime 40x -cpuprofile cpu.prof ./pkg/train
//	go tool pprof -tagfocus policy=bf16 -top cpu.prof
func BenchmarkTrainStepBF16VsFP32(b *testing.B) {
	cfg, _ := gpt.Preset("tiny")
	toks, err := data.Encode(data.Corpus(1, 1<<20))
	if err != nil {
		b.Fatal(err)
	}
	pols := []amp.Policy{amp.FP32, amp.BF16}
	trs := make([]*Trainer, len(pols))
	for i, p := range pols {
		o := Options{Config: cfg, Policy: p, Batch: 8, Seq: 128, Optim: optim.Defaults(1 << 20), Seed: 1}
		if trs[i], err = New(cpu.New(device.Options{Fused: true}), o, toks, nil); err != nil {
			b.Fatal(err)
		}
		for range 3 { // warm-up
			if _, err := trs[i].Step(); err != nil {
				b.Fatal(err)
			}
		}
	}
	times := make([][]float64, len(pols))
	cpu := make([]time.Duration, len(pols))
	for b.Loop() {
		for i, p := range pols {
			c0 := cputime.Now()
			start := time.Now()
			pprof.Do(context.Background(), pprof.Labels("policy", p.String()), func(context.Context) {
				if _, err := trs[i].Step(); err != nil {
					b.Fatal(err)
				}
			})
			times[i] = append(times[i], float64(time.Since(start).Microseconds())/1000)
			cpu[i] += cputime.Now() - c0
		}
	}
	med := make([]float64, len(pols))
	for i, p := range pols {
		sort.Float64s(times[i])
		med[i] = times[i][len(times[i])/2]
		b.ReportMetric(med[i], p.String()+"-ms/step")
	}
	b.ReportMetric(med[1]/med[0], "bf16/fp32")
	// The fastest tenth: the least disturbed by other processes.
	p10 := func(i int) float64 { return times[i][len(times[i])/10] }
	b.ReportMetric(p10(1)/p10(0), "bf16/fp32-p10")
	if cpu[0] > 0 {
		b.ReportMetric(cpu[1].Seconds()/cpu[0].Seconds(), "bf16/fp32-cpu")
	}
	b.ReportMetric(0, "ns/op")
}
