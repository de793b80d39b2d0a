package gpt

import (
	"fmt"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// Memory is the bytes a training step holds on the device, by component.
type Memory struct {
	Params      int64 // fp32 master weights plus the 16-bit working copy
	Grads       int64 // fp32 parameter gradients
	Optimizer   int64 // AdamW's m and v (fp32; bf16 after WithMoments)
	Activations int64 // saved activations and backward scratch at (B, T)
}

// Total returns the sum of the components.
func (m Memory) Total() int64 { return m.Params + m.Grads + m.Optimizer + m.Activations }

// WithMoments returns m with AdamW's two moments counted at dt
// (optim.NewAdamWMoments: F32, or BF16 for half the optimizer state) for
// cfg's parameters.
func (m Memory) WithMoments(cfg Config, dt tensor.DType) Memory {
	m.Optimizer = 2 * int64(cfg.NumParams()) * int64(dt.Size())
	return m
}

// WithFP8Head returns m with what amp.FP8Recipe.Head adds to an FP8 step
// of cfg at batch B and sequence T with the LM head in chunks of rows
// rows (HeadRows): the e4m3 copy of wte and its transpose (2·V·C bytes,
// with the parameters), those of ln_f's output (2·B·T·C) and one chunk of
// the logits' e5m2 gradient (rows·V, with the activations), and its
// transpose where the head's weight gradient runs in FP8 (headDWOn).
func (m Memory) WithFP8Head(cfg Config, B, T, rows int) Memory {
	C, V := int64(cfg.Channels), int64(cfg.Vocab)
	m.Params += 2 * V * C
	m.Activations += 2*int64(B*T)*C + int64(rows)*V
	if headDWOn(rows) {
		m.Activations += int64(rows) * V
	}
	return m
}

// String formats the components in MiB.
func (m Memory) String() string {
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	return fmt.Sprintf("params %.1f MiB, grads %.1f MiB, optimizer %.1f MiB, activations %.1f MiB, total %.1f MiB",
		mib(m.Params), mib(m.Grads), mib(m.Optimizer), mib(m.Activations), mib(m.Total()))
}

// MemoryFor counts the bytes of a training step of cfg at batch B and
// sequence T under policy p, from the same tables the model allocates by,
// for fused ops (the LM head in chunks of HeadRows rows) with attention
// saving its probabilities (device.ProbState: the CPU, the decomposed GPU
// path, fp32). MemoryWith takes the state a device reports; MemoryOn asks
// the device for both. An optional recomputation level (one value; none
// when left out) counts the activations that level keeps: the saving is
// MemoryFor(..., RecomputeNone) minus MemoryFor(..., r). Under amp.FP8
// it counts the default recipe's buffers (Memory.WithFP8Head adds what
// amp.FP8Recipe.Head allocates).
func MemoryFor(cfg Config, B, T int, p amp.Policy, r ...Recompute) Memory {
	return MemoryWith(cfg, B, T, p, device.ProbState(p.DType(amp.Activation), B, T, cfg.Heads), r...)
}

// MemoryOn is MemoryFor with the attention state dev saves
// (dev.AttentionState; the GPU's flash kernels keep only a log-sum-exp)
// and its kind of ops: the decomposed baseline (dev.Fused false) keeps
// the whole (B·T, V) logits.
func MemoryOn(dev device.Device, cfg Config, B, T int, p amp.Policy, r ...Recompute) Memory {
	return memoryOf(cfg, B, T, p, dev.AttentionState(p.DType(amp.Activation), B, T, cfg.Channels, cfg.Heads), dev.Fused(), level(r))
}

// MemoryWith is MemoryFor with attention saving att per layer.
func MemoryWith(cfg Config, B, T int, p amp.Policy, att device.AttnState, r ...Recompute) Memory {
	return memoryOf(cfg, B, T, p, att, true, level(r))
}

// MemoryDecomposed is MemoryFor for the decomposed baseline: attention
// saves its probabilities and the LM head's logits are not chunked.
func MemoryDecomposed(cfg Config, B, T int, p amp.Policy, r ...Recompute) Memory {
	return memoryOf(cfg, B, T, p, device.ProbState(p.DType(amp.Activation), B, T, cfg.Heads), false, level(r))
}

// level returns the optional recomputation level of the Memory functions.
func level(r []Recompute) Recompute {
	if len(r) == 0 {
		return RecomputeNone
	}
	return r[0]
}

func memoryOf(cfg Config, B, T int, p amp.Policy, att device.AttnState, fused bool, r Recompute) Memory {
	n := int64(cfg.NumParams())
	mem := Memory{
		Params:    n * int64(p.DType(amp.Master).Size()),
		Grads:     n * int64(p.DType(amp.ParamGrad).Size()),
		Optimizer: 2 * n * int64(p.DType(amp.OptState).Size()),
	}
	if p.Mixed() {
		mem.Params += n * int64(p.DType(amp.Working).Size())
	}
	if p == amp.FP8 { // fp8State: the blocks' weights in E4M3 and transposed, the scaling state, its record lists (2K int32s) and current scaling's dbias scratch (4C floats)
		C, L := int64(cfg.Channels), int64(cfg.Layers)
		K, H := int64(fp8Tensors(cfg.Layers)*f8Stride), int64(amp.DefaultFP8Recipe().History)
		mem.Params += 2*L*12*C*C + 4*int64(amp.FP8StLen(int(K), int(H))) + 4*K*amp.FP8MetaLen + 8*K + 16*C
	}
	for _, b := range ActivationBreakdown(cfg, B, T, p, att, fused, r) {
		mem.Activations += b.Bytes
	}
	return mem
}

// ActivationBytes is one buffer of a training step's activations.
type ActivationBytes struct {
	Name  string // e.g. "qkv" (all layers), "work" (the shared scratch)
	Bytes int64
}

// ActivationBreakdown lists the activation buffers of a training step, as
// MemoryWith counts them (fused: the LM head in chunks), under the optional
// recomputation level r (none when left out).
func ActivationBreakdown(cfg Config, B, T int, p amp.Policy, att device.AttnState, fused bool, r ...Recompute) []ActivationBytes {
	rows := HeadRows(cfg.Vocab, B*T, p.DType(amp.Activation), fused)
	var out []ActivationBytes
	for _, s := range activationSpecs(cfg, B, T, att, rows, level(r), p) {
		out = append(out, ActivationBytes{s.name, s.bytes(p)})
	}
	if p == amp.FP8 { // fp8Batch: each block's four GEMM inputs and one output gradient, each with its transpose
		N, C := int64(B*T), int64(cfg.Channels)
		out = append(out, ActivationBytes{"fp8_x", 2 * int64(cfg.Layers) * N * 7 * C}, ActivationBytes{"fp8_dy", 2 * N * 4 * C})
	}
	return out
}
