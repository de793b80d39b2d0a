package gpt

import (
	"slices"
	"testing"

	"github.com/druto/druto/internal/gputest/gpudev"
	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
)

// TestGPUDecode: on the GPU, for every policy, decoding over the cache
// (prefill, then Next: the step and the draw as one graph) gives the logits
// of the CPU's cache within device.LogitsClose at every step, greedy tokens
// equal to the CPU's in fp32 (16-bit runs are compared until a near tie
// parts them), and one graph launch per token after the capture.
func TestGPUDecode(t *testing.T) {
	g := gpudev.Fused(t)
	if err := g.DecodeReady(); err != nil {
		t.Fatalf("decode ops: %v", err)
	}
	cfg := Config{Vocab: 300, MaxSeq: 64, Layers: 2, Heads: 2, Channels: 128}
	params := InitParams(cfg, 6)
	for i := range params {
		params[i] *= 3 // logits spread out: greedy choices far from ties
	}
	for _, p := range []amp.Policy{amp.FP32, amp.BF16, amp.FP16} {
		open := func(d device.Device) (*Model, *KVCache) {
			m, err := New(d, cfg, p)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.SetParams(params); err != nil {
				t.Fatal(err)
			}
			c, err := m.NewKVCache(3)
			if err != nil {
				t.Fatal(err)
			}
			for b, pr := range [][]int32{{1, 2, 3}, {7}, {9, 8, 7, 6, 5, 4, 3, 2}} {
				if err := c.Prefill(b, pr); err != nil {
					t.Fatal(err)
				}
			}
			rows := make([]int32, 3*device.RowLen)
			for b := range 3 {
				rows[b*device.RowLen+device.RowLeft] = 1000
			}
			if err := c.SetRows(rows); err != nil {
				t.Fatal(err)
			}
			return m, c
		}
		gm, gc := open(g)
		cm, cc := open(cpu.New(device.Options{Fused: true, Threads: 2}))
		dt := p.DType(amp.Activation)
		greedy := device.Sampling{}
		gIDs, err := gc.Sample(greedy)
		if err != nil {
			t.Fatal(err)
		}
		cIDs, err := cc.Sample(greedy)
		if err != nil {
			t.Fatal(err)
		}
		for step := range 40 {
			gl, err := gc.Logits()
			if err != nil {
				t.Fatal(err)
			}
			cl, err := cc.Logits()
			if err != nil {
				t.Fatal(err)
			}
			if err := device.LogitsClose(gl, cl, dt); err != nil {
				t.Fatalf("%s step %d: logits: %v", p, step, err)
			}
			if !slices.Equal(gIDs, cIDs) {
				if p == amp.FP32 {
					t.Fatalf("%s step %d: GPU drew %v, CPU %v", p, step, gIDs, cIDs)
				}
				t.Logf("%s: the GPU's and the CPU's tokens part at step %d (a 16-bit near tie): %v, %v", p, step, gIDs, cIDs)
				break
			}
			before := g.Launches()
			if gIDs, err = gc.Next(greedy); err != nil {
				t.Fatal(err)
			}
			if n := g.Launches() - before; step > 0 && n != 1 {
				t.Errorf("%s step %d: %d launches for a token, want 1 (the graph)", p, step, n)
			}
			if cIDs, err = cc.Next(greedy); err != nil {
				t.Fatal(err)
			}
		}
		if gc.GraphWhy != "" {
			t.Errorf("%s: no graph: %s", p, gc.GraphWhy)
		}
		gc.Close()
		cc.Close()
		gm.Close()
		cm.Close()
	}
}
