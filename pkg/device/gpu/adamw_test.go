package gpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// adamLayout has segments of odd sizes and offsets (so chunks start off the
// 4-element alignment), one over several chunks, decayed and not, and a gap
// no segment covers (which must be left alone).
func adamLayout() *tensor.Layout {
	l := &tensor.Layout{}
	l.Add("a", true, 1)
	l.Add("b", false, 17)
	l.Add("c", true, 768, 3)
	l.Add("d", false, 1000)
	l.Add("e", true, 3*768, 768)
	l.Total += 5 // the gap
	l.Add("f", false, 5)
	return l
}

// TestGPUAdamW checks AdamWStep, both forms, against the CPU reference for
// every working-copy dtype (and none), with and without a gradient scale.
// Scale 1: every operation is an explicitly rounded fp32 operation in the
// reference's order (sqrt and division correctly rounded), so the results
// are expected to be bit-identical; the log counts any element that is not.
func TestGPUAdamW(t *testing.T) {
	rng := testRNG(t)
	layout := adamLayout()
	n := layout.Total
	for _, fused := range []bool{true, false} {
		g, ref := gpuDev(t, fused), cpuRef(fused)
		for _, wdt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16, 0} {
			for _, gs := range []float32{0, 1.0 / 1024} {
				hp := device.AdamW{LR: 3e-4, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Step: 1 + rng.Intn(5000), GradScale: gs}
				std := 0.01 // gradients as a loss-scaled step leaves them: scaled up by 1/gs
				if gs != 0 {
					std /= float64(gs)
				}
				master, grads := randHost(rng, tensor.F32, 0, 0.05, n), randHost(rng, tensor.F32, 0, std, n)
				m := randHost(rng, tensor.F32, 0, 1e-3, n)
				v := tensor.New(tensor.F32, n)
				for i, x := range randHost(rng, tensor.F32, 0, 1e-3, n).F32() {
					v.F32()[i] = x * x
				}
				wantP, wantM, wantV := clone(master), clone(m), clone(v)
				var wantW, gwork *tensor.Tensor
				name := fmt.Sprintf("work_%s_gs%g_step%d", wdt, gs, hp.Step)
				if wdt != 0 {
					wantW = tensor.New(wdt, n)
					gwork = poisoned(t, g, wdt, n)
				} else {
					name = fmt.Sprintf("nowork_gs%g_step%d", gs, hp.Step)
				}
				ref.AdamWStep(wantP, wantW, grads, wantM, wantV, layout, hp)
				if err := ref.Sync(); err != nil {
					t.Fatal(err)
				}
				gp, gm, gv := toGPU(t, g, master), toGPU(t, g, m), toGPU(t, g, v)
				g.AdamWStep(gp, gwork, toGPU(t, g, grads), gm, gv, layout, hp)
				dt := wdt
				if dt == 0 {
					dt = tensor.F32
				}
				for _, o := range []struct {
					name      string
					got, want *tensor.Tensor
				}{{"master", toHost(t, g, gp), wantP}, {"m", toHost(t, g, gm), wantM}, {"v", toHost(t, g, gv), wantV}} {
					check(t, "adamw", dt, fused, name, o.name, o.got, o.want, tensor.F32, 1)
					if diff := bitDiffs(o.got, o.want); diff > 0 {
						t.Logf("adamw %s %s %s: %d of %d elements not bit-identical to the CPU", formName(fused), name, o.name, diff, n)
					}
				}
				if wdt != 0 {
					got := toHost(t, g, gwork)
					// the gap is no segment's: the work copy keeps its poison there
					gap := layout.Segments[len(layout.Segments)-1].Offset - 5
					for i := gap; i < gap+5; i++ {
						if v := got.ToF32()[i]; !math.IsNaN(float64(v)) {
							t.Fatalf("adamw %s: element %d outside every segment was written (%g)", name, i, v)
						}
					}
					// compare the segments only (wantW is zero in the gap)
					gotSeg, wantSeg := tensor.New(wdt, n-5), tensor.New(wdt, n-5)
					es := wdt.Size()
					copy(gotSeg.Raw(), got.Raw()[:gap*es])
					copy(gotSeg.Raw()[gap*es:], got.Raw()[(gap+5)*es:])
					copy(wantSeg.Raw(), wantW.Raw()[:gap*es])
					copy(wantSeg.Raw()[gap*es:], wantW.Raw()[(gap+5)*es:])
					check(t, "adamw", dt, fused, name, "work", gotSeg, wantSeg, wdt, 1)
				}
			}
		}
	}
}

// bitDiffs counts the elements whose bytes differ.
func bitDiffs(a, b *tensor.Tensor) int {
	es := a.DType.Size()
	ra, rb := a.Raw(), b.Raw()
	n := 0
	for i := 0; i+es <= len(ra) && i+es <= len(rb); i += es {
		if string(ra[i:i+es]) != string(rb[i:i+es]) {
			n++
		}
	}
	return n
}
