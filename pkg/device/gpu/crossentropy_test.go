package gpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// ceShapes are (N, V): one element, odd sizes (257: rows that are not a
// multiple of the 128-bit vector, so the scalar path), GPT-2's vocabulary
// (50304: the fp32 rows are longer than the register cache, so the re-read
// path too). 280 and 300 rows are more than the persistent grid of
// crossentropy_fused_l3 on a GPU of up to 132 SMs (ceRowsPerSM per SM),
// so blocks loop to further rows; 1003 is the scalar path of that loop.
// 3×8: a row of one 16-bit vector; 5×4100: a row that ends one vector into
// a group of l3's pass-1 loads (4100 = 512·8 + 4); 300×50304: GPT-2 rows,
// more than the grid.
var ceShapes = [][2]int{{1, 1}, {3, 8}, {17, 1000}, {33, 257}, {64, 50304}, {280, 4104}, {300, 1003}, {5, 4100}, {300, 50304}}

// TestGPUCrossEntropy checks CrossEntropy against the CPU reference with and
// without the gradient, losses poisoned first. Losses are fp32 from the
// same (rounded) logits: fp32 tolerance at sqrtScale(V), the length of the
// exp sum; gradients by the logits' dtype, fp32 ones at scale 2 (the fused
// kernel's exp is exp2f of an FMA, within 2e-6 relative; the CPU's within 2
// ulp).
func TestGPUCrossEntropy(t *testing.T) {
	rng := testRNG(t)
	for _, fused := range []bool{true, false} {
		g, ref := gpuDev(t, fused), cpuRef(fused)
		for _, dt := range floatDTypes {
			for _, sh := range trim(ceShapes) {
				N, V := sh[0], sh[1]
				for _, dscale := range []float32{0, 1 / float32(N)} {
					name := fmt.Sprintf("N%d_V%d_dscale%v", N, V, dscale != 0)
					logits := randHost(rng, dt, 0, 2, N, V)
					tg := randTokens(rng, N, V)
					want, wantLoss := clone(logits), tensor.New(tensor.F32, N)
					ref.CrossEntropy(wantLoss, want, tg, N, V, dscale)
					if err := ref.Sync(); err != nil {
						t.Fatal(err)
					}
					losses, x := poisoned(t, g, tensor.F32, N), toGPU(t, g, logits)
					g.CrossEntropy(losses, x, toGPU(t, g, tg), N, V, dscale)
					// log of the exp sum: its absolute error is the sum's relative
					// error, 2e-6 for the fused kernel's exp2f of an FMA (seen on
					// the H200: 1.3e-6 at V = 1, where the loss is 0), so at least
					// scale 2.
					check(t, "crossentropy", dt, fused, name, "losses", toHost(t, g, losses), wantLoss, tensor.F32, max(sqrtScale(V), 2))
					gscale := 1.0
					if dt == tensor.F32 {
						gscale = 2
					}
					check(t, "crossentropy", dt, fused, name, "dlogits", toHost(t, g, x), want, dt, gscale)
				}
			}
		}
	}
}

// TestGPUCrossEntropyFarTarget: a target logit 200 below its row's max
// gives a finite loss, equal to the CPU fused form's, in every GPU form
// (the decomposed NLL is log(sum) - (x[t] - max), never -log of a
// probability that underflows to 0).
func TestGPUCrossEntropyFarTarget(t *testing.T) {
	const N, V = 4, 1000
	rng := testRNG(t)
	for _, fused := range []bool{true, false} {
		g, ref := gpuDev(t, fused), cpuRef(true)
		for _, dt := range floatDTypes {
			logits := randHost(rng, dt, 0, 1, N, V)
			v := logits.ToF32()
			tg := tensor.New(tensor.I32, N)
			for i := range N {
				v[i*V+3] = 100
				tg.I32()[i] = int32(500 + i)
				v[i*V+500+i] = -100
			}
			if err := logits.SetF32(v); err != nil {
				t.Fatal(err)
			}
			want, wantLoss := clone(logits), tensor.New(tensor.F32, N)
			ref.CrossEntropy(wantLoss, want, tg, N, V, 1/float32(N))
			if err := ref.Sync(); err != nil {
				t.Fatal(err)
			}
			losses, x := poisoned(t, g, tensor.F32, N), toGPU(t, g, logits)
			g.CrossEntropy(losses, x, toGPU(t, g, tg), N, V, 1/float32(N))
			got := toHost(t, g, losses)
			for i, l := range got.F32() {
				if math.IsInf(float64(l), 0) || math.IsNaN(float64(l)) || l < 199 {
					t.Errorf("%s %s: row %d: loss %v, want finite, about 200", dt, formName(fused), i, l)
				}
			}
			check(t, "crossentropy", dt, fused, "far_target", "losses", got, wantLoss, tensor.F32, 1)
		}
	}
}

// TestGPUCrossEntropyMasked: logits of -inf (masked entries) add nothing
// to the softmax and get a zero gradient, also where every logit one thread
// of crossentropy_fused_l3 reads first is -inf (its running max is still
// -inf then: exp(-inf - -inf) must not make the sum NaN).
func TestGPUCrossEntropyMasked(t *testing.T) {
	const N, V = 3, 4104
	rng := testRNG(t)
	for _, fused := range []bool{true, false} {
		g, ref := gpuDev(t, fused), cpuRef(fused)
		for _, dt := range floatDTypes {
			logits := randHost(rng, dt, 0, 2, N, V)
			v := logits.ToF32()
			for i := range N {
				for j := range V {
					if j%2048 < 8 || j >= 4096 {
						v[i*V+j] = float32(math.Inf(-1))
					}
				}
			}
			if err := logits.SetF32(v); err != nil {
				t.Fatal(err)
			}
			tg := tensor.New(tensor.I32, N)
			for i := range N {
				tg.I32()[i] = int32(100 + 37*i)
			}
			want, wantLoss := clone(logits), tensor.New(tensor.F32, N)
			ref.CrossEntropy(wantLoss, want, tg, N, V, 1/float32(N))
			if err := ref.Sync(); err != nil {
				t.Fatal(err)
			}
			losses, x := poisoned(t, g, tensor.F32, N), toGPU(t, g, logits)
			g.CrossEntropy(losses, x, toGPU(t, g, tg), N, V, 1/float32(N))
			name := "masked"
			check(t, "crossentropy", dt, fused, name, "losses", toHost(t, g, losses), wantLoss, tensor.F32, sqrtScale(V))
			gscale := 1.0
			if dt == tensor.F32 {
				gscale = 2
			}
			check(t, "crossentropy", dt, fused, name, "dlogits", toHost(t, g, x), want, dt, gscale)
		}
	}
}
