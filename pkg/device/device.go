package device

import (
	"errors"
	"fmt"
	"math"

	"github.com/druto/druto/pkg/tensor"
)

// T is the tensor type every op takes.
type T = tensor.Tensor

// Activation is the epilogue of Matmul.
type Activation uint8

// Epilogues of Matmul.
const (
	None Activation = iota // out = inp·Wᵀ + bias
	GELU                   // pre = inp·Wᵀ + bias, out = gelu(pre) (tanh form)
)

// ErrUnsupported is returned (wrapped) by an op or option a device does not
// implement; callers may fall back to the decomposed form only on this error.
var ErrUnsupported = errors.New("device: unsupported")

// AdamW holds the hyper-parameters of one optimizer step.
type AdamW struct {
	LR          float32 // learning rate of this step (after the schedule)
	Beta1       float32 // 0.9
	Beta2       float32 // 0.95
	Eps         float32 // 1e-8
	WeightDecay float32 // 0.1, applied only to segments with Decay set
	Step        int     // 1-based step count for bias correction
	GradScale   float32 // multiplies every gradient first (1/loss-scale × clip factor); 0 means 1
	Seed        uint64  // stochastic rounding of bf16 moments (MomentsBF16); unused by fp32 moments
}

// Options configure a device.
type Options struct {
	Fused   bool // fused kernels (true) or the decomposed baseline (false)
	Threads int  // CPU worker goroutines; 0 means runtime.GOMAXPROCS(0)
}

