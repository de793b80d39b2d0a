package cpu

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// TestLayerNormBackwardCastFP8: the op is LayerNormBackward followed by
// CastTransposeDBiasFP8 of the updated dinp, bit for bit, in both forms;
// arguments the fused op does not take (dinp or inp not f32, q of E4M3,
// dbiasNext of the wrong length) are errors at Sync that leave dinp as it
// was.
func TestLayerNormBackwardCastFP8(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 1))
	const N, C = 37, 70
	randn := func(n int, s float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * s)
		}
		return v
	}
	f32T := func(v []float32, shape ...int) *tensor.Tensor {
		x, err := tensor.FromF32(append([]float32(nil), v...), shape...)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	dinp0, inp, dw0, db0, dn0 := randn(N*C, 1), randn(N*C, 2), randn(C, 1), randn(C, 1), randn(C, 1)
	rstd := randn(N, 0.1)
	for i := range rstd {
		rstd[i] = 1 + float32(math.Abs(float64(rstd[i])))
	}
	mean := randn(N, 0.1)
	dout, w := tensor.New(tensor.BF16, N, C), tensor.New(tensor.BF16, C)
	if err := errors.Join(dout.SetF32(randn(N*C, 1)), w.SetF32(randn(C, 1))); err != nil {
		t.Fatal(err)
	}
	sc := f32T([]float32{1536}, 1)
	for _, fused := range []bool{true, false} {
		d := ntDev(fused, 2)
		type out struct{ dinp, dw, db, dn, amax, q, qt *tensor.Tensor }
		run := func(op bool) out {
			o := out{f32T(dinp0, N, C), f32T(dw0, C), f32T(db0, C), f32T(dn0, C), f32T([]float32{0.25, 0}, 2),
				tensor.New(tensor.F8E5M2, N, C), tensor.New(tensor.F8E5M2, C, N)}
			if op {
				d.LayerNormBackwardCastFP8(o.dinp, o.dw, o.db, o.q, o.qt, o.amax, o.dn, dout, f32T(inp, N, C), w, f32T(mean, N), f32T(rstd, N), sc, N, C)
			} else {
				d.LayerNormBackward(o.dinp, o.dw, o.db, dout, f32T(inp, N, C), w, f32T(mean, N), f32T(rstd, N), N, C)
				d.CastTransposeDBiasFP8(o.q, o.qt, o.amax, o.dn, o.dinp, sc, N, C)
			}
			ntSync(t, d)
			return o
		}
		got, want := run(true), run(false)
		for _, p := range [][2]*tensor.Tensor{{got.dinp, want.dinp}, {got.dw, want.dw}, {got.db, want.db}, {got.dn, want.dn}, {got.amax, want.amax}} {
			if !ntSameBits(p[0], p[1]) {
				t.Errorf("fused %v: %v differs from the two ops' %v", fused, p[0].F32()[:2], p[1].F32()[:2])
			}
		}
		if !bytes.Equal(got.q.Raw(), want.q.Raw()) || !bytes.Equal(got.qt.Raw(), want.qt.Raw()) {
			t.Errorf("fused %v: q or qt differ from the two ops'", fused)
		}
		for _, c := range []struct {
			name              string
			dinp, inp, q, dbn *tensor.Tensor
		}{
			{"dinp bf16", tensor.New(tensor.BF16, N, C), f32T(inp, N, C), tensor.New(tensor.F8E5M2, N, C), f32T(dn0, C)},
			{"inp bf16", f32T(dinp0, N, C), tensor.New(tensor.BF16, N, C), tensor.New(tensor.F8E5M2, N, C), f32T(dn0, C)},
			{"q E4M3", f32T(dinp0, N, C), f32T(inp, N, C), tensor.New(tensor.F8E4M3, N, C), f32T(dn0, C)},
			{"dbiasNext of C-1", f32T(dinp0, N, C), f32T(inp, N, C), tensor.New(tensor.F8E5M2, N, C), f32T(dn0[:C-1], C-1)},
		} {
			before := append([]byte(nil), c.dinp.Raw()...)
			d.LayerNormBackwardCastFP8(c.dinp, f32T(dw0, C), f32T(db0, C), c.q, tensor.New(tensor.F8E5M2, C, N), f32T([]float32{0, 0}, 2), c.dbn,
				dout, c.inp, w, f32T(mean, N), f32T(rstd, N), sc, N, C)
			if err := d.Sync(); err == nil || !strings.Contains(err.Error(), "LayerNormBackwardCastFP8") {
				t.Errorf("fused %v, %s: Sync %v, want the op's error", fused, c.name, err)
			}
			if !bytes.Equal(c.dinp.Raw(), before) {
				t.Errorf("fused %v, %s: dinp changed", fused, c.name)
			}
		}
	}
}
