package gpu

import (
	"fmt"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// encoderShapes are (B, T, C, V): single elements, heavy token collisions
// (V 3), odd sizes, and GPT-2's sizes.
var encoderShapes = [][4]int{{1, 1, 1, 1}, {3, 17, 96, 3}, {2, 17, 1000, 50}, {2, 1024, 768, 50304}}

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
			for _, sh := range encoderShapes {
				B, T, C, V := sh[0], sh[1], sh[2], sh[3]
				maxT := T + 3
				name := fmt.Sprintf("B%d_T%d_C%d_V%d", B, T, C, V)
				wte, wpe := randHost(rng, dt, 0, 1, V, C), randHost(rng, dt, 0, 1, maxT, C)
				tok := randTokens(rng, B*T, V)
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
					g.EncoderBackward(dwte, dwpe, gdout, gtok, B, T, C)
					gotTe, gotPe := toHost(t, g, dwte), toHost(t, g, dwpe)
					if run == 0 {
						check(t, "encoder_backward", dt, fused, name, "dwte", gotTe, wantTe, tensor.F32, 1)
						check(t, "encoder_backward", dt, fused, name, "dwpe", gotPe, wantPe, tensor.F32, 1)
						if string(gotTe.Raw()) != string(wantTe.Raw()) || string(gotPe.Raw()) != string(wantPe.Raw()) {
							t.Logf("encoder_backward %s %s: not bit-identical to the CPU", formName(fused), name)
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
