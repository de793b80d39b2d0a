package device

import (
	"errors"
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
