package cpu

// fp8.go: the CPU reference of an FP8 GEMM with per-tensor scales, as
// cuBLASLt computes it on sm_89+ (issue 38; pkg/device/gpu's MatmulFP8 is
// the GPU side, and its TestGPUMatmulFP8 compares against MatmulFP8).
//
// cuBLASLt's FP8 matmul computes
//
//	D = scale_D · (alpha · scale_A · scale_B · op(A)·op(B) + beta · scale_C · C)
//
// where scale_A, scale_B are float32 scalars in device memory, set with
// CUBLASLT_MATMUL_DESC_A_SCALE_POINTER and _B_SCALE_POINTER. They convert
// the fp8 data back to its real range, so they are the inverses of the
// scales the operands were cast with: an operand stored as qa = fp8(a·sa)
// takes scale_A = 1/sa (Transformer Engine passes its scale_inv there).
// scale_D applies only to an FP8 output; druto's outputs are bf16 or fp32,
// so scale_D is 1 and D = (1/sa)·(1/sb)·qa·qbᵀ. The GPU conformance case
// is where this reading of the convention gets checked against the library.
//
// Hopper's FP8 GEMMs take only the "TN" layout, both operands K-major: here
// qa is (N, C) and qb is (OC, C), rows of C contiguous, as the linear
// layer's input and weight already are.

import "github.com/druto/druto/pkg/tensor"

// MatmulFP8 computes the reference of an FP8 GEMM in fp32:
//
//	out[n][o] = (Σ_c fa(qa[n][c]) · fb(qb[o][c])) · invA · invB
//
// out (N,OC) fp32, qa (N,C) in format fa cast with scale 1/invA, qb (OC,C)
// in format fb cast with scale 1/invB. Each product of two FP8 values is
// exact in fp32 (4 bits times 4 bits of significand, exponents far inside
// fp32's range), and the sum over c accumulates in fp32 in order, as a
// tensor core's fp32 accumulator does (up to the order of the additions).
// The scales multiply the sum once, at the end.
func MatmulFP8(out []float32, qa, qb []uint8, fa, fb tensor.FP8Format, invA, invB float32, N, C, OC int) {
	out, qa, qb = out[:N*OC], qa[:N*C], qb[:OC*C]
	a := make([]float32, len(qa))
	b := make([]float32, len(qb))
	tensor.DequantizeFP8(a, qa, 1, fa)
	tensor.DequantizeFP8(b, qb, 1, fb)
	for n := range N {
		ar := a[n*C : (n+1)*C]
		for o := range OC {
			br := b[o*C : (o+1)*C]
			var acc float32
			for c, x := range ar {
				acc += x * br[c]
			}
			out[n*OC+o] = acc * invA * invB // not invA·invB first: it could underflow
		}
	}
}
