package cpu

import (
	"fmt"
	"testing"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// BenchmarkGemv: Matmul of one row (the decode step's linear layer) at
// tiny's and gpt2-124M's shapes, in GB/s of weights read.
func BenchmarkGemv(b *testing.B) {
	rng := tensor.NewRNG(1)
	for _, s := range [][2]int{{128, 512}, {512, 128}, {768, 2304}, {768, 50304}} {
		C, OC := s[0], s[1]
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("C%d_OC%d_t%d", C, OC, threads), func(b *testing.B) {
				d := New(device.Options{Fused: true, Threads: threads})
				x := tensor.New(tensor.F32, 1, C)
				w := tensor.New(tensor.F32, OC, C)
				_ = w.SetF32(randF32(rng, OC*C))
				_ = x.SetF32(randF32(rng, C))
				out := tensor.New(tensor.F32, 1, OC)
				b.SetBytes(int64(4 * OC * C))
				for b.Loop() {
					d.Matmul(out, nil, x, w, nil, 1, C, OC, device.None)
				}
			})
		}
	}
}
