package gpu

import (
	"testing"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/device/devicetest"
	"github.com/druto/druto/pkg/tensor"
)

// TestGPUMatmulMMA runs the conformance cases of Matmul whose rows fall to
// matmul_mma (9 to 64 rows, 16-bit; among them GPT-2's products at batch 16
// and 64, where the kernel splits C over several blocks) against the CPU
// reference, once with matmul_mma and once on cuBLASLt, and checks that the
// first form launched matmul_mma and the second did not. Needs a GPU of
// sm_80 or newer.
func TestGPUMatmulMMA(t *testing.T) {
	g := gpuDev(t, true)
	if g.funcs[kernelKey{"matmul_mma", tensor.BF16}] == nil {
		t.Skipf("matmul_mma is not built for this GPU: %v", g.errs[kernelKey{"matmul_mma", tensor.BF16}])
	}
	ref := cpu.New(device.Options{Fused: true})
	rng := testRNG(t)
	n := 0
	for _, c := range append(devicetest.Cases(), devicetest.Large()...) {
		if c.Contract != &device.Ops.Matmul || c.DType == tensor.F32 || c.Sizes[0] <= rowsMax || c.Sizes[0] > mmaRows || c.Sizes[1]%32 != 0 {
			continue
		}
		for _, off := range []bool{false, true} {
			g.noMMA = off
			g.trace = map[kernelKey]bool{}
			res := devicetest.Run(g, ref, c, rng.Uint64())
			ran := g.trace[kernelKey{"matmul_mma", c.DType}]
			g.trace, g.noMMA = nil, false
			t.Logf("RESULT %s noMMA %v: pass %v relerr %.3g matmul_mma %v %s", res.Case, off, res.Pass, res.MaxRelErr, ran, res.Error)
			if !res.Pass {
				t.Errorf("%s (noMMA %v): %s", res.Case, off, res.Error)
			}
			if ran == off {
				t.Errorf("%s (noMMA %v): matmul_mma launched %v", res.Case, off, ran)
			}
			n++
		}
	}
	if n < 24 {
		t.Errorf("%d runs; want at least 24 (the cases of 9 to 64 rows, both forms)", n)
	}
}
