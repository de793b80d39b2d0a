package cpu

// fp8_ops.go: the Device's device.FP8 ops, the references of FP8 training
// (issue 38) on host tensors: each calls this package's function of the
// same name on the tensors' elements and adds its amax, so that a model's
// FP8 step runs on the CPU as it does on a GPU, up to the order of fp32
// sums.

import (
	"fmt"
	"math"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

var _ device.FP8 = (*Device)(nil)

// fp8Arg is one tensor argument of an FP8 op: its name, the dtypes it may
// have (float: any float dtype; fp8: either FP8 dtype) and its elements.
type fp8Arg struct {
	name  string
	t     *tensor.Tensor
	dts   []tensor.DType
	float bool
	fp8   bool
	n     int
}

// fp8Check records the first argument of op that is nil, of another dtype
// or size, or not in host memory, and reports whether all hold.
func (d *Device) fp8Check(op string, N, C int, args ...fp8Arg) bool {
	if N < 0 || C < 0 {
		d.fail(fmt.Errorf("cpu: %s: N %d, C %d: %w", op, N, C, tensor.ErrShape))
		return false
	}
	for _, a := range args {
		t := a.t
		var err error
		switch {
		case t == nil:
			err = fmt.Errorf("%s is nil", a.name)
		case a.float && !t.DType.Float(), a.fp8 && !isFP8(t.DType),
			!a.float && !a.fp8 && !hasDType(a.dts, t.DType):
			err = fmt.Errorf("%s is %s: %w", a.name, t.DType, device.ErrUnsupported)
		case t.Numel() != a.n:
			err = fmt.Errorf("%s has %d elements, want %d: %w", a.name, t.Numel(), a.n, tensor.ErrShape)
		case !t.IsHost():
			err = fmt.Errorf("%s is not a host tensor", a.name)
		}
		if err != nil {
			d.fail(fmt.Errorf("cpu: %s: %w", op, err))
			return false
		}
	}
	return true
}

func isFP8(dt tensor.DType) bool { _, ok := dt.FP8(); return ok }

func hasDType(dts []tensor.DType, dt tensor.DType) bool {
	for _, d := range dts {
		if d == dt {
			return true
		}
	}
	return false
}

var (
	f32Only = []tensor.DType{tensor.F32}
	e4m3    = []tensor.DType{tensor.F8E4M3}
	e5m2    = []tensor.DType{tensor.F8E5M2}
)

// addAmax sets amax[0] = max(amax[0], v), compared as the kernels'
// atomicMax compares them: the float's bits with the sign cleared (a NaN
// above +Inf), and adds under to amax[1]'s uint32 bits (wrapping, as the
// kernels' atomicAdd).
func addAmax(amax *tensor.Tensor, v float32, under int) {
	a := amax.F32()
	a[0] = math.Float32frombits(max(math.Float32bits(a[0])&0x7fffffff, math.Float32bits(v)&0x7fffffff))
	a[1] = math.Float32frombits(math.Float32bits(a[1]) + uint32(under))
}

// qfmt returns the FP8 format of an FP8 tensor.
func qfmt(t *tensor.Tensor) tensor.FP8Format { f, _ := t.DType.FP8(); return f }

// LayerNormFP8 implements device.FP8 with this package's LayerNormFP8.
func (d *Device) LayerNormFP8(q, qt, amax, mean, rstd, inp, weight, bias, scale *tensor.Tensor, N, C int) {
	d.layerNormFP8(nil, q, qt, amax, mean, rstd, inp, nil, weight, bias, scale, N, C)
}

// ResidualLayerNormFP8 implements device.FP8 with this package's
// ResidualLayerNormFP8.
func (d *Device) ResidualLayerNormFP8(res, q, qt, amax, mean, rstd, a, b, weight, bias, scale *tensor.Tensor, N, C int) {
	if res == nil {
		d.fail(fmt.Errorf("cpu: ResidualLayerNormFP8: res is nil"))
		return
	}
	d.layerNormFP8(res, q, qt, amax, mean, rstd, a, b, weight, bias, scale, N, C)
}

func (d *Device) layerNormFP8(res, q, qt, amax, mean, rstd, a, b, weight, bias, scale *tensor.Tensor, N, C int) {
	op, rows := "LayerNormFP8", "inp"
	args := []fp8Arg{{name: "q", t: q, dts: e4m3, n: N * C}, {name: "qt", t: qt, dts: e4m3, n: N * C},
		{name: "amax", t: amax, dts: f32Only, n: 2}, {name: "mean", t: mean, dts: f32Only, n: N},
		{name: "rstd", t: rstd, dts: f32Only, n: N}, {name: rows, t: a, dts: f32Only, n: N * C},
		{name: "weight", t: weight, float: true, n: C}, {name: "bias", t: bias, float: true, n: C},
		{name: "scale", t: scale, dts: f32Only, n: 1}}
	if res != nil {
		op = "ResidualLayerNormFP8"
		args[5].name = "a"
		args = append(args, fp8Arg{name: "res", t: res, dts: f32Only, n: N * C}, fp8Arg{name: "b", t: b, float: true, n: N * C})
	}
	if !d.fp8Check(op, N, C, args...) {
		return
	}
	w, bs, s := f32(weight), f32(bias), scale.F32()[0]
	var m float32
	var u int
	if res != nil {
		m, u = ResidualLayerNormFP8(res.F32(), q.U8(), qt.U8(), mean.F32(), rstd.F32(), a.F32(), f32(b), w, bs, s, tensor.E4M3, N, C)
	} else {
		m, u = LayerNormFP8(q.U8(), qt.U8(), mean.F32(), rstd.F32(), a.F32(), w, bs, s, tensor.E4M3, N, C)
	}
	addAmax(amax, m, u)
}

// CastTransposeFP8 implements device.FP8 with this package's
// CastTransposeFP8, in q's format.
func (d *Device) CastTransposeFP8(q, qt, amax, x, scale *tensor.Tensor, N, C int) {
	if !d.fp8Check("CastTransposeFP8", N, C, fp8Arg{name: "q", t: q, fp8: true, n: N * C},
		fp8Arg{name: "qt", t: qt, fp8: true, n: N * C}, fp8Arg{name: "amax", t: amax, dts: f32Only, n: 2},
		fp8Arg{name: "x", t: x, float: true, n: N * C}, fp8Arg{name: "scale", t: scale, dts: f32Only, n: 1}) {
		return
	}
	if q.DType != qt.DType {
		d.fail(fmt.Errorf("cpu: CastTransposeFP8: q is %s and qt %s: %w", q.DType, qt.DType, device.ErrUnsupported))
		return
	}
	m, u := CastTransposeFP8(q.U8(), qt.U8(), f32(x), scale.F32()[0], qfmt(q), N, C)
	addAmax(amax, m, u)
}

// TransposeFP8 implements device.FP8 with this package's TransposeFP8.
func (d *Device) TransposeFP8(out, in *tensor.Tensor, N, C int) {
	if !d.fp8Check("TransposeFP8", N, C, fp8Arg{name: "out", t: out, fp8: true, n: N * C},
		fp8Arg{name: "in", t: in, fp8: true, n: N * C}) {
		return
	}
	if out.DType != in.DType {
		d.fail(fmt.Errorf("cpu: TransposeFP8: out is %s and in %s: %w", out.DType, in.DType, device.ErrUnsupported))
		return
	}
	TransposeFP8(out.U8(), in.U8(), N, C)
}

// GELUCastTransposeFP8 implements device.FP8 with this package's
// GELUCastTransposeFP8.
func (d *Device) GELUCastTransposeFP8(q, qt, amax, pre, scale *tensor.Tensor, N, C int) {
	if !d.fp8Check("GELUCastTransposeFP8", N, C, fp8Arg{name: "q", t: q, dts: e4m3, n: N * C},
		fp8Arg{name: "qt", t: qt, dts: e4m3, n: N * C}, fp8Arg{name: "amax", t: amax, dts: f32Only, n: 2},
		fp8Arg{name: "pre", t: pre, float: true, n: N * C}, fp8Arg{name: "scale", t: scale, dts: f32Only, n: 1}) {
		return
	}
	m, u := GELUCastTransposeFP8(q.U8(), qt.U8(), f32(pre), scale.F32()[0], N, C)
	addAmax(amax, m, u)
}

// CastTransposeDBiasFP8 implements device.FP8 with this package's
// CastTransposeDBiasFP8.
func (d *Device) CastTransposeDBiasFP8(q, qt, amax, dbias, dy, scale *tensor.Tensor, N, C int) {
	if !d.fp8Check("CastTransposeDBiasFP8", N, C, fp8Arg{name: "q", t: q, dts: e5m2, n: N * C},
		fp8Arg{name: "qt", t: qt, dts: e5m2, n: N * C}, fp8Arg{name: "amax", t: amax, dts: f32Only, n: 2},
		fp8Arg{name: "dbias", t: dbias, dts: f32Only, n: C}, fp8Arg{name: "dy", t: dy, float: true, n: N * C},
		fp8Arg{name: "scale", t: scale, dts: f32Only, n: 1}) {
		return
	}
	m, u := CastTransposeDBiasFP8(q.U8(), qt.U8(), dbias.F32(), f32(dy), scale.F32()[0], N, C)
	addAmax(amax, m, u)
}

// DGELUCastTransposeDBiasFP8 implements device.FP8 with this package's
// DGELUCastTransposeDBiasFP8; pre must have dy's dtype.
func (d *Device) DGELUCastTransposeDBiasFP8(q, qt, amax, dbias, dy, pre, scale *tensor.Tensor, N, C int) {
	const op = "DGELUCastTransposeDBiasFP8"
	if !d.fp8Check(op, N, C, fp8Arg{name: "q", t: q, dts: e5m2, n: N * C},
		fp8Arg{name: "qt", t: qt, dts: e5m2, n: N * C}, fp8Arg{name: "amax", t: amax, dts: f32Only, n: 2},
		fp8Arg{name: "dbias", t: dbias, dts: f32Only, n: C}, fp8Arg{name: "dy", t: dy, float: true, n: N * C},
		fp8Arg{name: "scale", t: scale, dts: f32Only, n: 1}) {
		return
	}
	if !d.fp8Check(op, N, C, fp8Arg{name: "pre", t: pre, dts: []tensor.DType{dy.DType}, n: N * C}) {
		return
	}
	m, u := DGELUCastTransposeDBiasFP8(q.U8(), qt.U8(), dbias.F32(), f32(dy), f32(pre), scale.F32()[0], N, C)
	addAmax(amax, m, u)
}

// LayerNormBackwardCastFP8 implements device.FP8 as its definition
// reads: LayerNormBackward, then CastTransposeDBiasFP8 of the updated dinp
// (f32, as inp) into q, qt, amax and dbiasNext. It is the reference of
// kernels/fp8.cu's layernorm_backward_cast_e5m2, which sums dweight, dbias
// and dbiasNext in other fixed orders (agreeing to fp32 rounding, and so q
// now and then one E5M2 rounding apart).
func (d *Device) LayerNormBackwardCastFP8(dinp, dweight, dbias, q, qt, amax, dbiasNext, dout, inp, weight, mean, rstd, scale *tensor.Tensor, N, C int) {
	if !d.fp8Check("LayerNormBackwardCastFP8", N, C, fp8Arg{name: "dinp", t: dinp, dts: f32Only, n: N * C},
		fp8Arg{name: "q", t: q, dts: e5m2, n: N * C}, fp8Arg{name: "qt", t: qt, dts: e5m2, n: N * C},
		fp8Arg{name: "amax", t: amax, dts: f32Only, n: 2}, fp8Arg{name: "dbiasNext", t: dbiasNext, dts: f32Only, n: C},
		fp8Arg{name: "inp", t: inp, dts: f32Only, n: N * C}, fp8Arg{name: "scale", t: scale, dts: f32Only, n: 1}) {
		return
	}
	d.LayerNormBackward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C)
	d.CastTransposeDBiasFP8(q, qt, amax, dbiasNext, dinp, scale, N, C)
}

