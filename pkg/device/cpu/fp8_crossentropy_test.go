package cpu

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// TestCrossEntropyFP8: the FP8 classifier's losses and gradient over the
// logits are CrossEntropy's (CrossEntropyScaled's with a state) bit for
// bit in every dtype and form; q is e5m2 of the fp32 gradient·scale (not
// of the gradient rounded to the logits' dtype); amax is max(pending,
// max |g|) and the underflows are added to the pending count; storeGrad
// false leaves the logits as they were and writes the same losses, q and
// amax bit for bit; dscale 0 leaves q and amax untouched (and the logits,
// storeGrad either way); V not a multiple of 16, a q of E4M3 and a target
// out of range are refused, nothing written.
func TestCrossEntropyFP8(t *testing.T) {
	rng := rand.New(rand.NewPCG(38, 2))
	const N, V = 16, 96
	for _, fused := range []bool{true, false} {
		d := New(device.Options{Fused: fused, Threads: 2})
		for _, dt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16} {
			for _, scaled := range []bool{false, true} {
				x := tensor.New(dt, N, V)
				v := make([]float32, N*V)
				for i := range v {
					v[i] = float32(2 * rng.NormFloat64())
				}
				if err := x.SetF32(v); err != nil {
					t.Fatal(err)
				}
				tg, _ := tensor.FromI32([]int32{0, 95, 7, 50, 3, 1, 2, 4, 8, 16, 32, 64, 94, 93, 5, 6}, N)
				var st *tensor.Tensor
				dscale, s := float32(1)/N, float32(1e3)
				if scaled {
					st = tensor.New(tensor.F32, device.StateLen)
					st.F32()[device.SlotScale] = 4
				}
				wl, wx := tensor.New(tensor.F32, N), cloneOf(x)
				if scaled {
					d.CrossEntropyScaled(wl, wx, tg, st, N, V, dscale)
				} else {
					d.CrossEntropy(wl, wx, tg, N, V, dscale)
				}
				// the fp32 gradient: CrossEntropy on the widened logits
				g := tensor.New(tensor.F32, N, V)
				copy(g.F32(), x.ToF32())
				gs := dscale
				if scaled {
					gs *= 4
				}
				d.CrossEntropy(tensor.New(tensor.F32, N), g, tg, N, V, gs)

				l, gx, q := tensor.New(tensor.F32, N), cloneOf(x), tensor.New(tensor.F8E5M2, N, V)
				pend := []float32{1e-30, math.Float32frombits(3)}
				amax, _ := tensor.FromF32(append([]float32(nil), pend...), 2)
				sc, _ := tensor.FromF32([]float32{s}, 1)
				d.CrossEntropyFP8(l, gx, q, amax, tg, sc, st, N, V, dscale, true)
				if err := d.Sync(); err != nil {
					t.Fatal(err)
				}
				// storeGrad false: the same outputs, the logits as they were
				nl, nx, nq := tensor.New(tensor.F32, N), cloneOf(x), tensor.New(tensor.F8E5M2, N, V)
				na, _ := tensor.FromF32(append([]float32(nil), pend...), 2)
				d.CrossEntropyFP8(nl, nx, nq, na, tg, sc, st, N, V, dscale, false)
				if err := d.Sync(); err != nil {
					t.Fatal(err)
				}
				if string(nx.Raw()) != string(x.Raw()) {
					t.Errorf("fused %v %s scaled %v: storeGrad false wrote the logits", fused, dt, scaled)
				}
				if string(nl.Raw()) != string(l.Raw()) || string(nq.Raw()) != string(q.Raw()) || string(na.Raw()) != string(amax.Raw()) {
					t.Errorf("fused %v %s scaled %v: storeGrad false gave other losses, q or amax", fused, dt, scaled)
				}
				for i := range N {
					if math.Float32bits(l.F32()[i]) != math.Float32bits(wl.F32()[i]) {
						t.Errorf("fused %v %s scaled %v: loss %d %v, CrossEntropy's %v", fused, dt, scaled, i, l.F32()[i], wl.F32()[i])
					}
				}
				if string(gx.Raw()) != string(wx.Raw()) {
					t.Errorf("fused %v %s scaled %v: the gradient over the logits is not CrossEntropy's", fused, dt, scaled)
				}
				var m float32
				under := 0
				for i, gv := range g.F32() {
					m = max(m, float32(math.Abs(float64(gv))))
					b := tensor.E5M2.FromF32(gv * s)
					if b&0x7f == 0 && gv != 0 {
						under++
					}
					if q.Raw()[i] != b {
						t.Fatalf("fused %v %s scaled %v: q[%d] %#02x, want e5m2(%g·%g) = %#02x", fused, dt, scaled, i, q.Raw()[i], gv, s, b)
					}
				}
				if a := amax.F32(); a[0] != m || math.Float32bits(a[1]) != 3+uint32(under) {
					t.Errorf("fused %v %s scaled %v: amax %v (%d underflows), want %g and %d", fused, dt, scaled, a[0], math.Float32bits(a[1]), m, 3+under)
				}
				// dscale 0: the losses alone
				q0 := tensor.New(tensor.F8E5M2, N, V)
				a0, _ := tensor.FromF32(append([]float32(nil), pend...), 2)
				l0, x0 := tensor.New(tensor.F32, N), cloneOf(x)
				d.CrossEntropyFP8(l0, x0, q0, a0, tg, sc, st, N, V, 0, scaled)
				if err := d.Sync(); err != nil {
					t.Fatal(err)
				}
				if string(x0.Raw()) != string(x.Raw()) || a0.F32()[0] != pend[0] || a0.F32()[1] != pend[1] || l0.F32()[2] != wl.F32()[2] {
					t.Errorf("fused %v %s scaled %v: dscale 0 wrote the logits or amax, or another loss", fused, dt, scaled)
				}
				for _, b := range q0.Raw() {
					if b != 0 {
						t.Fatalf("fused %v %s: dscale 0 wrote q", fused, dt)
					}
				}
			}
		}
	}
	d := New(device.Options{Fused: true})
	sc, _ := tensor.FromF32([]float32{1}, 1)
	for name, c := range map[string]struct {
		V      int
		q      tensor.DType
		target int32
	}{"V 88": {88, tensor.F8E5M2, 0}, "q e4m3": {96, tensor.F8E4M3, 0}, "target 96": {96, tensor.F8E5M2, 96}} {
		x := tensor.New(tensor.BF16, 1, c.V)
		tg, _ := tensor.FromI32([]int32{c.target}, 1)
		l := tensor.New(tensor.F32, 1)
		d.CrossEntropyFP8(l, x, tensor.New(c.q, 1, c.V), tensor.New(tensor.F32, 2), tg, sc, nil, 1, c.V, 1, true)
		err := d.Sync()
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
		if name == "V 88" && !errors.Is(err, tensor.ErrShape) {
			t.Errorf("%s: %v, want ErrShape", name, err)
		}
		if l.F32()[0] != 0 {
			t.Errorf("%s: a loss was written", name)
		}
	}
}

// cloneOf returns a host copy of x.
func cloneOf(x *tensor.Tensor) *tensor.Tensor {
	c := tensor.New(x.DType, x.Shape...)
	copy(c.Raw(), x.Raw())
	return c
}
