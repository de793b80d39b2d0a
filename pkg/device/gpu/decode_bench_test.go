package gpu

import (
	"fmt"
	"testing"
	"time"

	"github.com/druto/druto/internal/gputest"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// BenchmarkGPUDecodeOps: each op of a gpt2-124M decode step (bf16, the
// fused device) at batch 1, 16 and 64, captured 24 times into one CUDA graph
// and replayed: µs an op, without launch overhead, as the decode graph runs
// them (the attention over 200 cached positions of 1024). Each call of an
// op takes the weights and cache of the next of 12 layers, so that, as in
// the decode step, they come from device memory and not from the L2 cache
// a replay of one layer's would leave them in. "step" is the sum a step
// makes of them: 12 layers of the block's ops, then the head.
func BenchmarkGPUDecodeOps(b *testing.B) {
	fx.once.Do(fx.setup)
	if fx.err != nil {
		gputest.Skip(b, fx.err)
	}
	d := fx.fused
	const C, NH, S, V, L, reps = 768, 12, 1024, 50304, 12, 24
	dt := tensor.BF16
	for _, B := range []int{1, 16, 64} {
		alloc := func(dt tensor.DType, shape ...int) *tensor.Tensor {
			t, err := d.Alloc(dt, shape...)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { d.Free(t) })
			return t
		}
		x, ln, res := alloc(tensor.F32, B, C), alloc(dt, B, C), alloc(tensor.F32, B, C)
		mean, rstd := alloc(tensor.F32, B), alloc(tensor.F32, B)
		lnw, lnb := alloc(dt, C), alloc(dt, C)
		qkv, atty, proj := alloc(dt, B, 3*C), alloc(dt, B, C), alloc(dt, B, C)
		fch, fchG := alloc(dt, B, 4*C), alloc(dt, B, 4*C)
		// a layer's weights and cache, 12 of each
		type layer struct{ wqkv, bqkv, wproj, bproj, wfc, bfc, wfp, bfp, kc, vc *tensor.Tensor }
		ls := make([]layer, L)
		for i := range ls {
			ls[i] = layer{alloc(dt, 3*C, C), alloc(dt, 3*C), alloc(dt, C, C), alloc(dt, C), alloc(dt, 4*C, C), alloc(dt, 4*C),
				alloc(dt, C, 4*C), alloc(dt, C), alloc(dt, B, NH, S, C/NH), alloc(dt, B, NH, S, C/NH)}
		}
		wte, logits := alloc(dt, V, C), alloc(dt, B, V)
		pos, ids := alloc(tensor.I32, B), alloc(tensor.I32, B)
		table, rows := alloc(tensor.I32, 1, V), alloc(tensor.I32, B, device.RowLen)
		hp := make([]int32, B)
		for i := range hp {
			hp[i] = 200
		}
		hpos, _ := tensor.FromI32(hp, B)
		d.Upload(pos, hpos)
		hr := make([]int32, B*device.RowLen)
		for i := range B {
			hr[i*device.RowLen+device.RowLeft] = 1 << 20
		}
		hrows, _ := tensor.FromI32(hr, B, device.RowLen)
		d.Upload(rows, hrows)
		if err := d.Sync(); err != nil {
			b.Fatal(err)
		}
		ops := []struct {
			name  string
			times int // a step's count
			fn    func(l layer)
		}{
			{"qkv", L, func(l layer) { d.Matmul(qkv, nil, ln, l.wqkv, l.bqkv, B, C, 3*C, device.None) }},
			// prefill's append (a decode step's is attention's; not added)
			{"kv_append", 0, func(l layer) { d.KVAppend(l.kc, l.vc, qkv, pos, B, 1, C, NH, S) }},
			{"attention", L, func(l layer) { d.AttentionDecode(atty, qkv, l.kc, l.vc, pos, B, C, NH, S) }},
			{"attn_proj", L, func(l layer) { d.Matmul(proj, nil, atty, l.wproj, l.bproj, B, C, C, device.None) }},
			{"residual_ln", 2 * L, func(layer) { d.ResidualLayerNorm(res, ln, mean, rstd, x, proj, lnw, lnb, B, C) }},
			{"fc_gelu", L, func(l layer) { d.Matmul(fchG, fch, ln, l.wfc, l.bfc, B, C, 4*C, device.GELU) }},
			{"fc_proj", L, func(l layer) { d.Matmul(proj, nil, fchG, l.wfp, l.bfp, B, 4*C, C, device.None) }},
			{"head_sample", 1, func(layer) { d.SampleHead(ids, logits, ln, wte, table, rows, B, C, V, 1, device.Sampling{}) }},
			// the head's product alone (a part of head_sample, not added again)
			{"head_matmul", 0, func(layer) { d.Matmul(logits, nil, ln, wte, nil, B, C, V, device.None) }},
		}
		// The attention also at 1 to 16 blocks a (b, h) pair ("/xN", attX)
		// in place of decSlots' choice (not added into the step).
		type variant struct {
			suffix string
			attX   int
		}
		variants := func(name string) []variant {
			vs := []variant{{}}
			if name == "attention" {
				for _, x := range []int{1, 2, 4, 8, 16} {
					vs = append(vs, variant{suffix: fmt.Sprintf("/x%d", x), attX: x})
				}
			}
			return vs
		}
		var step float64
		for _, op := range ops {
			for _, v := range variants(op.name) {
				b.Run(fmt.Sprintf("B%d/%s%s", B, op.name, v.suffix), func(b *testing.B) {
					// the device's own choice for the op as the step runs it,
					// or the variant's grid; the device's setting restored
					// after, for the ops after it
					d.attX = v.attX
					defer func() { d.attX = 0 }()
					us := decodeOpTime(b, d, func(i int) { op.fn(ls[i%L]) }, reps)
					if v.suffix == "" {
						step += us * float64(op.times)
					}
				})
			}
		}
		b.Logf("B %d: a step's ops add up to %.1f µs (%.0f tokens/s)", B, step, float64(B)*1e6/step)
	}
}

// decodeOpTime captures reps calls of fn (fn(i), i = 0..reps-1) into one
// graph, replays it for the benchmark's loop and reports and returns µs a
// call.
func decodeOpTime(b *testing.B, d *Device, fn func(i int), reps int) float64 {
	// One plain run first: an op's scratch and its GEMM algorithm are set
	// up outside a capture.
	fn(0)
	if err := d.Sync(); err != nil {
		b.Fatal(err)
	}
	g, err := d.Capture(func() error {
		for i := range reps {
			fn(i)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	start := time.Now()
	n := 0
	for b.Loop() {
		if err := g.Launch(); err != nil {
			b.Fatal(err)
		}
		n++
	}
	if err := d.Sync(); err != nil {
		b.Fatal(err)
	}
	us := float64(time.Since(start).Microseconds()) / float64(n*reps)
	b.ReportMetric(us, "µs/op")
	return us
}
