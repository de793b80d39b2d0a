package gpu

import (
	"context"
	"math"
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/data"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/optim"
	"github.com/druto/druto/pkg/train"
)

// TestGPUGraphChunkedHead: a one-layer model with GPT-2's vocabulary at
// B 3 T 1024 under bf16 runs its LM head in two chunks (2048 rows and a
// 1024-row tail, gpt.HeadRows); 6 steps captured once as a CUDA graph and
// replayed give the losses, norms and parameters of the same steps
// launched one by one, bit for bit; and the measured peak memory stays
// within 256 MiB of what gpt.MemoryOn counts.
func TestGPUGraphChunkedHead(t *testing.T) {
	t.Setenv(gpt.HeadRowsEnv, "") // the rule, not an override
	const B, T, n = 3, 1024, 6
	// T 1024 spans several key tiles: bit-identity needs flash variant 2's
	// backward (its dq pass has no atomics), which runs wherever it is built.
	d := gpuDev(t, true)
	ownAttention(t, d)
	cfg := gpt.Config{Vocab: 50304, MaxSeq: 1024, Layers: 1, Heads: 12, Channels: 768}
	if r := gpt.HeadRows(cfg.Vocab, B*T, amp.BF16.Half(), true); r != 2048 {
		t.Fatalf("HeadRows = %d, want 2048 (the test needs two chunks)", r)
	}
	toks, err := data.Encode(data.Corpus(1, 256<<10))
	if err != nil {
		t.Fatal(err)
	}
	run := func(mode train.StepMode) ([]train.Metric, []float32, string, int64) {
		d.ResetMemoryPeak()
		base := d.MemoryPeak()
		oc := optim.Defaults(n)
		oc.Warmup = 2
		o := train.Options{Config: cfg, Policy: amp.BF16, Batch: B, Seq: T, Optim: oc, Seed: 3, Step: mode, LogEvery: n}
		tr, err := train.New(d, o, toks, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		var ms []train.Metric
		if err := tr.Run(context.Background(), n, func(m train.Metric) { ms = append(ms, m) }); err != nil {
			t.Fatal(err)
		}
		p, err := tr.Model.Params()
		if err != nil {
			t.Fatal(err)
		}
		return ms, p, tr.GraphStatus(), d.MemoryPeak() - base
	}
	gm, gp, status, peak := run(train.StepGraph)
	pm, pp, _, _ := run(train.StepDevice)
	if status != "graph" || len(gm) != n || len(pm) != n {
		t.Fatalf("graph run: status %q, %d and %d metrics", status, len(gm), len(pm))
	}
	for i := range gm {
		if math.Float32bits(gm[i].Loss) != math.Float32bits(pm[i].Loss) || math.Float32bits(gm[i].GradNorm) != math.Float32bits(pm[i].GradNorm) {
			t.Fatalf("step %d: graph loss %v norm %v, plain %v %v: not bit-identical", i+1, gm[i].Loss, gm[i].GradNorm, pm[i].Loss, pm[i].GradNorm)
		}
		if math.IsNaN(float64(gm[i].Loss)) || math.IsInf(float64(gm[i].Loss), 0) {
			t.Fatalf("step %d: loss %v", i+1, gm[i].Loss)
		}
	}
	for i := range gp {
		if math.Float32bits(gp[i]) != math.Float32bits(pp[i]) {
			t.Fatalf("parameter %d after %d steps: graph %v, plain %v", i, n, gp[i], pp[i])
		}
	}
	mem := gpt.MemoryOn(d, cfg, B, T, amp.BF16)
	t.Logf("RESULT graph chunked head gpt2-1layer bf16 B%d_T%d: %d steps bit-identical, loss %.4f -> %.4f; peak %.1f MiB, counted %.1f MiB",
		B, T, n, gm[0].Loss, gm[n-1].Loss, float64(peak)/(1<<20), float64(mem.Total())/(1<<20))
	if peak < mem.Total() || peak > mem.Total()+256<<20 {
		t.Errorf("measured peak %d bytes, MemoryOn counts %d", peak, mem.Total())
	}
}