// Device is every operation of a GPT training step. See the package comment
// for the argument, accumulation and error conventions. N is the number of
// rows (B·T) where ops work row by row.
type Device interface {
	// Name describes the device, e.g. "cpu (2 threads, openblas)".
	Name() string
	// Fused reports whether this device runs the fused forms.
	Fused() bool

	// Alloc returns a zeroed tensor in this device's memory.
	Alloc(dt tensor.DType, shape ...int) (*T, error)
	// Free releases a tensor from Alloc (a no-op on the CPU).
	Free(t *T)
	// Upload copies a host tensor into a device tensor of the same dtype and size.
	Upload(dst, src *T)
	// Download copies a device tensor into a host tensor of the same dtype and size.
	Download(dst, src *T)
	// Zero sets every element to zero.
	Zero(t *T)
	// Cast converts src into dst (same number of elements, any float dtypes),
	// rounding to nearest even.
	Cast(dst, src *T)
	// Sync waits for queued work and returns the first error since the last Sync.
	Sync() error

	// Encoder: out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:].
	// out (B,T,C), wte (V,C), wpe (maxT,C), tokens (B,T) I32
	Encoder(out, wte, wpe, tokens *T, B, T, C int)
	// EncoderBackward accumulates dout into the rows of dwte and dwpe that
	// Encoder read. Deterministic: the same inputs give the same bits.
	// dwte (V,C), dwpe (maxT,C), dout (B,T,C), tokens (B,T) I32
	EncoderBackward(dwte, dwpe, dout, tokens *T, B, T, C int)

	// LayerNorm normalises each row with fp32 statistics (eps 1e-5) and
	// applies the affine weight and bias; mean and rstd are kept for backward.
	// out (N,C), mean (N) F32, rstd (N) F32, inp (N,C), weight (C), bias (C)
	LayerNorm(out, mean, rstd, inp, weight, bias *T, N, C int)
	// LayerNormBackward accumulates into dinp, dweight and dbias.
	// dinp (N,C), dweight (C), dbias (C), dout (N,C), inp (N,C), weight (C), mean (N), rstd (N)
	LayerNormBackward(dinp, dweight, dbias, dout, inp, weight, mean, rstd *T, N, C int)
	// ResidualLayerNorm computes res = a + b and out = LayerNorm(res).
	// res (N,C), out (N,C), mean (N), rstd (N), a (N,C), b (N,C), weight (C), bias (C)
	ResidualLayerNorm(res, out, mean, rstd, a, b, weight, bias *T, N, C int)
	// Add computes out = a + b elementwise over n elements (the residual of the
	// last block, which no layernorm follows in the same op).
	Add(out, a, b *T, n int)

	// Matmul computes out = inp·weightᵀ + bias (bias may be nil) with fp32
	// accumulation, then the epilogue act. With GELU, pre receives the
	// pre-activation for backward; with None, pre must be nil.
	// out (N,OC), pre (N,OC) or nil, inp (N,C), weight (OC,C), bias (OC) or nil
	Matmul(out, pre, inp, weight, bias *T, N, C, OC int, act Activation)
	// MatmulBackward accumulates dinp += dout·weight, dweight += doutᵀ·inp and
	// dbias += Σ_rows dout (dbias may be nil; dinp may be nil when not needed).
	// dinp (N,C), dweight (OC,C), dbias (OC), dout (N,OC), inp (N,C), weight (OC,C)
	MatmulBackward(dinp, dweight, dbias, dout, inp, weight *T, N, C, OC int)
	// BiasGrad accumulates dbias += Σ_rows dout in fp32: the bias gradient
	// of a layer whose output gradient is dout.
	// dbias (OC) F32, dout (N,OC)
	BiasGrad(dbias, dout *T, N, OC int)
	// MatmulBackwardGELU is MatmulBackward of a layer whose input inp is
	// gelu(pre) (the out and pre of a Matmul with GELU) with the GELU's
	// backward folded into its dinp product, as cuBLASLt's DGELU_BGRAD
	// epilogue computes it: dweight and dbias accumulate as in
	// MatmulBackward; dpre = gelu'(pre)·(dout·weight) is overwritten (not
	// accumulated: it replaces the sequence zero, MatmulBackward into dinp,
	// GELUBackward); dpreBias += Σ_rows dpre (the bias gradient of the Matmul
	// that produced pre; may be nil). The fused form computes dpre and its
	// row sums in fp32 before dpre is rounded to its dtype (the GPU's
	// default fused form rounds dout·weight to dpre's dtype first: one
	// rounding more, within the op's tolerance).
	// dpre (N,C), dpreBias (C) F32 or nil, dweight (OC,C), dbias (OC) or nil,
	// dout (N,OC), inp (N,C), pre (N,C), weight (OC,C)
	MatmulBackwardGELU(dpre, dpreBias, dweight, dbias, dout, inp, pre, weight *T, N, C, OC int)
	// GELUBackward computes dinp = gelu'(inp)·dout elementwise over n elements
	// (overwrites: it is the gradient of Matmul's GELU epilogue, not a sum).
	GELUBackward(dinp, inp, dout *T, n int)

	// AttentionState returns the dtype and shape of the state Attention
	// saves for AttentionBackward when its inputs are of dtype dt: the
	// softmax probabilities (ProbState: the CPU, the decomposed GPU path,
	// fp32) or each query row's log-sum-exp (LSEState: the GPU's fused
	// flash-attention kernels).
	AttentionState(dt tensor.DType, B, T, C, NH int) AttnState
	// Attention is causal multi-head self-attention over a packed qkv input:
	// att receives the state AttentionState describes, saved for backward.
	// out (B,T,C), att (AttentionState), qkv (B,T,3C) with q, k, v in that order
	Attention(out, att, qkv *T, B, T, C, NH int)
	// AttentionBackward accumulates into dqkv (every one of dq, dk, dv is
	// added, never stored). out is Attention's output (the flash kernels
	// need rowsum(dout∘out); the probability path ignores it).
	// dqkv (B,T,3C), dout (B,T,C), qkv (B,T,3C), out (B,T,C), att (AttentionState)
	AttentionBackward(dqkv, dout, qkv, out, att *T, B, T, C, NH int)

	// CrossEntropy computes losses[i] = -log softmax(logits[i])[targets[i]]
	// in fp32. When dscale != 0 it then overwrites logits with the gradient
	// of dscale·Σ losses: (softmax(logits[i]) - onehot(targets[i]))·dscale.
	// losses (N) F32, logits (N,V), targets (N) I32
	CrossEntropy(losses, logits, targets *T, N, V int, dscale float32)

	// AdamWStep updates the fp32 master parameters with AdamW over every
	// segment of layout (weight decay where Segment.Decay is set), updating
	// the fp32 moments m and v, and, when work is not nil, writes the
	// updated parameters rounded to work's dtype in the same pass.
	// master, grads, m, v (layout.Total) F32; work (layout.Total) 16-bit or nil
	AdamWStep(master, work, grads, m, v *T, layout *tensor.Layout, hp AdamW)
	// GradNorm returns the global L2 norm of grads·scale in fp32 and whether
	// every element was finite, in one pass over the buffer.
	GradNorm(grads *T, scale float32) (norm float32, finite bool)
}

