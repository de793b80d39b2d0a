package optim

import (
	"errors"
	"fmt"
	"math"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// Config holds AdamW's hyper-parameters and the learning-rate schedule.
type Config struct {
	LR          float32 // peak learning rate
	MinLRFrac   float32 // the cosine decays to LR·MinLRFrac (0.1)
	Warmup      int     // steps of linear warm-up from LR/Warmup to LR
	Steps       int     // total steps; the cosine ends here
	Beta1       float32 // 0.9
	Beta2       float32 // 0.95
	Eps         float32 // 1e-8
	WeightDecay float32 // 0.1, on 2-D tensors only (the layout's Decay flag)
	ClipNorm    float32 // clip the global gradient norm to this; 0 disables
}

// Defaults returns nanoGPT's AdamW settings with a schedule over steps.
func Defaults(steps int) Config {
	return Config{LR: 6e-4, MinLRFrac: 0.1, Warmup: 0, Steps: steps, Beta1: 0.9, Beta2: 0.95,
		Eps: 1e-8, WeightDecay: 0.1, ClipNorm: 1}
}

// Validate reports nonsense values.
func (c Config) Validate() error {
	switch {
	case !(c.LR > 0) || math.IsInf(float64(c.LR), 0):
		return fmt.Errorf("optim: learning rate %g must be positive", c.LR)
	case c.Steps < 1:
		return fmt.Errorf("optim: steps %d must be at least 1", c.Steps)
	case c.Warmup < 0:
		return fmt.Errorf("optim: warm-up %d must not be negative", c.Warmup)
	case c.Beta1 < 0 || c.Beta1 >= 1 || c.Beta2 < 0 || c.Beta2 >= 1:
		return fmt.Errorf("optim: betas (%g, %g) must lie in [0, 1)", c.Beta1, c.Beta2)
	case c.ClipNorm < 0 || c.WeightDecay < 0 || c.MinLRFrac < 0 || c.MinLRFrac > 1:
		return fmt.Errorf("optim: clip %g, weight decay %g and min-lr fraction %g must be >= 0 (fraction <= 1)", c.ClipNorm, c.WeightDecay, c.MinLRFrac)
	}
	return nil
}

// LRAt returns the learning rate of 1-based step: linear warm-up over Warmup
// steps, then cosine decay from LR to LR·MinLRFrac at Steps.
func (c Config) LRAt(step int) float32 {
	if step <= c.Warmup && c.Warmup > 0 {
		return c.LR * float32(step) / float32(c.Warmup)
	}
	if c.Steps <= c.Warmup {
		return c.LR
	}
	ratio := float64(step-c.Warmup) / float64(c.Steps-c.Warmup)
	ratio = math.Min(math.Max(ratio, 0), 1)
	coeff := 0.5 * (1 + math.Cos(math.Pi*ratio))
	min := float64(c.LR * c.MinLRFrac)
	return float32(min + coeff*(float64(c.LR)-min))
}

// ClipFactor returns the factor that scales gradients of global norm down
// to ClipNorm (1 when the norm is within it or clipping is off).
func (c Config) ClipFactor(norm float32) float32 {
	if c.ClipNorm <= 0 || !(norm > c.ClipNorm) {
		return 1
	}
	return c.ClipNorm / norm
}

// AdamW is the optimizer state: the moments m and v on the device, in the
// parameters' flat layout (fp32, or bf16 with NewAdamWMoments), and the
// count of steps taken.
type AdamW struct {
	Config Config
	M, V   *tensor.Tensor
	Steps  int    // optimizer steps taken (skipped steps do not count)
	Seed   uint64 // stochastic rounding of bf16 moments (device.SRBits)

	dev    device.Device
	layout *tensor.Layout
}

// ErrMoments is returned (wrapped) for moments in a dtype the device
// cannot keep them in.
var ErrMoments = errors.New("optim: unsupported moment dtype")

// NewAdamW allocates zeroed fp32 moments for layout on dev.
func NewAdamW(dev device.Device, layout *tensor.Layout, cfg Config) (*AdamW, error) {
	return NewAdamWMoments(dev, layout, cfg, tensor.F32, 0)
}

// NewAdamWMoments allocates zeroed moments of dtype dt for layout on dev:
// F32, or BF16 (half the optimizer state; the device must implement
// device.MomentsBF16), rounded stochastically from seed.
func NewAdamWMoments(dev device.Device, layout *tensor.Layout, cfg Config, dt tensor.DType, seed uint64) (*AdamW, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch dt {
	case tensor.F32:
	case tensor.BF16:
		if _, ok := dev.(device.MomentsBF16); !ok {
			return nil, fmt.Errorf("%w: %s keeps no bf16 moments; use fp32 moments (--adam-state fp32)", ErrMoments, dev.Name())
		}
	default:
		return nil, fmt.Errorf("%w: %s moments (fp32 or bf16)", ErrMoments, dt)
	}
	m, err := dev.Alloc(dt, layout.Total)
	if err != nil {
		return nil, err
	}
	v, err := dev.Alloc(dt, layout.Total)
	if err != nil {
		dev.Free(m)
		return nil, err
	}
	return &AdamW{Config: cfg, M: m, V: v, Seed: seed, dev: dev, layout: layout}, nil
}

// Update takes one AdamW step at learning rate lr, multiplying every
// gradient by gradScale first (1/loss-scale × clip factor), and writes the
// 16-bit working copy when work is not nil. The device runs it as one fused
// pass or as the per-tensor baseline (fp32 moments; bf16 moments have one
// form).
//
// With w (the FP8 weights of gpt.Model.FP8Weights) it then writes their
// FP8 copies from the updated working copy (CastFP8).
func (o *AdamW) Update(master, work, grads *tensor.Tensor, lr, gradScale float32, w ...device.FP8Weight) {
	o.Steps++
	hp := device.AdamW{
		LR: lr, Beta1: o.Config.Beta1, Beta2: o.Config.Beta2, Eps: o.Config.Eps,
		WeightDecay: o.Config.WeightDecay, Step: o.Steps, GradScale: gradScale, Seed: o.Seed,
	}
	if o.M.DType == tensor.BF16 {
		o.dev.(device.MomentsBF16).AdamWBF16(master, work, grads, o.M, o.V, o.layout, hp, nil)
	} else {
		o.dev.AdamWStep(master, work, grads, o.M, o.V, o.layout, hp)
	}
	o.CastFP8(work, w)
}

// CastFP8 writes the FP8 copies of the weights in w from the working copy
// work (device.FP8's CastTransposeFP8 of each): what Update, and
// UpdateState with bf16 moments, do after the step, and what a skipped
// step does alone (the weights stay, their scales moved).
func (o *AdamW) CastFP8(work *tensor.Tensor, w []device.FP8Weight) {
	if len(w) == 0 {
		return
	}
	device.CastFP8Weights(o.dev.(device.FP8), work, w)
}

// UpdateState is the device-resident step's AdamW (device.Stepper's
// AdamWState, or AdamWBF16 with the state for bf16 moments): hp's betas,
// eps and weight decay, the per-step scalars from state. With w (the FP8
// weights of gpt.Model.FP8Weights) it also writes their FP8 copies from
// the updated working copy: in the same pass (device.FP8's
// AdamWStateFP8) with fp32 moments, after it (CastTransposeFP8 of each)
// with bf16 moments.
func (o *AdamW) UpdateState(st device.Stepper, master, work, grads *tensor.Tensor, hp device.AdamW, state *tensor.Tensor, w ...device.FP8Weight) {
	if o.M.DType == tensor.BF16 {
		hp.Seed = o.Seed
		o.dev.(device.MomentsBF16).AdamWBF16(master, work, grads, o.M, o.V, o.layout, hp, state)
		o.CastFP8(work, w)
		return
	}
	if len(w) > 0 {
		o.dev.(device.FP8).AdamWStateFP8(master, work, grads, o.M, o.V, o.layout, hp, state, w)
		return
	}
	st.AdamWState(master, work, grads, o.M, o.V, o.layout, hp, state)
}

// Moments returns the moments' dtype (F32 or BF16).
func (o *AdamW) Moments() tensor.DType { return o.M.DType }

// Close frees the moments' device memory.
func (o *AdamW) Close() {
	o.dev.Free(o.M)
	o.dev.Free(o.V)
	o.M, o.V = nil, nil
}
