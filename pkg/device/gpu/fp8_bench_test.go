package gpu

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/druto/druto/internal/testreq"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/tensor"
)

// fp8Producer is one FP8 producer of the training step at GPT-2 124M's
// B16 T1024 shapes, for BenchmarkGPUFP8Producers.
type fp8Producer struct {
	name  string
	dt    tensor.DType // x's dtype (the residual stream is f32 for the layernorm)
	f     tensor.DType // q's: F8E4M3 or F8E5M2
	N, C  int
	bytes int // bytes an element read and written
	ln    bool
	run   func(g *Device, t *fp8BenchTensors)
}

// fp8BenchTensors are a producer's operands on the device.
type fp8BenchTensors struct {
	x, pre, res, b, q, qt, amax, mean, rstd, w, bias, dbias, scale *tensor.Tensor
}

// fp8Producers: the layernorm → e4m3 with the residual add (qkv's and
// fc's input), the attention output's cast, the GELU's, the output
// gradients' (fp32 dresidual of the projections, bf16 dqkv), and the
// fc layer's through the GELU backward.
var fp8Producers = []fp8Producer{
	{name: "residual_layernorm_fp8/f32+bf16", dt: tensor.BF16, f: tensor.F8E4M3, N: 16384, C: 768, bytes: 4 + 2 + 4 + 2, ln: true,
		run: func(g *Device, t *fp8BenchTensors) {
			g.ResidualLayerNormFP8(t.res, t.q, t.qt, t.amax, t.mean, t.rstd, t.pre, t.b, t.w, t.bias, t.scale, 16384, 768)
		}},
	{name: "cast_transpose_e4m3/bf16", dt: tensor.BF16, f: tensor.F8E4M3, N: 16384, C: 768, bytes: 2 + 2,
		run: func(g *Device, t *fp8BenchTensors) { g.CastTransposeFP8(t.q, t.qt, t.amax, t.x, t.scale, 16384, 768) }},
	{name: "gelu_cast_transpose_e4m3/bf16", dt: tensor.BF16, f: tensor.F8E4M3, N: 16384, C: 3072, bytes: 2 + 2,
		run: func(g *Device, t *fp8BenchTensors) {
			g.GELUCastTransposeFP8(t.q, t.qt, t.amax, t.x, t.scale, 16384, 3072)
		}},
	{name: "cast_transpose_dbias_e5m2/f32", dt: tensor.F32, f: tensor.F8E5M2, N: 16384, C: 768, bytes: 4 + 2,
		run: func(g *Device, t *fp8BenchTensors) {
			g.CastTransposeDBiasFP8(t.q, t.qt, t.amax, t.dbias, t.x, t.scale, 16384, 768)
		}},
	{name: "cast_transpose_dbias_e5m2/bf16", dt: tensor.BF16, f: tensor.F8E5M2, N: 16384, C: 2304, bytes: 2 + 2,
		run: func(g *Device, t *fp8BenchTensors) {
			g.CastTransposeDBiasFP8(t.q, t.qt, t.amax, t.dbias, t.x, t.scale, 16384, 2304)
		}},
	{name: "dgelu_cast_transpose_dbias_e5m2/bf16", dt: tensor.BF16, f: tensor.F8E5M2, N: 16384, C: 3072, bytes: 2 + 2 + 2,
		run: func(g *Device, t *fp8BenchTensors) {
			g.DGELUCastTransposeDBiasFP8(t.q, t.qt, t.amax, t.dbias, t.x, t.pre, t.scale, 16384, 3072)
		}},
}