// Ops are the descriptors of Device's ops (and GradStorer's and
// Stepper's), in the order and with the argument names of their methods;
// the shapes are those the interface documents. A new op of Device is
// declared here, beside its method above: Contracts lists every field.
var Ops = struct {
	Encoder, EncoderBackward                             Contract
	LayerNorm, LayerNormBackward, ResidualLayerNorm, Add Contract
	Matmul, MatmulBackward, GELUBackward                 Contract
	MatmulBackwardGELU, BiasGrad                         Contract
	Attention, AttentionBackward                         Contract
	CrossEntropy, AdamWStep, GradNorm, Cast              Contract
	MatmulBackwardStore, AttentionBackwardStore          Contract // GradStorer
	CrossEntropyScaled, StepUpdate, AdamWState           Contract
}{
	// B, T, C
	Encoder: Contract{Op: "Encoder", Sizes: []string{"B", "T", "C+"},
		Params: []Param{p("out", Wide, Out, prod(0, 1, 2)), p("wte", Float, In, nil), p("wpe", Float, In, nil),
			gen(p("tokens", I32, In, prod(0, 1)), Index)},
		Tol: one, Rule: encoderRule(1), Class: "encoder", IndexMax: func(s []int, ts []*T) int { return ts[1].Numel() / s[2] }},
	EncoderBackward: Contract{Op: "EncoderBackward", Sizes: []string{"B", "T", "C+"},
		Params: []Param{p("dwte", Wide, Acc, nil), p("dwpe", Wide, Acc, nil), p("dout", Float, In, prod(0, 1, 2)),
			gen(p("tokens", I32, In, prod(0, 1)), Index)},
		// One id may take every row (skewed tokens): up to B·T terms a sum,
		// added in the sorted segments' order on the GPU.
		Tol: func(_ tensor.DType, s []int) float64 { return sumScale(s[0] * s[1]) }, Rule: encoderRule(0), Class: "encoder",
		IndexMax: func(s []int, ts []*T) int { return ts[0].Numel() / s[2] }},
	// N, C
	LayerNorm: Contract{Op: "LayerNorm", Sizes: []string{"N", "C+"},
		Params: []Param{p("out", Float, Out, prod(0, 1)), p("mean", F32, Out, prod(0)), p("rstd", F32, Out, prod(0)),
			p("inp", Float, In, prod(0, 1)), p("weight", Float, In, prod(1)), p("bias", Float, In, prod(1))},
		Tol: one, Class: "layernorm"},
	// dinp: fp32 sums over C rounded once to the dtype (scale 1), plus
	// lnBwdFloor: at C = 1 the variance is 0, rstd = 1/√eps (316) and the
	// row's terms cancel exactly, so only the fp32 rounding of that
	// cancellation is left, times rstd, at the inputs' scale (not the
	// output's, which is dinp's old value); dweight and dbias sum N rows
	// in different orders (k/16 ulps for k terms). The tests give mean and
	// rstd of inp.
	LayerNormBackward: Contract{Op: "LayerNormBackward", Sizes: []string{"N", "C+"},
		Params: []Param{floor(p("dinp", Float, Acc, prod(0, 1)), lnBwdFloor), rowSum(p("dweight", Wide, Acc, prod(1))), rowSum(p("dbias", Wide, Acc, prod(1))),
			p("dout", Float, In, prod(0, 1)), p("inp", Float, In, prod(0, 1)), p("weight", Float, In, prod(1)),
			p("mean", F32, In, prod(0)), gen(p("rstd", F32, In, prod(0)), Positive)},
		Tol: one, Class: "layernorm"},
	ResidualLayerNorm: Contract{Op: "ResidualLayerNorm", Sizes: []string{"N", "C+"},
		Params: []Param{p("res", Float, Out, prod(0, 1)), p("out", Float, Out, prod(0, 1)), p("mean", F32, Out, prod(0)),
			p("rstd", F32, Out, prod(0)), p("a", Float, In, prod(0, 1)), p("b", Float, In, prod(0, 1)),
			p("weight", Float, In, prod(1)), p("bias", Float, In, prod(1))},
		Tol: one, Class: "layernorm", Decomposed: residualLayerNorm},
	// n
	Add: Contract{Op: "Add", Sizes: []string{"n"},
		Params: []Param{p("out", Float, Out, prod(0)), p("a", Float, In, prod(0)), p("b", Float, In, prod(0))}, Tol: one, Class: "layernorm"},
	// N, C, OC, act
	// On dyadic operands fp32 results are exact (scale 1); 16-bit ones by
	// √C/8 (cuBLASLt may split a long K and add the parts in the output
	// type), twice that with GELU (cuBLASLt's own approximation of it).
	Matmul: Contract{Op: "Matmul", Sizes: []string{"N", "C+", "OC+", "act"},
		Params: []Param{p("out", Float, Out, prod(0, 2)), opt(p("pre", Float, Out, prod(0, 2))), dy(p("inp", Float, In, prod(0, 1))),
			dyW(p("weight", Float, In, prod(2, 1))), opt(dy(p("bias", Float, In, prod(2))))},
		Class: "gemm", FLOPs: gemmFLOPs(2), Tol: func(dt tensor.DType, s []int) float64 {
			if dt == tensor.F32 {
				return 1
			}
			return max(1, math.Sqrt(float64(s[1]))/8) * float64(1+s[3])
		}, Rule: func(s []int, ts []*T) error {
			switch Activation(s[3]) {
			case None:
				if ts[1] != nil {
					return fmt.Errorf("pre must be nil without GELU")
				}
			case GELU:
				if ts[1] == nil {
					return fmt.Errorf("GELU needs pre for the pre-activation")
				}
			default:
				return fmt.Errorf("activation %d: %w", s[3], ErrUnsupported)
			}
			return nil
		}},
	// N, C, OC
	// Dyadic operands: exact in fp32. A 16-bit dinp at scale 2: cuBLAS
	// rounds α·A·B to the output type before adding β·C (two roundings).
	MatmulBackward: Contract{Op: "MatmulBackward", Sizes: []string{"N", "C+", "OC+"},
		Params: []Param{opt(dy(p("dinp", Float, Acc, prod(0, 1)))), tol(dy(p("dweight", Wide, Acc, prod(2, 1))), one), opt(tol(dy(p("dbias", Wide, Acc, prod(2))), one)),
			dy(p("dout", Float, In, prod(0, 2))), dy(p("inp", Float, In, prod(0, 1))), dyW(p("weight", Float, In, prod(2, 1)))},
		Tol: by16(1, 2), Class: "gemm", FLOPs: func(s []int, ts []*T) float64 {
			if ts[0] != nil {
				return gemmFLOPs(4)(s, ts) // dinp too
			}
			return gemmFLOPs(2)(s, ts)
		}},
	// dpre: GELU's derivative (tanhf's ulps in fp32: 8; 2 in 16 bits, as
	// GELUBackward); dpreBias sums N rows of dpre that the GPU's epilogue
	// rounds to 16 bits first (as PyTorch autocast's bias gradient): the
	// compute dtype's tolerance by 4√N; dweight and dbias exact (dyadic).
	MatmulBackwardGELU: Contract{Op: "MatmulBackwardGELU", Sizes: []string{"N", "C+", "OC+"},
		Params: []Param{p("dpre", Float, Out, prod(0, 1)), opt(rounded(tol(dy(p("dpreBias", F32, Acc, prod(1))), func(_ tensor.DType, s []int) float64 {
			return max(1, 4*math.Sqrt(float64(s[0])))
		}))), tol(dy(p("dweight", Wide, Acc, prod(2, 1))), one), opt(tol(dy(p("dbias", Wide, Acc, prod(2))), one)),
			dy(p("dout", Float, In, prod(0, 2))), dy(p("inp", Float, In, prod(0, 1))), gen(p("pre", Float, In, prod(0, 1)), Dyadic4), dyW(p("weight", Float, In, prod(2, 1)))},
		// dgrad and wgrad, the GELU backward and both bias gradients in
		// their epilogues or between them: all of it the product's class.
		Tol: by16(8, 2), Class: "gemm", FLOPs: gemmFLOPs(4), Decomposed: matmulBackwardGELU},
	// N, OC: fp32 sums over N rows in different orders (MatmulBackward's
	// dbias alone)
	BiasGrad: Contract{Op: "BiasGrad", Sizes: []string{"N", "OC+"},
		Params: []Param{rowSum(p("dbias", F32, Acc, prod(1))), p("dout", Float, In, prod(0, 1))},
		Tol:    one, Class: "gelu/bias", Shapes: [][]int{{34, 40}, {5, 11}, {1, 1}, {300, 1003}}},
	// n
	GELUBackward: Contract{Op: "GELUBackward", Sizes: []string{"n"},
		Params: []Param{p("dinp", Float, Out, prod(0)), p("inp", Float, In, prod(0)), p("dout", Float, In, prod(0))},
		// fp32: tanhf's ulps (8); 16 bits: the derivative in fp32 from the
		// same inputs, rounded once on each device (scale 1).
		Tol: by16(8, 1), Class: "gelu/bias"},
	// B, T, C, NH
	Attention: Contract{Op: "Attention", Sizes: []string{"B", "T", "C+", "NH+"},
		Params: []Param{floor(p("out", Float, Out, prod(0, 1, 2)), ProbFloor(2)), p("att", Float, State, nil), p("qkv", Float, In, times(3, 0, 1, 2))},
		Tol:    attnTol, Rule: attnRule, Class: "attention", FLOPs: attnFLOPs(1)},
	AttentionBackward: Contract{Op: "AttentionBackward", Sizes: []string{"B", "T", "C+", "NH+"},
		Params: []Param{relNorm(p("dqkv", Float, Acc, times(3, 0, 1, 2))), p("dout", Float, In, prod(0, 1, 2)), p("qkv", Float, In, times(3, 0, 1, 2)),
			opt(p("out", Float, In, prod(0, 1, 2))), p("att", Float, State, nil)},
		Tol: attnBwdTol, Rule: attnRule, Class: "attention", FLOPs: attnFLOPs(2.5)},
	// N, V
	CrossEntropy: Contract{Op: "CrossEntropy", Sizes: []string{"N", "V+"},
		Params: []Param{tol(p("losses", F32, Out, prod(0)), ceTol), p("logits", Float, Acc, prod(0, 1)), gen(p("targets", I32, In, prod(0)), Index)},
		Tol:    ceGradTol, Class: "classifier + loss", IndexMax: func(s []int, _ []*T) int { return s[1] }},
	// total (layout.Total), step (hp.Step)
	AdamWStep: Contract{Op: "AdamWStep", Sizes: []string{"total", "step+"},
		Params: []Param{p("master", F32, Acc, prod(0)), opt(p("work", Float, Out, prod(0))), p("grads", F32, In, prod(0)),
			p("m", F32, Acc, prod(0)), gen(p("v", F32, Acc, prod(0)), Positive)},
		Tol: one, Class: "optimizer"},
	// n (grads.Numel())
	GradNorm: Contract{Op: "GradNorm", Sizes: []string{"n"}, // sums in float64 on both devices
		Params: []Param{p("grads", Float, In, prod(0))}, Tol: one, Class: "optimizer"},
	// n (dst.Numel())
	Cast: Contract{Op: "Cast", Sizes: []string{"n"},
		Params: []Param{p("dst", Float, Out, prod(0)), p("src", Float, In, prod(0))}, Tol: one, Class: "cast and copies"},
	// GradStorer: MatmulBackward and AttentionBackward with the input
	// gradient an output (its old contents are never read; tests poison it)
	MatmulBackwardStore: Contract{Op: "MatmulBackwardStore", Sizes: []string{"N", "C+", "OC+"}, // dyadic: exact, one rounding
		Params: []Param{p("dinp", Float, Out, prod(0, 1)), dy(p("dweight", Wide, Acc, prod(2, 1))), opt(dy(p("dbias", Wide, Acc, prod(2)))),
			dy(p("dout", Float, In, prod(0, 2))), dy(p("inp", Float, In, prod(0, 1))), dyW(p("weight", Float, In, prod(2, 1)))},
		Tol: one, Iface: "GradStorer", Class: "gemm", FLOPs: gemmFLOPs(4)},
	AttentionBackwardStore: Contract{Op: "AttentionBackwardStore", Sizes: []string{"B", "T", "C+", "NH+"},
		Params: []Param{relNorm(p("dqkv", Float, Out, times(3, 0, 1, 2))), p("dout", Float, In, prod(0, 1, 2)), p("qkv", Float, In, times(3, 0, 1, 2)),
			opt(p("out", Float, In, prod(0, 1, 2))), p("att", Float, State, nil)},
		Tol: attnBwdTol, Rule: attnRule, Iface: "GradStorer", Class: "attention", FLOPs: attnFLOPs(2.5)},
	// N, V
	CrossEntropyScaled: Contract{Op: "CrossEntropyScaled", Sizes: []string{"N", "V+"},
		Params: []Param{tol(p("losses", F32, Out, prod(0)), ceTol), p("logits", Float, Acc, prod(0, 1)), gen(p("targets", I32, In, prod(0)), Index),
			p("state", F32, In, func([]int) int { return StateLen })},
		Tol: ceGradTol, Iface: "Stepper", Class: "classifier + loss", IndexMax: func(s []int, _ []*T) int { return s[1] }},
	// losses, grads (their element counts)
	StepUpdate: Contract{Op: "StepUpdate", Sizes: []string{"losses", "grads"},
		Params: []Param{p("state", F32, Acc, func([]int) int { return StateLen }), p("losses", F32, In, prod(0)), p("grads", F32, In, prod(1))},
		Tol:    sumTol(1), Iface: "Stepper", Class: "optimizer"},
	// total (layout.Total)
	AdamWState: Contract{Op: "AdamWState", Sizes: []string{"total"},
		Params: []Param{p("master", F32, Acc, prod(0)), opt(p("work", Float, Out, prod(0))), p("grads", F32, In, prod(0)),
			p("m", F32, Acc, prod(0)), gen(p("v", F32, Acc, prod(0)), Positive), p("state", F32, In, func([]int) int { return StateLen })},
		Tol: one, Iface: "Stepper", Class: "optimizer"},
}

