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

// TestGPUDecodeTokenTrace profiles decode_token's chain at gpt2-124M (bf16,
// random weights, a 16-token prompt, 16 tokens): the marks of its first
// worker and first head block (kernels/decode_token.cu, dt_mark), as the
// µs of each phase averaged over the layers, logged. It checks that every
// mark was recorded and that each block's marks run forward in time.
func TestGPUDecodeTokenTrace(t *testing.T) {
	g := gpudev.Fused(t)
	t.Setenv(gpu.TokenEnv, "on")
	t.Setenv(gpu.TokenTraceEnv, "1")
	cfg, err := Preset("gpt2-124M")
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewInference(g, cfg, amp.BF16)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Init(1); err != nil {
		t.Fatal(err)
	}
	c, err := m.NewKVCache(1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.tok == nil {
		t.Fatal("the cache does not use decode_token")
	}
	prompt := make([]int32, 16)
	for i := range prompt {
		prompt[i] = int32(i * 11)
	}
	if err := c.Prefill(0, prompt); err != nil {
		t.Fatal(err)
	}
	rows := make([]int32, device.RowLen)
	rows[device.RowLeft] = 1 << 20
	if err := c.SetRows(rows); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sample(device.Sampling{}); err != nil {
		t.Fatal(err)
	}
	for range 16 {
		if _, err := c.Next(device.Sampling{}); err != nil {
			t.Fatal(err)
		}
	}
	L := cfg.Layers
	tr, err := g.TokenTrace(L)
	if err != nil {
		t.Fatal(err)
	}
	const marks = 16
	// The worker's marks 0..12 and the head's 13..15, each block's in order.
	names := []string{"wait x", "load x", "ln1", "weights", "qkv matvec", "qkv store", "wait heads", "x2", "ln2+weights",
		"fc matvec+store", "wait h", "load h+weights", "fcproj matvec+store"}
	for l := range L {
		row := tr[l*marks : (l+1)*marks]
		for k := range marks {
			if row[k] == 0 {
				t.Fatalf("layer %d mark %d not recorded", l, k)
			}
		}
		for k := 1; k <= 12; k++ {
			if row[k] < row[k-1] {
				t.Errorf("layer %d: worker mark %d (%d) before mark %d (%d)", l, k, row[k], k-1, row[k-1])
			}
		}
		if row[14] < row[13] || row[15] < row[14] {
			t.Errorf("layer %d: head marks out of order: %v", l, row[13:16])
		}
	}
	avg := func(from, to func(l int) uint64) float64 {
		s := 0.0
		for l := 1; l < L; l++ {
			s += float64(int64(to(l)) - int64(from(l)))
		}
		return s / float64(L-1) / 1000
	}
	at := func(k int) func(l int) uint64 { return func(l int) uint64 { return tr[l*marks+k] } }
	for k := 1; k <= 12; k++ {
		t.Logf("worker %-20s %6.2f µs", names[k], avg(at(k-1), at(k)))
	}
	t.Logf("head   qkv stored → wait done %6.2f µs (worker 0's store to head 0's wait)", avg(at(5), at(13)))
	t.Logf("head   attention              %6.2f µs", avg(at(13), at(14)))
	t.Logf("head   projection share        %6.2f µs", avg(at(14), at(15)))
	t.Logf("head   arrive → worker's wait  %6.2f µs", avg(at(15), at(6)))
	t.Logf("layer  (worker mark 0 to the next layer's) %6.2f µs", avg(func(l int) uint64 { return tr[(l-1)*marks] }, at(0)))
	t.Logf("token  (layer 0's mark 0 to the last layer's mark 12) %6.2f µs", float64(tr[(L-1)*marks+12]-tr[0])/1000)
}
