package gpu

import (
	"fmt"
	"testing"

	"github.com/druto/druto/internal/gputest"
	"github.com/druto/druto/pkg/tensor"
)

// TestGPUAddPast2G: one real tensor past 2^31 elements (issue: sizes were
// int in some launchers). Add over n = 2^31 + 4099 fp32 elements (8.6 GB
// per tensor, 25.8 GB in all) into a NaN-poisoned output must write every
// element, the ones past 2^31 included, and get each sum exactly (small
// integers add exactly in fp32).
func TestGPUAddPast2G(t *testing.T) {
	g := gpuDev(t, true)
	const n = 1<<31 + 4099
	free, _, err := g.Context().MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	if need := uint64(3 * 4 * n); free < need+(1<<30) {
		gputest.Skip(t, fmt.Errorf("%.1f GB free on %s, this test needs %.1f GB", float64(free)/1e9, g.Context().Device.Name, float64(need)/1e9))
	}
	ha, hb := tensor.New(tensor.F32, n), tensor.New(tensor.F32, n)
	a, b := ha.F32(), hb.F32()
	for i := range a {
		a[i] = float32(i % 1021)
		b[i] = float32(i % 7)
	}
	da, db := toGPU(t, g, ha), toGPU(t, g, hb)
	ha, hb, a, b = nil, nil, nil, nil // let the host copies go: 17 GB
	out := poisoned(t, g, tensor.F32, n)
	g.Add(out, da, db, n)
	got := toHost(t, g, out).F32()
	bad := 0
	for i, v := range got {
		if want := float32(i%1021 + i%7); v != want {
			if bad < 5 {
				t.Errorf("out[%d] = %v, want %v", i, v, want)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d elements wrong (the first past 2^31 is %d)", bad, n, 1<<31)
	}
	t.Logf("Add over %d elements (%.1f GB a tensor): every element right, past 2^31 too", n, 4*float64(n)/1e9)
}