// MatmulFP8 implements device.FP8 with this package's MatmulFP8, rows of
// out in parallel, the bias added in fp32, rounded once to out's dtype.
func (d *Device) MatmulFP8(out, a, b, bias, invA, invB *tensor.Tensor, N, C, OC int) {
	d.matmulFP8("MatmulFP8", false, out, a, b, bias, invA, invB, N, C, OC)
}

// MatmulFP8Add implements device.FP8 with this package's MatmulFP8, the
// product added into the f32 out.
func (d *Device) MatmulFP8Add(out, a, b, invA, invB *tensor.Tensor, N, C, OC int) {
	d.matmulFP8("MatmulFP8Add", true, out, a, b, nil, invA, invB, N, C, OC)
}

func (d *Device) matmulFP8(op string, add bool, out, a, b, bias, invA, invB *tensor.Tensor, N, C, OC int) {
	outs := []tensor.DType{tensor.F32, tensor.BF16}
	if add {
		outs = f32Only
	}
	if OC < 0 || !d.fp8Check(op, N, C, fp8Arg{name: "out", t: out, dts: outs, n: N * OC},
		fp8Arg{name: "a", t: a, fp8: true, n: N * C}, fp8Arg{name: "b", t: b, fp8: true, n: OC * C},
		fp8Arg{name: "invA", t: invA, dts: f32Only, n: 1}, fp8Arg{name: "invB", t: invB, dts: f32Only, n: 1}) {
		if OC < 0 {
			d.fail(fmt.Errorf("cpu: %s: OC %d: %w", op, OC, tensor.ErrShape))
		}
		return
	}
	var bs []float32
	if bias != nil {
		if !d.fp8Check(op, N, C, fp8Arg{name: "bias", t: bias, dts: []tensor.DType{out.DType}, n: OC}) {
			return
		}
		bs = f32(bias)
	}
	qa, qb, fa, fb := a.U8(), b.U8(), qfmt(a), qfmt(b)
	ia, ib := invA.F32()[0], invB.F32()[0]
	d.parallel(N, max(1, 4096/max(1, C*OC)), func(lo, hi int) {
		rows := make([]float32, (hi-lo)*OC)
		MatmulFP8(rows, qa[lo*C:hi*C], qb, fa, fb, ia, ib, hi-lo, C, OC)
		if bs != nil {
			for r := 0; r < len(rows); r += OC {
				for o, v := range bs {
					rows[r+o] += v
				}
			}
		}
		if add {
			o := out.F32()[lo*OC : hi*OC]
			for i, v := range rows {
				o[i] += v
			}
			return
		}
		store(out, lo*OC, rows)
	})
}

