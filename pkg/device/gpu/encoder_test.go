package gpu

import (
	"fmt"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// encoderShapes are (B, T, C, V, hot): single elements, heavy token
// collisions (V 3, V 1), odd sizes, the small preset's step (V 256: the
// positions split in 8 ranges), GPT-2's sizes, and with hot = 1 every other
// token the same id (V-1): more than encoder_backward keeps per flush, in
// both the sorted (V > 1024) and the single-id (V <= 1024) blocks.
var encoderShapes = [][5]int{{1, 1, 1, 1, 0}, {3, 17, 96, 3, 0}, {2, 17, 1000, 50, 0}, {2, 700, 32, 1, 0},
	{3, 600, 20, 5, 1}, {4, 1000, 40, 1000, 1}, {4, 1024, 64, 2000, 1}, {32, 256, 256, 256, 0},
	{2, 1024, 768, 50304, 0}}

// randTokens returns n tokens in [0,V).
func randTokens(rng *tensor.RNG, n, V int) *tensor.Tensor {
	tok := tensor.New(tensor.I32, n)
	for i := range tok.I32() {
		tok.I32()[i] = int32(rng.Intn(V))
	}
	return tok
}

// TestGPUEncoder checks Encoder and EncoderBackward (accumulating into
// random gradients) against the CPU reference at scale 1: the forward is
// one fp32 addition per element and the backward adds in the same order as
// the CPU (the results are expected to be bit-identical; the log says so).
// It also checks that the backward gives the same bits twice.
func TestGPUEncoder(t *testing.T) {
	rng := testRNG(t)
	for _, fused := range forms {
		g, ref := gpuDev(t, fused), cpuRef(fused)
		for _, dt := range floatDTypes {
			for _, sh := range shortTo(encoderShapes, 6) {
				B, T, C, V := sh[0], sh[1], sh[2], sh[3]
				maxT := T + 3
				name := fmt.Sprintf("B%d_T%d_C%d_V%d", B, T, C, V)
				wte, wpe := randHost(rng, dt, 0, 1, V, C), randHost(rng, dt, 0, 1, maxT, C)
				tok := randTokens(rng, B*T, V)
				if sh[4] == 1 {
					name += "_hot"
					for i := 0; i < B*T; i += 2 {
						tok.I32()[i] = int32(V - 1)
					}
				}
				// A split of the positions sums each id's rows in S
				// partial sums: not the CPU's order, so up to k·eps of
				// the partial sums apart for an id seen k times; unsplit,
				// the fused form adds in the CPU's order (bit-identical).
				pl := g.encoderPlan(B*T, V)
				count := make([]int, V)
				maxCount := 0
				for _, v := range tok.I32() {
					count[v]++
					maxCount = max(maxCount, count[v])
				}
				teScale := 1.0
				if pl.S > 1 {
					teScale = max(1, float64(maxCount)/8)
				}
				want := tensor.New(tensor.F32, B, T, C)
				ref.Encoder(want, wte, wpe, tok, B, T, C)
				if err := ref.Sync(); err != nil {
					t.Fatal(err)
				}
				out := poisoned(t, g, tensor.F32, B, T, C)
				gtok := toGPU(t, g, tok)
				g.Encoder(out, toGPU(t, g, wte), toGPU(t, g, wpe), gtok, B, T, C)
				got := toHost(t, g, out)
				check(t, "encoder", dt, fused, name, "out", got, want, tensor.F32, 1)
				if string(got.Raw()) != string(want.Raw()) {
					t.Logf("encoder %s %s %s: out not bit-identical to the CPU", dt, formName(fused), name)
				}

				// Backward: fp32 gradients and an fp32 dout (the residual
				// stream's gradient) under every policy.
				dout := randHost(rng, tensor.F32, 0, 1, B, T, C)
				dwte0, dwpe0 := randHost(rng, tensor.F32, 0, 1, V, C), randHost(rng, tensor.F32, 0, 1, maxT, C)
				wantTe, wantPe := clone(dwte0), clone(dwpe0)
				ref.EncoderBackward(wantTe, wantPe, dout, tok, B, T, C)
				if err := ref.Sync(); err != nil {
					t.Fatal(err)
				}
				gdout := toGPU(t, g, dout)
				var first [2]string
				for run := range 2 {
					dwte, dwpe := toGPU(t, g, dwte0), toGPU(t, g, dwpe0)
					if pl.S > 1 { // NaN in the partial sums: every one must be written
						part := g.scratch("encoder.part", pl.S*V*C*4)
						if err := g.Stream().Memset8(part, 0xff, uint64(pl.S*V*C*4)); err != nil {
							t.Fatal(err)
						}
					}
					g.EncoderBackward(dwte, dwpe, gdout, gtok, B, T, C)
					gotTe, gotPe := toHost(t, g, dwte), toHost(t, g, dwpe)
					if run == 0 {
						check(t, "encoder_backward", dt, fused, name, "dwte", gotTe, wantTe, tensor.F32, teScale)
						check(t, "encoder_backward", dt, fused, name, "dwpe", gotPe, wantPe, tensor.F32, 1)
						bitsTe, bitsPe := string(gotTe.Raw()) == string(wantTe.Raw()), string(gotPe.Raw()) == string(wantPe.Raw())
						switch {
						case fused && (!bitsPe || (pl.S == 1 && !bitsTe)):
							t.Errorf("encoder_backward %s %s (split %d): dwte bit-identical %v, dwpe %v; want the CPU's bits", formName(fused), name, pl.S, bitsTe, bitsPe)
						case !bitsTe || !bitsPe:
							t.Logf("encoder_backward %s %s (split %d): not bit-identical to the CPU", formName(fused), name, pl.S)
						}
						first = [2]string{string(gotTe.Raw()), string(gotPe.Raw())}
					} else if first != [2]string{string(gotTe.Raw()), string(gotPe.Raw())} {
						t.Errorf("encoder_backward %s %s: two runs gave different bits", formName(fused), name)
					}
				}
				g.Free(gdout)
			}
		}
	}
}
