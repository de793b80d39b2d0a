package gpu

// microbench_gemm.go: the GEMM rows of the micro-benchmarks: each linear
// layer of GPT-2 124M's step (B 16, T 1024: N = 16384 rows, C = 768) under
// the BF16 policy's dtypes, forward and backward as the model calls them
// (with their epilogues: bias, bias+GELU, the bias gradients, the GELU
// backward of the MLP projection's dgrad: "fused" the default form of
// MatmulBackwardGELU, "fused-epilogue" or "fused-kernel" the other one,
// see DGELUEnv), and "gemm_peak", a square bf16
// product of 8192 (what bench.Peak measures), so that every row's TFLOP/s
// stands beside the peak of the same run (KernelResult.PctOfPeak).
//
// Forms: "fused" runs each cuBLASLt matmul's chosen algorithm (the
// heuristic's first, or DRUTO_GEMM_TUNE=1's fastest); "decomposed" the
// eager baseline (cuBLAS, then the separate bias, GELU and column-sum
// kernels). The attention projection's rows (the weak shape, 16384x768x768)
// add "fused-algoK": the K-th candidate for every cuBLASLt matmul of the op
// (the heuristic's, then for the weight gradients the first split over K
// in 2, 4, 8 and 16 parts; a row is left out where an op's matmul has
// fewer candidates), with the candidates' tile, split-K and stages in the
// shape column: the rows that show which algorithm would help. The other
// shapes' candidates are timed in the step itself by DRUTO_GEMM_TUNE=1.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// gemmOps are the GEMM micro-benchmarks, in KernelOps.
var gemmOps = []string{
	"gemm_peak",
	"gemm_qkv_fwd", "gemm_qkv_bwd", "gemm_attn_proj_fwd", "gemm_attn_proj_bwd",
	"gemm_mlp_fc_fwd", "gemm_mlp_fc_bwd", "gemm_mlp_proj_fwd", "gemm_mlp_proj_bwd",
	"gemm_attn_proj_dgrad", "gemm_attn_proj_wgrad", "gemm_attn_proj_wgrad_bgrad",
}

// errNoCandidate marks a fused-algoK form whose op has a matmul with fewer
// than K candidates: the row is left out.
var errNoCandidate = errors.New("gpu: bench: no such candidate algorithm")