// FP8ScaleUpdate implements device.FP8 with amp.UpdateFP8Scales, or
// amp.UpdateFP8ScalesOf the records recs lists.
func (d *Device) FP8ScaleUpdate(st, meta, recs *tensor.Tensor, K, H, margin int) {
	switch {
	case K < 0 || H < 0 || margin < 0 || margin > 64:
		d.fail(fmt.Errorf("cpu: FP8ScaleUpdate: K %d, H %d, margin %d (want K, H ≥ 0, margin in [0, 64]): %w", K, H, margin, tensor.ErrShape))
		return
	case st == nil || meta == nil:
		d.fail(fmt.Errorf("cpu: FP8ScaleUpdate: a nil state: %w", tensor.ErrShape))
		return
	}
	if !d.fp8Check("FP8ScaleUpdate", K, 0, fp8Arg{name: "st", t: st, dts: f32Only, n: amp.FP8StLen(K, H)},
		fp8Arg{name: "meta", t: meta, dts: []tensor.DType{tensor.I32}, n: K * amp.FP8MetaLen}) {
		return
	}
	if recs == nil {
		amp.UpdateFP8Scales(st.F32(), meta.I32(), K, H, margin)
		return
	}
	if !d.fp8Check("FP8ScaleUpdate", K, 0, fp8Arg{name: "recs", t: recs, dts: []tensor.DType{tensor.I32}, n: recs.Numel()}) {
		return
	}
	rs := recs.I32()
	seen := make(map[int32]bool, len(rs))
	for _, k := range rs {
		if k < 0 || int(k) >= K || seen[k] {
			d.fail(fmt.Errorf("cpu: FP8ScaleUpdate: record %d listed twice or outside [0, %d): %w", k, K, tensor.ErrShape))
			return
		}
		seen[k] = true
	}
	amp.UpdateFP8ScalesOf(st.F32(), meta.I32(), K, H, margin, rs)
}

