package gpt

import (
	"fmt"
	"testing"
	"time"

	"github.com/druto/druto/internal/gputest/gpudev"
	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
)

// BenchmarkGPUDecodeGraph splits a decode token's time on the GPU between
// the device and the host: gpt2-124M (random weights), bf16, batch 1 and 64
// after 16-token prompts; b.N tokens by Next (the positions up, the step's
// graph, the ids down, a wait: what generation does) against b.N replays
// of the same graph back to back with one wait at the end (the device's
// time a token, the host hidden), and b.N replays each waited for (the
// launch and the wait, without the copies), and b.N tokens from fresh
// prompts drawn as the sampler draws them (ahead: Launch keeps the next
// token queued while Collect waits for this one's ids). The replays write
// and attend at the same positions; the graph's work does not depend on
// the values.
func BenchmarkGPUDecodeGraph(b *testing.B) {
	g := gpudev.Fused(b)
	if err := g.DecodeReady(); err != nil {
		b.Fatalf("decode ops: %v", err)
	}
	cfg, err := Preset("gpt2-124M")
	if err != nil {
		b.Fatal(err)
	}
	m, err := NewInference(g, cfg, amp.BF16)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	if err := m.Init(1); err != nil {
		b.Fatal(err)
	}
	for _, B := range []int{1, 64} {
		b.Run(fmt.Sprintf("B%d", B), func(b *testing.B) {
			n := min(b.N, cfg.MaxSeq-32)
			c, err := m.NewKVCache(B)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			greedy := device.Sampling{}
			// prefill puts B 16-token prompts in the cache and draws their
			// first tokens.
			prefill := func() {
				rows := make([]int32, B*device.RowLen)
				for s := range B {
					prompt := make([]int32, 16)
					for i := range prompt {
						prompt[i] = int32((i + 7*s) % cfg.Vocab)
					}
					if err := c.Prefill(s, prompt); err != nil {
						b.Fatal(err)
					}
					rows[s*device.RowLen+device.RowLeft] = 1 << 20
				}
				if err := c.SetRows(rows); err != nil {
					b.Fatal(err)
				}
				if _, err := c.Sample(greedy); err != nil {
					b.Fatal(err)
				}
			}
			prefill()
			for range 3 { // a plain step, the capture, a replay
				if _, err := c.Next(greedy); err != nil {
					b.Fatal(err)
				}
			}
			if c.graph == nil {
				b.Fatalf("no decode graph: %s", c.GraphWhy)
			}
			b.ResetTimer()
			t0 := time.Now()
			for range n {
				if _, err := c.Next(greedy); err != nil {
					b.Fatal(err)
				}
			}
			next := time.Since(t0)
			// replays times n launches of the graph, waiting after each
			// (each) or once at the end.
			replays := func(each bool) time.Duration {
				t0 := time.Now()
				for i := range n {
					if err := c.graph.Launch(); err != nil {
						b.Fatal(err)
					}
					if each || i == n-1 {
						if err := g.Sync(); err != nil {
							b.Fatal(err)
						}
					}
				}
				return time.Since(t0)
			}
			replay, waited := replays(false), replays(true)
			// ahead: n tokens again from fresh prompts, as the sampler
			// draws them, the next draw queued before this one's ids are
			// collected (KVCache.Launch).
			b.StopTimer()
			prefill()
			b.StartTimer()
			t0 = time.Now()
			for done, launched := 0, 0; done < n; done++ {
				for launched < n && c.Ahead() < 2 {
					if err := c.Launch(greedy); err != nil {
						b.Fatal(err)
					}
					launched++
				}
				if _, err := c.Collect(); err != nil {
					b.Fatal(err)
				}
			}
			ahead := time.Since(t0)
			b.StopTimer()
			us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n) }
			b.ReportMetric(us(next), "next-µs/token")
			b.ReportMetric(us(replay), "graph-µs/token")
			b.ReportMetric(us(ahead), "ahead-µs/token")
			b.ReportMetric(float64(B)*1e6/us(ahead), "ahead-tok/s")
			b.ReportMetric(us(waited), "graph+wait-µs/token")
			b.ReportMetric(float64(B)*1e6/us(next), "next-tok/s")
			b.ReportMetric(float64(B)*1e6/us(replay), "graph-tok/s")
		})
	}
}