// GradStorer is implemented by devices that can store an input gradient
// instead of adding it to a zeroed buffer: the model then queues no zeroing
// of that buffer (one memset and one read of it less per op). The values
// are those of the zeroed buffer accumulated into (only a -0 may come out
// as +0 or the reverse). Contracts: Ops.MatmulBackwardStore and
// Ops.AttentionBackwardStore.
type GradStorer interface {
	// MatmulBackwardStore is MatmulBackward with dinp stored, not
	// accumulated: dinp = dout·weight (its old contents, NaN included, are
	// never read); dweight and dbias accumulate as in MatmulBackward.
	MatmulBackwardStore(dinp, dweight, dbias, dout, inp, weight *T, N, C, OC int)
	// AttentionBackwardStore is AttentionBackward with dqkv stored, not
	// accumulated: dq, dk and dv overwrite dqkv (its old contents, NaN
	// included, are never read).
	AttentionBackwardStore(dqkv, dout, qkv, out, att *T, B, T, C, NH int)
}

// AttnState is the dtype and shape of the state Attention saves.
type AttnState struct {
	DType tensor.DType
	Shape []int
}

// ProbState is the softmax probabilities, (B,NH,T,T) in the inputs' dtype.
func ProbState(dt tensor.DType, B, T, NH int) AttnState {
	return AttnState{DType: dt, Shape: []int{B, NH, T, T}}
}

