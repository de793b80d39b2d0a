package gpu

import (
	"fmt"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// TestGPUCast checks Cast between every pair of float dtypes against the
// CPU's conversions (both round to nearest even once: scale 1; the log
// counts elements that are not bit-identical), into poisoned outputs, at
// odd sizes and through views off the vector alignment.
func TestGPUCast(t *testing.T) {
	rng := testRNG(t)
	g, ref := gpuDev(t, true), cpuRef(true)
	for _, from := range floatDTypes {
		for _, to := range floatDTypes {
			for _, n := range trim([]int{1, 999, 1<<20 + 1}) {
				for _, off := range []int{0, 1} {
					src := randHost(rng, from, 0, 100, n+off)
					want := tensor.New(to, n)
					ref.Cast(want, src.MustView(off, n))
					if err := ref.Sync(); err != nil {
						t.Fatal(err)
					}
					dst := poisoned(t, g, to, n+off)
					g.Cast(dst.MustView(off, n), toGPU(t, g, src).MustView(off, n))
					got := toHost(t, g, dst).MustView(off, n)
					name := fmt.Sprintf("%s_to_%s_n%d_off%d", from, to, n, off)
					check(t, "cast", to, true, name, "dst", got, want, to, 1)
					if diff := bitDiffs(got, want); diff > 0 {
						t.Logf("cast %s: %d of %d elements not bit-identical to the CPU", name, diff, n)
					}
				}
			}
		}
	}
}
