package amp

import (
	"fmt"

	"github.com/druto/druto/pkg/tensor"
)

// Policy is a mixed-precision policy: which dtype each kind of tensor of the
// training step is computed and stored in.
type Policy uint8

// The policies. FP32 computes and stores everything in fp32. BF16 and FP16
// run matmuls and attention products in the 16-bit type with fp32
// accumulation and keep layernorm statistics, softmax, cross-entropy,
// reductions and optimizer math in fp32 (see Ops). FP8 is BF16 with the
// linear layers' GEMMs in FP8 (see FP8GEMMs): Transformer Engine's hybrid
// recipe, e4m3 forward activations and weights, e5m2 gradients, each with
// a per-tensor scale (FP8Scaler). It needs FP8 tensor cores (FP8Hardware);
// elsewhere training refuses it, saying why.
const (
	FP32 Policy = iota
	BF16
	FP16
	FP8
)

// ParsePolicy returns the policy named s: "fp32", "bf16", "fp16" or "fp8".
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "fp32", "":
		return FP32, nil
	case "bf16":
		return BF16, nil
	case "fp16":
		return FP16, nil
	case "fp8":
		return FP8, nil
	}
	return 0, fmt.Errorf("amp: unknown precision %q (want fp32, bf16, fp16 or fp8)", s)
}

// String returns the policy's flag name.
func (p Policy) String() string {
	switch p {
	case FP32:
		return "fp32"
	case BF16:
		return "bf16"
	case FP16:
		return "fp16"
	case FP8:
		return "fp8"
	}
	return fmt.Sprintf("policy(%d)", uint8(p))
}

// Half returns the 16-bit dtype of the policy, F32 under FP32. Under FP8
// it is BF16: what the ops outside the FP8 GEMMs store and compute in.
func (p Policy) Half() tensor.DType {
	switch p {
	case BF16, FP8:
		return tensor.BF16
	case FP16:
		return tensor.F16
	}
	return tensor.F32
}

// Mixed reports whether the policy uses a 16-bit type.
func (p Policy) Mixed() bool { return p != FP32 }

// NeedsScaler reports whether gradients must be loss-scaled: fp16's narrow
// exponent range underflows small gradients; bf16 has fp32's range. FP8's
// operands carry per-tensor scales instead (FP8Scaler).
func (p Policy) NeedsScaler() bool { return p == FP16 }

// Kind names a class of tensors of the training step.
type Kind uint8

// The kinds of tensors the policy assigns a dtype to.
const (
	Master     Kind = iota // fp32 master parameters (what the optimizer updates)
	Working                // the parameters the forward and backward read
	ParamGrad              // gradients of the parameters (accumulated)
	OptState               // AdamW moments m and v
	Residual               // the residual stream and its gradient
	Activation             // layernorm outputs, qkv, attention, MLP, logits: saved for backward
	ActGrad                // gradients of saved activations
	Stats                  // layernorm mean/rstd and per-token losses
)

// DType returns the dtype the policy stores tensors of kind k in.
func (p Policy) DType(k Kind) tensor.DType {
	switch k {
	case Working, Activation, ActGrad:
		return p.Half()
	}
	return tensor.F32
}

// FP8GEMMs names the GEMMs that run in FP8 under the FP8 policy: the
// linear layers of every block, forward and backward. The LM head (its
// logits feed the softmax directly, and its vocabulary-wide gradient is
// where low precision hurts most) joins them only under FP8Recipe.Head;
// attention's products, layernorm, softmax and the optimizer stay
// bf16/fp32.
var FP8GEMMs = []string{"qkv", "attn proj", "fc", "fc proj"}

// FP8Hardware reports whether a GPU of compute capability major.minor has
// FP8 tensor cores: 8.9 (Ada) and newer (9.0 Hopper, Blackwell).
func FP8Hardware(major, minor int) bool { return major > 8 || major == 8 && minor >= 9 }

// FP8FormatOf returns the FP8 format of a GEMM operand of kind k under
// the hybrid recipe: E5M2 (range) for gradients, E4M3 (precision) for
// activations and weights.
func FP8FormatOf(k Kind) tensor.FP8Format {
	if k == ActGrad {
		return tensor.E5M2
	}
	return tensor.E4M3
}

// OpPrecision says what one op computes and stores in.
type OpPrecision struct {
	Op      string
	Compute string // arithmetic precision
	Store   string // output storage
}

// Ops is the one place that says, per op, which precision it computes in and
// stores in under policy p. The CPU reference and the GPU kernels follow it.
func (p Policy) Ops() []OpPrecision {
	h := p.String() // "fp32", "bf16" or "fp16"
	if p == FP8 {
		h = "bf16"
	}
	acc := "fp32"
	if p.Mixed() {
		acc = h + " inputs, fp32 accumulate"
	}
	if p == FP8 {
		return []OpPrecision{
			{"encoder (wte+wpe)", "fp32", "fp32 (residual stream)"},
			{"layernorm", "fp32 statistics", "e4m3 input of qkv and fc (with its transpose and amax); ln_f: bf16"},
			{"residual add", "fp32", "fp32"},
			{"matmul qkv, attn proj, fc, fc proj (forward)", "e4m3 activations x e4m3 weights, per-tensor scales, fp32 accumulate", "bf16"},
			{"matmul qkv, attn proj, fc, fc proj (backward)", "e5m2 gradients x e4m3 weights or activations, per-tensor scales, fp32 accumulate", "bf16 input gradients, fp32 weight gradients"},
			{"GELU", "fp32", "e4m3 input of fc proj (with its transpose and amax); the bf16 pre-activation kept"},
			{"GELU backward", "fp32", "e5m2 output gradient of fc (fused with its cast, transpose and bias gradient)"},
			{"LM head matmul", acc + "; with FP8Recipe.Head the forward e4m3 x e4m3 and dx e5m2 dlogits x e4m3 wte", "bf16"},
			{"attention scores, att·v", acc, "bf16"},
			{"attention softmax", "fp32", "bf16 (probabilities saved)"},
			{"softmax cross-entropy", "fp32", "fp32 loss, bf16 dlogits (and their e5m2 copy with FP8Recipe.Head)"},
			{"parameter gradients", "fp32", "fp32"},
			{"grad norm, inf check", "fp32", "fp32"},
			{"AdamW", "fp32", "fp32 master + m + v, bf16 working copy (the FP8 GEMMs' e4m3 weights cast from it as a step begins)"},
		}
	}
	return []OpPrecision{
		{"encoder (wte+wpe)", "fp32", "fp32 (residual stream)"},
		{"layernorm", "fp32 statistics", h},
		{"residual add", "fp32", "fp32"},
		{"matmul (+bias, +GELU)", acc, h},
		{"attention scores, att·v", acc, h},
		{"attention softmax", "fp32", h + " (probabilities saved)"},
		{"softmax cross-entropy", "fp32", "fp32 loss, " + h + " dlogits"},
		{"parameter gradients", "fp32", "fp32"},
		{"grad norm, unscale, inf check", "fp32", "fp32"},
		{"AdamW", "fp32", "fp32 master + m + v, " + h + " working copy"},
	}
}