// LSEState is each query row's log-sum-exp of its scaled scores,
// (B,NH,T) F32 (natural log).
func LSEState(B, T, NH int) AttnState { return AttnState{DType: tensor.F32, Shape: []int{B, NH, T}} }

// Numel returns the state's element count.
func (s AttnState) Numel() int {
	n := 1
	for _, d := range s.Shape {
		n *= d
	}
	return n
}

// AdamWConsts are the scalars of one AdamW step, computed in float64 and
// rounded to float32 as torch's Python scalars are. The CPU reference and
// the GPU kernels both take them from Consts, so they round alike.
type AdamWConsts struct {
	GS      float32 // gradient scale (GradScale, 0 meaning 1)
	Scaled  bool    // GS != 1
	Decay   float32 // 1 - lr·wd
	DoDecay bool    // lr·wd != 0
	W1      float32 // 1 - β1, the lerp weight of m
	Small   bool    // |W1| < 0.5: lerp as m + W1(g-m), else g + (W1-1)(g-m)
	B2, W2  float32 // β2, 1 - β2
	Step    float32 // -lr / (1 - β1ᵗ)
	BC2     float32 // sqrt(1 - β2ᵗ)
	Eps     float32
}

// Consts derives the step's scalars from the hyper-parameters.
func (hp AdamW) Consts() AdamWConsts {
	gs := hp.GradScale
	if gs == 0 {
		gs = 1
	}
	b1, b2, lr, wd := float64(hp.Beta1), float64(hp.Beta2), float64(hp.LR), float64(hp.WeightDecay)
	w1 := float32(1 - b1)
	return AdamWConsts{
		GS: gs, Scaled: gs != 1,
		Decay: float32(1 - lr*wd), DoDecay: lr*wd != 0,
		W1: w1, Small: math.Abs(float64(w1)) < 0.5,
		B2: hp.Beta2, W2: float32(1 - b2),
		Step: float32(-(lr / (1 - math.Pow(b1, float64(hp.Step))))),
		BC2:  float32(math.Sqrt(1 - math.Pow(b2, float64(hp.Step)))),
		Eps:  hp.Eps,
	}
}

