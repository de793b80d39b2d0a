package gpt

import (
	"fmt"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
)

// Memory is the bytes a training step holds on the device, by component.
type Memory struct {
	Params      int64 // fp32 master weights plus the 16-bit working copy
	Grads       int64 // fp32 parameter gradients
	Optimizer   int64 // AdamW's fp32 m and v
	Activations int64 // saved activations and backward scratch at (B, T)
}

// Total returns the sum of the components.
func (m Memory) Total() int64 { return m.Params + m.Grads + m.Optimizer + m.Activations }

// String formats the components in MiB.
func (m Memory) String() string {
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	return fmt.Sprintf("params %.1f MiB, grads %.1f MiB, optimizer %.1f MiB, activations %.1f MiB, total %.1f MiB",
		mib(m.Params), mib(m.Grads), mib(m.Optimizer), mib(m.Activations), mib(m.Total()))
}

// MemoryFor counts the bytes of a training step of cfg at batch B and
// sequence T under policy p, from the same tables the model allocates by,
// with attention saving its probabilities (device.ProbState: the CPU, the
// decomposed GPU path, fp32). MemoryWith takes the state a device reports.
func MemoryFor(cfg Config, B, T int, p amp.Policy) Memory {
	return MemoryWith(cfg, B, T, p, device.ProbState(p.DType(amp.Activation), B, T, cfg.Heads))
}

// MemoryOn is MemoryFor with the attention state dev saves
// (dev.AttentionState; the GPU's flash kernels keep only a log-sum-exp).
func MemoryOn(dev device.Device, cfg Config, B, T int, p amp.Policy) Memory {
	return MemoryWith(cfg, B, T, p, dev.AttentionState(p.DType(amp.Activation), B, T, cfg.Channels, cfg.Heads))
}

// MemoryWith is MemoryFor with attention saving att per layer.
func MemoryWith(cfg Config, B, T int, p amp.Policy, att device.AttnState) Memory {
	n := int64(cfg.NumParams())
	mem := Memory{
		Params:    n * int64(p.DType(amp.Master).Size()),
		Grads:     n * int64(p.DType(amp.ParamGrad).Size()),
		Optimizer: 2 * n * int64(p.DType(amp.OptState).Size()),
	}
	if p.Mixed() {
		mem.Params += n * int64(p.DType(amp.Working).Size())
	}
	for _, s := range activationSpecs(cfg, B, T, att) {
		size := s.dtype(p).Size()
		e := int64(1)
		for _, d := range s.shape {
			e *= int64(d)
		}
		mem.Activations += e * int64(size)
	}
	return mem
}