// BenchmarkGPUFP8Producers times the FP8 producers of a GPT-2 124M
// training step (B16 T1024) with CUDA events (cuda.Context.Median of 20)
// under the launch shapes it sweeps for the layernorms (rows and threads
// a block; the cast-transposes launch as the launcher does). Each reports µs and its bytes against a
// device-to-device copy of as many bytes, timed the same way in the same
// run (%copy).
func BenchmarkGPUFP8Producers(b *testing.B) {
	fx.once.Do(fx.setup)
	if fx.err != nil {
		testreq.Skip(b, "DRUTO_REQUIRE_GPU", "no usable GPU: %v", fx.err)
	}
	g := fx.fused
	if major, minor := g.Capability(); major*10+minor < fp8MinArch {
		testreq.Skip(b, "DRUTO_GPU_FEATURE_TESTS", "no FP8 conversion on %s (the producers need sm_90)", g.Name())
	}
	defer func() { lnf8RowsSet, lnf8ThreadsSet = 0, 0 }()
	time1 := func(fn func()) (float64, error) { // ms, the median of 20 event-timed runs
		d, err := g.ctx.Median(g.stream, 20, func() error { fn(); return nil })
		return float64(d) / float64(time.Millisecond), err
	}
	for _, p := range fp8Producers {
		t, free := fp8BenchOperands(b, g, p)
		moved := int64(p.N) * int64(p.C) * int64(p.bytes)
		cp, err := g.Alloc(tensor.I32, int(moved/2/4)) // the copy's target: half the bytes moved
		if err != nil {
			b.Fatal(err)
		}
		src, err := g.Alloc(tensor.I32, int(moved/2/4))
		if err != nil {
			b.Fatal(err)
		}
		shapes := [][2]int{{0, 0}} // the launcher's grid
		if p.ln {
			shapes = [][2]int{{64, 512}, {32, 512}, {16, 512}, {32, 256}, {16, 256}, {16, 128}} // rows, threads
		}
		for _, sh := range shapes {
			label := "launcher"
			if p.ln {
				label = fmt.Sprintf("rows%d_threads%d", sh[0], sh[1])
			}
			b.Run(p.name+"/"+label, func(b *testing.B) {
				if p.ln {
					lnf8RowsSet, lnf8ThreadsSet = sh[0], sh[1]
				}
				for range b.N {
					ms, err := time1(func() { p.run(g, t) })
					if err == nil {
						err = g.Sync()
					}
					if err != nil {
						b.Fatal(err)
					}
					cms, err := time1(func() {
						_ = g.stream.CopyDtoD(cuda.DevicePtr(cp.Dev), cuda.DevicePtr(src.Dev), uint64(moved/2))
					})
					if err != nil {
						b.Fatal(err)
					}
					gbps, cgbps := float64(moved)/ms/1e6, float64(moved)/cms/1e6
					b.ReportMetric(ms*1e3, "us")
					b.ReportMetric(gbps, "GB/s")
					b.ReportMetric(100*gbps/cgbps, "%copy")
					b.Logf("%s %s (%d,%d): %.1f µs, %.0f GB/s; copy of the same bytes %.1f µs, %.0f GB/s (%.0f%%)",
						p.name, label, p.N, p.C, ms*1e3, gbps, cms*1e3, cgbps, 100*gbps/cgbps)
				}
			})
		}
		lnf8RowsSet, lnf8ThreadsSet = 0, 0
		free()
		g.Free(cp)
		g.Free(src)
	}
}

// fp8BenchOperands allocates and fills p's operands: x, pre and b of
// p.dt, the layernorm's rows (pre, f32) and res, q and qt, a scale under
// which nothing saturates.
func fp8BenchOperands(b *testing.B, g *Device, p fp8Producer) (*fp8BenchTensors, func()) {
	N, C := p.N, p.C
	var all []*tensor.Tensor
	alloc := func(dt tensor.DType, shape ...int) *tensor.Tensor {
		t, err := g.Alloc(dt, shape...)
		if err != nil {
			b.Fatal(err)
		}
		all = append(all, t)
		return t
	}
	fill := func(t *tensor.Tensor, seed uint64) {
		rng := tensor.NewRNG(seed)
		v := make([]float32, t.Numel())
		for i := range v {
			v[i] = float32(rng.Norm())
		}
		h := tensor.New(t.DType, t.Shape...)
		if err := h.SetF32(v); err != nil {
			b.Fatal(err)
		}
		g.Upload(t, h)
	}
	t := &fp8BenchTensors{}
	if p.ln {
		t.pre, t.res, t.b = alloc(tensor.F32, N, C), alloc(tensor.F32, N, C), alloc(p.dt, N, C)
		t.w, t.bias = alloc(p.dt, C), alloc(p.dt, C)
		t.mean, t.rstd = alloc(tensor.F32, N), alloc(tensor.F32, N)
		fill(t.pre, 1)
		fill(t.b, 2)
		fill(t.w, 3)
		fill(t.bias, 4)
	} else {
		t.x, t.pre = alloc(p.dt, N, C), alloc(p.dt, N, C)
		fill(t.x, 5)
		fill(t.pre, 6)
	}
	t.q, t.qt = alloc(p.f, N, C), alloc(p.f, C, N)
	t.amax, t.dbias, t.scale = alloc(tensor.F32, 2), alloc(tensor.F32, C), alloc(tensor.F32, 1)
	g.Zero(t.amax)
	g.Zero(t.dbias)
	s := tensor.New(tensor.F32, 1)
	_ = s.SetF32([]float32{float32(math.Ldexp(1, 4))})
	g.Upload(t.scale, s)
	if err := g.Sync(); err != nil {
		b.Fatal(err)
	}
	return t, func() {
		for _, x := range all {
			g.Free(x)
		}
	}
}
