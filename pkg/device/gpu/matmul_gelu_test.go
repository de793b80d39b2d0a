package gpu

import (
	"fmt"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// TestGPUGELUBiasBackward checks gelu_bias_backward alone (geluBiasBackward,
// what the kernel form of MatmulBackwardGELU runs after its dgrad GEMM)
// against the CPU reference: dpre = gelu'(pre)·dpre in place as the CPU's
// GELUBackward computes it (scale 2 in 16 bits, 8 in fp32 as in
// device.Ops.GELUBackward), and dbias += Σ_rows of the products against a
// float64 sum of the CPU's own products (the GPU sums them before rounding
// to the dtype: their rounding is allowed, scaled by √N). Shapes: one
// element, a partial strip (C 1000), the scalar path (C 37, not a multiple
// of a 16-byte vector, and a view one element into its buffer), GPT-2's
// 4C at 1024 and at the full 16384 rows of B16 T1024 (several chunks per
// strip). A second run from the same inputs gives the same bits
// (deterministic: per-chunk partials added in a fixed order), and a nil
// dbias writes dpre alone.
func TestGPUGELUBiasBackward(t *testing.T) {
	rng := testRNG(t)
	g, ref := gpuDev(t, true), cpuRef(true)
	shapes := [][2]int{{1, 1}, {17, 1000}, {33, 37}, {1024, 3072}, {16384, 3072}}
	for _, dt := range floatDTypes {
		for _, sh := range trim(shapes) {
			N, C := sh[0], sh[1]
			for _, off := range []int{0, 1} {
				if off == 1 && C != 37 {
					continue
				}
				name := fmt.Sprintf("N%d_C%d_off%d", N, C, off)
				pre, dpre := randHost(rng, dt, 0, 2, N*C+off), randHost(rng, dt, 0, 1, N*C+off)
				hpre, hdpre := pre.MustView(off, N*C), dpre.MustView(off, N*C)
				db0 := randHost(rng, tensor.F32, 0, 1, C)
				want := tensor.New(dt, N*C)
				ref.GELUBackward(want, hpre, hdpre, N*C)
				if err := ref.Sync(); err != nil {
					t.Fatal(err)
				}
				// the bias gradient: the sums of the CPU's products in float64
				gradOnly := tensor.New(tensor.F32, N*C)
				ones := tensor.New(tensor.F32, N*C)
				onesV := ones.F32()
				for i := range onesV {
					onesV[i] = 1
				}
				pre32 := tensor.New(tensor.F32, N*C)
				ref.Cast(pre32, hpre)                        // exact
				ref.GELUBackward(gradOnly, pre32, ones, N*C) // gelu'(pre) in fp32
				if err := ref.Sync(); err != nil {
					t.Fatal(err)
				}
				gv, dv := gradOnly.F32(), hdpre.ToF32()
				sums := make([]float64, C)
				for i, v := range dv {
					sums[i%C] += float64(gv[i]) * float64(v)
				}
				wantB := tensor.New(tensor.F32, C)
				for c, v := range db0.F32() {
					wantB.F32()[c] = float32(float64(v) + sums[c])
				}
				gpre := toGPU(t, g, pre).MustView(off, N*C)
				var bits []byte
				// the per-chunk partial sums, NaN first: every one must be written
				_, chunks := geluBiasChunks(N, blocks(C, 32*(16/dt.Size())), g.residentBlocks("gelu_bias_backward", dt, geluBlock, 0)*g.sms())
				for run := range 2 {
					if p := g.scratch("gelu.bias.part", chunks*C*4); p != 0 {
						if err := g.Stream().Memset8(p, 0xff, uint64(chunks*C*4)); err != nil {
							t.Fatal(err)
						}
					}
					gd := toGPU(t, g, dpre).MustView(off, N*C)
					gb := toGPU(t, g, db0)
					g.geluBiasBackward(gd, gpre, gb, N, C)
					scale := 2.0
					if dt == tensor.F32 {
						scale = 8
					}
					check(t, "gelu_bias_backward", dt, true, name, "dpre", toHost(t, g, gd), want, dt, scale)
					got := toHost(t, g, gb)
					check(t, "gelu_bias_backward", dt, true, name, "dbias", got, wantB, dt, 4*sqrtScale(N))
					if run == 0 {
						bits = append([]byte(nil), got.Raw()...)
					} else if string(bits) != string(got.Raw()) {
						t.Errorf("gelu_bias_backward %s %s: dbias differs between two runs of the same inputs", dt, name)
					}
				}
				gd := toGPU(t, g, dpre).MustView(off, N*C)
				g.geluBiasBackward(gd, gpre, nil, N, C)
				check(t, "gelu_bias_backward", dt, true, name+"_nobias", "dpre", toHost(t, g, gd), want, dt, map[bool]float64{true: 8, false: 2}[dt == tensor.F32])
			}
		}
	}
}
