package cpu

import (
	"fmt"
	"testing"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// BenchmarkGemv: Matmul of one row and of four (the decode step's linear
// layer at batch 1 and 4) at tiny's and gpt2-124M's shapes, fp32 and bf16
// (weights and activations of that dtype, as the policies hold them), in
// GB/s of weights read (once a call, however many rows).
func BenchmarkGemv(b *testing.B) {
	rng := tensor.NewRNG(1)
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16} {
		for _, N := range []int{1, 4} {
			for _, s := range [][2]int{{128, 512}, {512, 128}, {768, 2304}, {768, 50304}} {
				C, OC := s[0], s[1]
				for _, threads := range []int{1, 2} {
					b.Run(fmt.Sprintf("%s/N%d_C%d_OC%d_t%d", dt, N, C, OC, threads), func(b *testing.B) {
						d := New(device.Options{Fused: true, Threads: threads})
						x, w, out := tensor.New(dt, N, C), tensor.New(dt, OC, C), tensor.New(dt, N, OC)
						if err := w.SetF32(randF32(rng, OC*C)); err != nil {
							b.Fatal(err)
						}
						if err := x.SetF32(randF32(rng, N*C)); err != nil {
							b.Fatal(err)
						}
						b.SetBytes(int64(dt.Size() * OC * C))
						for b.Loop() {
							d.Matmul(out, nil, x, w, nil, N, C, OC, device.None)
						}
					})
				}
			}
		}
	}
}
