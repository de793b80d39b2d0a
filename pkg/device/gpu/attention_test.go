package gpu

import (
	"fmt"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// attnShapes are (B, T, C, NH): T of 1, an odd T with an odd head size,
// GPT-2's head size at T 1024, and one run in chunks of one batch row.
var attnShapes = []struct {
	B, T, C, NH int
	chunked     bool
}{
	{2, 1, 8, 2, false},
	{3, 17, 60, 4, false}, // hs 15
	{3, 64, 128, 2, true},
	{1, 1024, 768, 12, false}, // last: left out under -test.short
}

// TestGPUAttention checks Attention and AttentionBackward (accumulating into
// a random dqkv) against the CPU reference, outputs poisoned first.
// Tolerances: 16-bit forward outputs by their dtype. The 16-bit backward at
// scale 6: dqkv accumulates into random 16-bit values, and cuBLAS rounds
// each product α·A·B to the 16-bit type before adding β·C (see
// device.Ops.MatmulBackward), so an element near zero can differ from the
// CPU's single rounding by half an ulp of its gradient term (|term| up to
// ~3 here: 0.0078 in bf16, 5 atol); the GPU also rounds the score gradient
// dpre to the GEMM type (the CPU keeps it fp32). The model test bounds the
// effect on a whole gradient. fp32 outputs by sqrtScale(T), the length of
// the att·v and score-gradient sums.
//
// This is the cuBLAS path (the probabilities saved): the fused device runs
// with noFlash set here; flash_test.go tests the flash kernels.
func TestGPUAttention(t *testing.T) {
	rng := testRNG(t)
	for _, fused := range forms {
		g, ref := gpuDev(t, fused), cpuRef(fused)
		g.noFlash = true
		defer func() { g.noFlash = false }()
		for _, dt := range floatDTypes {
			for _, sh := range trim(attnShapes) {
				B, T, C, NH := sh.B, sh.T, sh.C, sh.NH
				name := fmt.Sprintf("B%d_T%d_C%d_NH%d", B, T, C, NH)
				old := attnScratchBytes
				if sh.chunked { // one batch row per chunk
					attnScratchBytes = NH * T * T * 4
					name += "_chunked"
				}
				qkv := randHost(rng, dt, 0, 1, B, T, 3*C)
				wantOut, wantAtt := tensor.New(dt, B, T, C), tensor.New(dt, B, NH, T, T)
				ref.Attention(wantOut, wantAtt, qkv, B, T, C, NH)
				if err := ref.Sync(); err != nil {
					t.Fatal(err)
				}
				out, att := poisoned(t, g, dt, B, T, C), poisoned(t, g, dt, B, NH, T, T)
				gqkv := toGPU(t, g, qkv)
				g.Attention(out, att, gqkv, B, T, C, NH)
				// out sums T products p·v in an order (and, under
				// compute-sanitizer, a cuBLAS algorithm) that differs from
				// the CPU's, in every dtype: at T 1024 an f16 output once
				// landed 9 ulps off under racecheck.
				scale := sqrtScale(T)
				if dt != tensor.F32 {
					// both forms round the probabilities to the 16-bit
					// type before att·v: a second rounding of every term
					// (f16 outputs at T 64 landed 1.3x and 1.4x over the
					// dtype's tolerance, and 1.4x over twice it, on the
					// H200 under random seeds)
					scale *= 4
				}
				check(t, "attention", dt, fused, name, "out", toHost(t, g, out), wantOut, dt, scale)
				gotAtt := toHost(t, g, att)
				check(t, "attention", dt, fused, name, "att", gotAtt, wantAtt, dt, scale)

				// Backward from the CPU's probabilities on both sides, so
				// that only the backward is compared.
				dout := randHost(rng, dt, 0, 1, B, T, C)
				dqkv0 := randHost(rng, dt, 0, 1, B, T, 3*C)
				want := clone(dqkv0)
				ref.AttentionBackward(want, dout, qkv, nil, wantAtt, B, T, C, NH)
				if err := ref.Sync(); err != nil {
					t.Fatal(err)
				}
				dqkv := toGPU(t, g, dqkv0)
				g.AttentionBackward(dqkv, toGPU(t, g, dout), gqkv, out, toGPU(t, g, wantAtt), B, T, C, NH)
				bscale := 6.0
				if dt == tensor.F32 {
					bscale = sqrtScale(T)
				}
				check(t, "attention_backward", dt, fused, name, "dqkv", toHost(t, g, dqkv), want, dt, bscale)
				attnScratchBytes = old
			}
		}
	}
}