// The slots of a step state: one F32 tensor of StateLen elements in the
// device's memory that holds the training step's scalars, so that the loss
// scale, the skip decision, the clip factor and the optimizer's step count
// are decided on the device, with no host round trip inside a step
// (Stepper). Counts are stored as float32 (exact below 2^24).
const (
	SlotScale     = iota // the loss scale of the next step (the GradScaler's Scale; 1 when it is off)
	SlotGood             // consecutive finite steps since the scale last changed
	SlotSkipped          // steps skipped so far (non-finite gradients)
	SlotOptSteps         // optimizer steps taken (skipped steps do not count)
	SlotLR               // this step's learning rate (the host writes it before the step)
	SlotLoss             // this step's mean loss
	SlotNorm             // this step's global gradient norm, unscaled
	SlotFinite           // 1 when every gradient of this step was finite, else 0
	SlotUsedScale        // the loss scale this step's gradients carry
	SlotGradScale        // what AdamW multiplies the gradients by: clip factor / used scale
	// AdamW's per-step constants (AdamWConsts), written by StepUpdate.
	SlotDecay   // 1 - lr·wd
	SlotDoDecay // 1 when lr·wd != 0
	SlotStep    // -lr / (1 - β1ᵗ)
	SlotBC2     // sqrt(1 - β2ᵗ)
	StateLen    = 16
)

