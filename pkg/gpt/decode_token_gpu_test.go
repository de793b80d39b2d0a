package gpt

import (
	"slices"
	"testing"

	"github.com/druto/druto/internal/gputest/gpudev"
	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/device/gpu"
)

// TestGPUDecodeToken: one sequence decoded with its blocks as one kernel
// (device.TokenDecoder, DRUTO_DECODE_TOKEN) gives, at every step, the
// logits of the CPU's cache within device.LogitsClose (a small model, the
// cached positions in shared memory and, at cap=16, past it: read from the
// cache), and those of the GPU's ops one by one at GPT-2's width (12
// heads of 64, a 1024-position cache); one graph launch a token.
func TestGPUDecodeToken(t *testing.T) {
	g := gpudev.Fused(t)
	if err := g.DecodeReady(); err != nil {
		t.Fatalf("decode ops: %v", err)
	}
	type run struct {
		m *Model
		c *KVCache
	}
	open := func(d device.Device, cfg Config, params []float32, p amp.Policy, env string, prompt []int32) run {
		t.Setenv(gpu.TokenEnv, env)
		m, err := New(d, cfg, p)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.SetParams(params); err != nil {
			t.Fatal(err)
		}
		c, err := m.NewKVCache(1)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Prefill(0, prompt); err != nil {
			t.Fatal(err)
		}
		rows := make([]int32, device.RowLen)
		rows[device.RowLeft] = 1 << 20
		if err := c.SetRows(rows); err != nil {
			t.Fatal(err)
		}
		return run{m, c}
	}
	compare := func(name string, got, want run, p amp.Policy, steps int) {
		t.Helper()
		if got.c.tok == nil {
			t.Fatalf("%s: the cache does not use decode_token", name)
		}
		if want.c.tok != nil {
			t.Fatalf("%s: the reference uses decode_token too", name)
		}
		dt := p.DType(amp.Activation)
		greedy := device.Sampling{}
		gIDs, err := got.c.Sample(greedy)
		if err != nil {
			t.Fatal(err)
		}
		wIDs, err := want.c.Sample(greedy)
		if err != nil {
			t.Fatal(err)
		}
		for step := range steps {
			gl, err := got.c.Logits()
			if err != nil {
				t.Fatal(err)
			}
			wl, err := want.c.Logits()
			if err != nil {
				t.Fatal(err)
			}
			if err := device.LogitsClose(gl, wl, dt); err != nil {
				t.Fatalf("%s %s step %d (position %d): logits: %v", name, p, step, got.c.Len(0), err)
			}
			if !slices.Equal(gIDs, wIDs) {
				t.Logf("%s %s: the tokens part at step %d (a 16-bit near tie): %v, %v", name, p, step, gIDs, wIDs)
				break
			}
			before := g.Launches()
			if gIDs, err = got.c.Next(greedy); err != nil {
				t.Fatal(err)
			}
			if n := g.Launches() - before; step > 0 && n != 1 {
				t.Errorf("%s %s step %d: %d launches for a token, want 1 (the graph)", name, p, step, n)
			}
			if wIDs, err = want.c.Next(greedy); err != nil {
				t.Fatal(err)
			}
		}
		if got.c.GraphWhy != "" {
			t.Errorf("%s %s: no graph: %s", name, p, got.c.GraphWhy)
		}
	}
	closeAll := func(rs ...run) {
		for _, r := range rs {
			r.c.Close()
			r.m.Close()
		}
	}
	small := Config{Vocab: 300, MaxSeq: 64, Layers: 2, Heads: 2, Channels: 128}
	params := InitParams(small, 6)
	for i := range params {
		params[i] *= 3 // logits spread out: greedy choices far from ties
	}
	prompt := []int32{9, 8, 7, 6, 5, 4, 3, 2}
	for _, p := range []amp.Policy{amp.BF16, amp.FP16} {
		for _, env := range []string{"on", "cap=16"} {
			got := open(g, small, params, p, env, prompt)
			want := open(cpu.New(device.Options{Fused: true, Threads: 2}), small, params, p, "off", prompt)
			compare("small "+env, got, want, p, 50)
			closeAll(got, want)
		}
	}
	wide := Config{Vocab: 1000, MaxSeq: 1024, Layers: 3, Heads: 12, Channels: 768}
	wparams := InitParams(wide, 7)
	long := make([]int32, 600) // past what shared memory holds of a head's cache (cap)
	for i := range long {
		long[i] = int32(i*7) % 1000
	}
	for _, p := range []amp.Policy{amp.BF16, amp.FP16} {
		for _, pr := range [][]int32{{1, 2, 3}, long} {
			got := open(g, wide, wparams, p, "on", pr)
			want := open(g, wide, wparams, p, "off", pr)
			compare("gpt2-wide", got, want, p, 20)
			closeAll(got, want)
		}
	}
}