// newGEMMCase allocates the operands of GEMM micro-benchmark name on d.
func newGEMMCase(name string, d *Device) (*kernelCase, error) {
	const N, C = 16 * 1024, 768
	a := &allocs{d: d, rng: tensor.NewRNG(1)}
	bf, f32 := tensor.BF16, tensor.F32
	kc := &kernelCase{free: a.free}
	// layer: a linear layer (N,in) -> (N,out); fwd: bytes of the operands
	lin := func(in, out int) string { return fmt.Sprintf("%dx%dx%d (N x out x in) bf16", N, out, in) }
	switch name {
	case "gemm_peak":
		const n = 8192
		x, w, o := a.rand(bf, 0, 0.5, n, n), a.rand(bf, 0, 0.5, n, n), a.zeros(bf, n, n)
		kc.shape = fmt.Sprintf("%d^3 bf16, fp32 accumulation", n)
		kc.flops = 2 * n * n * n
		kc.bytes = 3 * n * n * 2
		kc.run = func() { d.Matmul(o, nil, x, w, nil, n, n, n, device.None) }
	case "gemm_qkv_fwd", "gemm_attn_proj_fwd", "gemm_mlp_fc_fwd", "gemm_mlp_proj_fwd":
		in, out, act := C, 3*C, device.None
		switch name {
		case "gemm_attn_proj_fwd":
			out = C
		case "gemm_mlp_fc_fwd":
			out, act = 4*C, device.GELU
		case "gemm_mlp_proj_fwd":
			in, out = 4*C, C
		}
		x, w, b, o := a.rand(bf, 0, 1, N, in), a.rand(bf, 0, 0.02, out, in), a.rand(bf, 0, 0.02, out), a.zeros(bf, N, out)
		var pre *tensor.Tensor
		if act == device.GELU {
			pre = a.zeros(bf, N, out)
		}
		kc.shape = lin(in, out) + ", bias"
		if act == device.GELU {
			kc.shape += "+GELU (pre saved)"
		}
		kc.flops = 2 * int64(N) * int64(in) * int64(out)
		kc.bytes = int64(N*in+out*in+out+N*out) * 2
		if pre != nil {
			kc.bytes += int64(N*out) * 2
		}
		kc.run = func() { d.Matmul(o, pre, x, w, b, N, in, out, act) }
	case "gemm_qkv_bwd", "gemm_attn_proj_bwd", "gemm_mlp_fc_bwd":
		// qkv: dout bf16 (dqkv); attn proj: the fp32 residual gradient;
		// fc: dout bf16 (dfch), its bias gradient taken by the projection's.
		in, out, doutDT, withBias := C, 3*C, bf, true
		switch name {
		case "gemm_attn_proj_bwd":
			out, doutDT = C, f32
		case "gemm_mlp_fc_bwd":
			out, withBias = 4*C, false
		}
		dinp, dw := a.rand(bf, 0, 1, N, in), a.rand(f32, 0, 1, out, in)
		dout, x, w := a.rand(doutDT, 0, 1, N, out), a.rand(bf, 0, 1, N, in), a.rand(bf, 0, 0.02, out, in)
		var db *tensor.Tensor
		if withBias {
			db = a.rand(f32, 0, 1, out)
		}
		kc.shape = lin(in, out) + fmt.Sprintf(": dinp, dweight f32 (beta 1), dout %s", doutDT)
		if withBias {
			kc.shape += ", dbias"
		}
		kc.flops = 4 * int64(N) * int64(in) * int64(out)
		kc.bytes = int64(N*in)*2*2 + int64(out*in)*4*2 + int64(N*out*doutDT.Size()) + int64(N*in)*2 + int64(out*in)*2
		kc.reset = func() { d.Zero(dinp) }
		kc.run = func() { d.MatmulBackward(dinp, dw, db, dout, x, w, N, in, out) }
	case "gemm_mlp_proj_bwd":
		in, out := 4*C, C
		dpre, dpb, dw, db := a.zeros(bf, N, in), a.rand(f32, 0, 1, in), a.rand(f32, 0, 1, out, in), a.rand(f32, 0, 1, out)
		dout, x, pre, w := a.rand(f32, 0, 1, N, out), a.rand(bf, 0, 1, N, in), a.rand(bf, 0, 2, N, in), a.rand(bf, 0, 0.02, out, in)
		kc.shape = lin(in, out) + ": dgrad stored, then gelu_bias_backward (GELU backward and the fc bias gradient), dweight f32, dbias, dout f32"
		if d.fused && d.dgeluEpi {
			kc.shape = lin(in, out) + ": dgrad with GELU backward and the fc bias gradient (DGELU_BGRAD), dweight f32, dbias, dout f32"
		} else if !d.fused {
			kc.shape = lin(in, out) + ": dgrad, GELU backward and the fc bias gradient as separate passes, dweight f32, dbias, dout f32"
		}
		kc.flops = 4 * int64(N) * int64(in) * int64(out)
		kc.bytes = int64(N*in)*2*3 + int64(out*in)*(4*2+2) + int64(N*out)*4
		kc.run = func() { d.MatmulBackwardGELU(dpre, dpb, dw, db, dout, x, pre, w, N, in, out) }
	case "gemm_attn_proj_dgrad", "gemm_attn_proj_wgrad", "gemm_attn_proj_wgrad_bgrad":
		// The attention projection's backward products one at a time (the
		// weak shape: the wgrad's output is 768x768, 36 tiles of 128x128 for
		// 132 SMs unless split over K): fused, cuBLASLt; decomposed, cuBLAS.
		// wgrad_bgrad is the wgrad with its BGRADB epilogue (and the add of
		// the bias vector), as MatmulBackward runs it; decomposed, cuBLAS and
		// the column-sum kernel.
		dout, x, w := a.rand(bf, 0, 1, N, C), a.rand(bf, 0, 1, N, C), a.rand(bf, 0, 0.02, C, C)
		dinp, dw, db := a.rand(bf, 0, 1, N, C), a.rand(f32, 0, 1, C, C), a.rand(f32, 0, 1, C)
		kc.flops = 2 * int64(N) * C * C
		kc.bytes = int64(N*C)*2*2 + int64(C*C)*4*2
		var e cuda.Gemm
		switch name {
		case "gemm_attn_proj_dgrad":
			kc.shape = fmt.Sprintf("dinp (%d,%d) bf16 += dout·W: M=%d N=%d K=%d", N, C, C, N, C)
			e = cuda.Gemm{M: C, N: N, K: C, Alpha: 1, Beta: 1, A: d.ptr(w), B: d.ptr(dout), C: d.ptr(dinp),
				AType: cuda.R16BF, BType: cuda.R16BF, CType: cuda.R16BF, LDA: C, LDB: C, LDC: C, Compute: cuda.Compute32F}
			kc.bytes = int64(N*C)*2*3 + int64(C*C)*2
		case "gemm_attn_proj_wgrad":
			kc.shape = fmt.Sprintf("dW (%d,%d) f32 += doutᵀ·inp: M=%d N=%d K=%d", C, C, C, C, N)
			e = cuda.Gemm{TransB: true, M: C, N: C, K: N, Alpha: 1, Beta: 1, A: d.ptr(x), B: d.ptr(dout), C: d.ptr(dw),
				AType: cuda.R16BF, BType: cuda.R16BF, CType: cuda.R32F, LDA: C, LDB: C, LDC: C, Compute: cuda.Compute32F}
		case "gemm_attn_proj_wgrad_bgrad":
			kc.shape = fmt.Sprintf("dW (%d,%d) f32 += doutᵀ·inp, dbias += Σ dout: M=%d N=%d K=%d", C, C, C, C, N)
			kc.run = func() { d.weightGrad(name, dw, db, dout, d.ptr(dout), x, N, C, C, cuda.R16BF) }
		}
		if kc.run == nil {
			kc.run = func() {
				if !d.ltGemm(e) {
					if err := d.gemm(e); err != nil {
						d.fail(fmt.Errorf("gpu: bench: %s: %w", name, err))
					}
				}
			}
		}
	default:
		return nil, fmt.Errorf("gpu: bench: no GEMM micro-benchmark %q (have %v)", name, gemmOps)
	}
	if a.err != nil {
		a.free()
		return nil, fmt.Errorf("gpu: bench: %s: %w", name, a.err)
	}
	// One run that configures the op's cuBLASLt matmuls (outside the timing)
	// and names the algorithms it ran.
	var used []*cuda.LtMatmul
	d.ltx.trace, d.ltx.missed = &used, 0
	kc.run()
	d.ltx.trace = nil
	if err := d.Sync(); err != nil {
		a.free()
		return nil, fmt.Errorf("gpu: bench: %s: %w", name, err)
	}
	if d.ltx.force > 0 && d.ltx.missed > 0 {
		a.free()
		return nil, errNoCandidate
	}
	var algos []string
	for _, m := range used {
		algos = append(algos, fmt.Sprintf("[#%d of %d: %s]", m.Algo(), m.Algos(), m.AlgoInfo(m.Algo())))
	}
	if len(algos) > 0 {
		kc.shape += "; cuBLASLt " + strings.Join(algos, " ")
	}
	return kc, nil
}