// StepConfig holds the constants of the device-resident step: the
// GradScaler's (amp.GradScaler's semantics) and the clipping threshold.
type StepConfig struct {
	Scaler         bool    // scale the loss (fp16); off: the scale stays 1 and a non-finite step is only skipped
	GrowthFactor   float32 // 2
	BackoffFactor  float32 // 0.5
	GrowthInterval int     // 2000
	ClipNorm       float32 // clip the global norm to this; 0 disables
}

// Stepper is implemented by devices that decide the training step's scalars
// on the device (the state, slots Slot*): with it a step queues no host
// synchronisation from zero-grad to the optimizer update, and can be
// captured as a CUDA graph. The decisions are amp.GradScaler's and
// optim.Config.ClipFactor's, step for step.
type Stepper interface {
	// CrossEntropyScaled is CrossEntropy with dscale multiplied by
	// state[SlotScale] (a power of two, so the product is exact).
	CrossEntropyScaled(losses, logits, targets, state *T, N, V int, dscale float32)
	// StepUpdate takes the mean of losses into SlotLoss and the norm of
	// grads/state[SlotScale] with the finite check (as GradNorm), then
	// updates the scaler slots as GradScaler.Update does, and on a finite
	// step counts the optimizer step and writes the clip factor over the
	// used scale into SlotGradScale and AdamW's constants for hp (its LR and
	// Step come from the state; hp.LR, hp.Step and hp.GradScale are ignored).
	// state (StateLen) F32, losses (N) F32, grads F32
	StepUpdate(state, losses, grads *T, cfg StepConfig, hp AdamW)
	// AdamWState is AdamWStep with hp's betas, eps and weight decay and the
	// per-step constants StepUpdate wrote into state; it changes nothing
	// when state[SlotFinite] is 0.
	AdamWState(master, work, grads, m, v *T, layout *tensor.Layout, hp AdamW, state *T)
}

// Graph is captured device work, replayed by Launch.
type Graph interface {
	Launch() error // queue one replay; ErrGraphStale (wrapped) when it may not be replayed
	Close() error  // free the graph
}

// ErrGraphStale is returned (wrapped) by Graph.Launch when a buffer the
// graph uses was reallocated since the capture (a scratch buffer grew for
// a larger shape): the graph must be captured again, after a plain run.
var ErrGraphStale = errors.New("device: graph stale: a buffer it uses was reallocated since the capture")

// Grapher is implemented by devices that can capture the work fn queues
// into a graph (CUDA graphs). Capture fails, with the reason, where the
// driver or an op does not allow it; callers then run fn's work plainly.
type Grapher interface {
	Capture(fn func() error) (Graph, error)
}

// Batcher is implemented by devices whose ops are cheaper queued together:
// Batch runs fn with every op it queues issued from one place (the CUDA
// context's thread), and returns fn's error.
type Batcher interface {
	Batch(fn func() error) error
}

