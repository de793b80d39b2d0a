package gpu

import (
	"fmt"
	"testing"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/tensor"
)

// TestGPUGELUOp checks device.GELUer's GELU (what recomputation of the
// MLP's GELU runs) against the CPU twin, each form, every float dtype,
// odd sizes, on a poisoned output, within device.GELUForward's tolerance.
func TestGPUGELUOp(t *testing.T) {
	rng := testRNG(t)
	for _, fused := range forms {
		g := gpuDev(t, fused)
		c := cpu.New(device.Options{Fused: fused})
		for _, dt := range floatDTypes {
			for _, n := range []int{1, 333, 1 << 20} {
				inp := randHost(rng, dt, 0, 2, n)
				want := tensor.New(dt, n)
				c.GELU(want, inp, n)
				if err := c.Sync(); err != nil {
					t.Fatal(err)
				}
				out := poisoned(t, g, dt, n)
				g.GELU(out, toGPU(t, g, inp), n)
				if err := g.Sync(); err != nil {
					t.Fatal(err)
				}
				check(t, "GELU", dt, fused, fmt.Sprint("n", n), "out", toHost(t, g, out), want, dt, device.GELUForward.Tol(dt, []int{n}))
			}
		}
	}
}