// AdamWStateFP8 implements device.FP8: AdamWState, then CastTransposeFP8
// of each weight's working copy (so the parameters' bits are
// AdamWState's, and the copies the casts' of the updated working copy).
func (d *Device) AdamWStateFP8(master, work, grads, m, v *tensor.Tensor, layout *tensor.Layout, hp device.AdamW, state *tensor.Tensor, w []device.FP8Weight) {
	spans, ok := d.adamArgs(&device.Ops.AdamWState, master, work, grads, m, v, layout, hp, state)
	if !ok {
		return
	}
	if work == nil {
		d.fail(fmt.Errorf("cpu: AdamWStateFP8: no working copy to cast: %w", tensor.ErrShape))
		return
	}
	if _, err := device.FP8WeightSpans(spans, w); err != nil {
		d.fail(fmt.Errorf("cpu: %w", err))
		return
	}
	d.AdamWState(master, work, grads, m, v, layout, hp, state)
	device.CastFP8Weights(d, work, w)
}

// CrossEntropyFP8 implements device.FP8: CrossEntropy on an fp32 copy of
// the logits (the same arithmetic as on the logits themselves: every form
// widens a row to fp32 first), then that fp32 gradient cast to q with
// CastFP8 (E5M2, amax added), and with storeGrad the gradient rounded
// once into the logits, as CrossEntropy rounds it (without storeGrad the
// logits are left as they were). With state, dscale·state[SlotScale]
// (CrossEntropyScaled). V must be a multiple of 16, as on the GPU.
func (d *Device) CrossEntropyFP8(losses, logits, q, amax, targets, scale, state *tensor.Tensor, N, V int, dscale float32, storeGrad bool) {
	const op = "CrossEntropyFP8"
	if !d.fp8Check(op, N, V, fp8Arg{name: "losses", t: losses, dts: f32Only, n: N},
		fp8Arg{name: "logits", t: logits, float: true, n: N * V}, fp8Arg{name: "q", t: q, dts: e5m2, n: N * V},
		fp8Arg{name: "amax", t: amax, dts: f32Only, n: 2}, fp8Arg{name: "targets", t: targets, dts: []tensor.DType{tensor.I32}, n: N},
		fp8Arg{name: "scale", t: scale, dts: f32Only, n: 1}) {
		return
	}
	if state != nil && !d.fp8Check(op, N, V, fp8Arg{name: "state", t: state, dts: f32Only, n: device.StateLen}) {
		return
	}
	if V%16 != 0 {
		d.fail(fmt.Errorf("cpu: %s: V %d is not a multiple of 16 (rows of q are FP8 GEMM operands): %w", op, V, tensor.ErrShape))
		return
	}
	for i, t := range targets.I32() {
		if t < 0 || int(t) >= V {
			d.fail(fmt.Errorf("cpu: %s: target %d of row %d outside [0,%d)", op, t, i, V))
			return
		}
	}
	if state != nil {
		dscale *= state.F32()[device.SlotScale]
	}
	if dscale == 0 {
		d.CrossEntropy(losses, logits, targets, N, V, 0)
		return
	}
	g := tensor.New(tensor.F32, N, V)
	load(g.F32(), logits, 0)
	d.CrossEntropy(losses, g, targets, N, V, dscale)
	m, u := CastFP8(q.U8(), g.F32(), scale.F32()[0], tensor.E5M2)
	addAmax(amax, m, u)
	if storeGrad {
		store(logits, 0, g.F32())
	}
}