// Batch runs fn through d's Batcher where d has one, else runs fn.
func Batch(d Device, fn func() error) error {
	if b, ok := d.(Batcher); ok {
		return b.Batch(fn)
	}
	return fn()
}

// StateSnap is implemented by devices that can copy the step state to the
// host without waiting: Snapshot queues a copy of state into record i (of
// n kept, allocated by Records), readable with Record after the next Sync.
type StateSnap interface {
	Records(n int) error
	Snapshot(i int, state *T)
	Record(i int) []float32
}

// Fetcher is implemented by devices that copy a small device tensor to the
// host without waiting for the queue: Fetch queues the copy of src into the
// host tensor dst (the same dtype and size) and returns at once; the
// returned Fetched's Wait waits until the device has reached that copy, not
// for work queued after it, fills dst, and returns the first error recorded
// since the last Sync or Wait. So the host can queue the next work before it
// reads the results of the last (generation's run-ahead, gpt.KVCache).
type Fetcher interface {
	Fetch(dst, src *T) Fetched
}

// Fetched is a copy queued by Fetcher.Fetch.
type Fetched interface {
	Wait() error
}

// Marker is implemented by devices that time queued work on the device
// itself (CUDA events): Marks keeps n timestamps, Mark(i) queues timestamp
// i at the current end of the device's queue, and Between returns the
// milliseconds of device time from mark a to mark b, both queued and
// reached (it waits for b). Timing a step between two marks counts what
// the device spent on it, including any time it waited for the host to
// queue the step's work, and none of the host's wait after it.
type Marker interface {
	Marks(n int) error
	Mark(i int)
	Between(a, b int) (float64, error)
}

// StepScalars is the reference of StepUpdate's scalar part, shared by the
// CPU device and mirrored by the GPU kernel (kernels/step.cu): given this
// step's mean loss and Σ g² of the (scaled) gradients in float64, it
// updates st (StateLen) as the host path does with amp.GradScaler.Update,
// optim.Config.ClipFactor and AdamW.Consts.
func StepScalars(st []float32, loss float32, sumSq float64, cfg StepConfig, hp AdamW) {
	used := st[SlotScale]
	if !cfg.Scaler {
		used = 1
	}
	st[SlotUsedScale], st[SlotLoss] = used, loss
	finite := !math.IsInf(sumSq, 0) && !math.IsNaN(sumSq)
	var norm float32
	if finite {
		norm = float32(math.Sqrt(sumSq) * math.Abs(float64(1/used)))
	} else {
		norm = float32(sumSq)
	}
	st[SlotNorm] = norm
	st[SlotFinite] = 0
	if finite {
		st[SlotFinite] = 1
	}
	// amp.GradScaler.Update
	switch {
	case !finite:
		if cfg.Scaler {
			st[SlotScale] = used * cfg.BackoffFactor
			st[SlotGood] = 0
		}
		st[SlotSkipped]++
		return
	case cfg.Scaler:
		st[SlotGood]++
		if int(st[SlotGood]) >= cfg.GrowthInterval {
			st[SlotScale] = used * cfg.GrowthFactor
			st[SlotGood] = 0
		}
	}
	// optim.Config.ClipFactor, then AdamW.Consts at the counted step.
	clip := float32(1)
	if cfg.ClipNorm > 0 && norm > cfg.ClipNorm {
		clip = cfg.ClipNorm / norm
	}
	st[SlotOptSteps]++
	hp.LR, hp.Step, hp.GradScale = st[SlotLR], int(st[SlotOptSteps]), clip/used
	c := hp.Consts()
	st[SlotGradScale], st[SlotDecay], st[SlotStep], st[SlotBC2] = c.GS, c.Decay, c.Step, c.BC2
	st[SlotDoDecay] = 0
	if c.DoDecay {
		st[SlotDoDecay] = 1
	}
}

// ConstsFromState returns AdamW's constants for hp's fixed parts and the
// per-step values StepScalars wrote into st.
func (hp AdamW) ConstsFromState(st []float32) AdamWConsts {
	c := hp.Consts()
	c.GS, c.Scaled = st[SlotGradScale], st[SlotGradScale] != 1
	c.Decay, c.DoDecay = st[SlotDecay], st[SlotDoDecay] != 0
	c.Step, c.BC2 = st[SlotStep], st[SlotBC2]
	return c
}
