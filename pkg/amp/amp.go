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
// reductions and optimizer math in fp32 (see Ops).
const (
	FP32 Policy = iota
	BF16
	FP16
)

// ParsePolicy returns the policy named s: "fp32", "bf16" or "fp16".
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "fp32", "":
		return FP32, nil
	case "bf16":
		return BF16, nil
	case "fp16":
		return FP16, nil
	}
	return 0, fmt.Errorf("amp: unknown precision %q (want fp32, bf16 or fp16)", s)
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
	}
	return fmt.Sprintf("policy(%d)", uint8(p))
}

// Half returns the 16-bit dtype of the policy, F32 under FP32.
func (p Policy) Half() tensor.DType {
	switch p {
	case BF16:
		return tensor.BF16
	case FP16:
		return tensor.F16
	}
	return tensor.F32
}

// Mixed reports whether the policy uses a 16-bit type.
func (p Policy) Mixed() bool { return p != FP32 }

// NeedsScaler reports whether gradients must be loss-scaled: fp16's narrow
// exponent range underflows small gradients; bf16 has fp32's range.
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
	acc := "fp32"
	if p.Mixed() {
		acc = h + " inputs, fp32 accumulate"
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
