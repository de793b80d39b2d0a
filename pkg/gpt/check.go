package gpt

// check.go: one training step on two devices, compared. It is the model-level
// numerical check of a device against the CPU reference: the GPU tests run it
// for every policy and form, and druto's detect runs it as the self-test that
// covers every kernel of a step (encoder, layernorm, residual, matmul with its
// epilogues, attention, GELU, the fused classifier, and all their backwards).

import (
	"errors"
	"fmt"
	"math"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// StepDiff is how far one training step's loss and gradients on a device are
// from those on a reference device, from the same parameters and batch.
type StepDiff struct {
	Policy     string  `json:"policy"`
	Loss       float32 `json:"loss"`
	RefLoss    float32 `json:"ref_loss"`
	LossRelErr float64 `json:"loss_rel_err"`
	GradRelErr float64 `json:"grad_rel_err"` // ||g - ref|| / ||ref|| over the whole gradient
	Worst      string  `json:"worst_tensor"` // the parameter tensor whose gradient differs most
	WorstErr   float64 `json:"worst_rel_err"`
	Limit      float64 `json:"limit"` // for the loss, the whole gradient and its norm; 4·Limit per tensor
	// NormRelErr compares the global gradient norms (GradNorm, unscaled).
	NormRelErr float64 `json:"norm_rel_err"`
	// OptimRelErr is the largest relative error of the fp32 master weights
	// and the moments m and v after one AdamW step that both devices take
	// from the same state and the same (the reference's) gradients: fp32
	// arithmetic on equal inputs, held to OptimLimit.
	OptimRelErr float64 `json:"optim_rel_err"`
	// WorkRelErr compares the 16-bit working copies that step writes (0 under
	// FP32, which has none), held to WorkLimit: one rounding to the half type.
	WorkRelErr float64 `json:"work_rel_err"`
}

// OptimLimit and WorkLimit bound OptimRelErr and WorkRelErr.
const OptimLimit = 1e-5

// WorkLimit is the bound of WorkRelErr under policy p: one rounding to its
// 16-bit type, whose relative error is at most half an epsilon.
func WorkLimit(p amp.Policy) float64 {
	if !p.Mixed() {
		return OptimLimit
	}
	return p.Half().Eps()
}

// Pass reports whether the step agrees with the reference within StepLimit:
// the loss and the whole gradient within Limit, every tensor's gradient
// within 4·Limit. NaN never passes.
func (d StepDiff) Pass() bool {
	work := OptimLimit
	if p, err := amp.ParsePolicy(d.Policy); err == nil {
		work = WorkLimit(p)
	}
	return d.LossRelErr <= d.Limit && d.GradRelErr <= d.Limit && d.WorstErr <= 4*d.Limit &&
		d.NormRelErr <= d.Limit && d.OptimRelErr <= OptimLimit && d.WorkRelErr <= work
}

// String summarises the comparison in one line.
func (d StepDiff) String() string {
	return fmt.Sprintf("%s: loss %.6f vs %.6f (rel err %.2g), gradients rel err %.2g, worst %s %.2g, norm %.2g (limit %.2g); "+
		"AdamW %.2g, working copy %.2g", d.Policy, d.Loss, d.RefLoss, d.LossRelErr, d.GradRelErr, d.Worst, d.WorstErr,
		d.NormRelErr, d.Limit, d.OptimRelErr, d.WorkRelErr)
}

// StepLimit is the largest relative error allowed between two devices'
// losses and gradients of one training step under a policy. A step is some
// forty ops deep and every op rounds to the policy's type, at different (all
// correct) rounding points on each device (GEMM sum orders, a 16-bit copy of
// an fp32 gradient, a 16-bit score gradient): 8 epsilons of the 16-bit type;
// for fp32 the 1e-4 that the PyTorch parity test allows gradients.
func StepLimit(p amp.Policy) float64 {
	if p == amp.FP32 {
		return 1e-4
	}
	return 8 * p.Half().Eps()
}

// CheckConfig is the model CompareStep is usually run on: the tiny preset's
// shape with the batch shape (B 4, T 64) the GPU tests use.
var CheckConfig = struct {
	Config
	B, T int
}{Config{Vocab: 256, MaxSeq: 128, Layers: 4, Heads: 4, Channels: 128}, 4, 64}

// CompareStep initialises the same model (seed) on dev and on ref under
// policy p, runs forward and backward on the same random batch of B×T tokens
// (drawn from seed) and compares the loss and every gradient. Under FP16 the
// loss is scaled by 1024 on both, as the GradScaler would, so that gradients
// stay above fp16's subnormals. A fused dev runs its LM head in chunks of
// about a third of the rows (the reference, whole), so that the chunked
// head is checked at any vocabulary. An error means a step could not run
// at all.
func CompareStep(dev, ref device.Device, cfg Config, p amp.Policy, B, T int, seed uint64) (StepDiff, error) {
	d := StepDiff{Policy: p.String(), Limit: StepLimit(p)}
	if err := cfg.Validate(); err != nil {
		return d, err
	}
	if B < 1 || T < 1 || T > cfg.MaxSeq {
		return d, fmt.Errorf("gpt: CompareStep: batch %d x %d does not fit %v", B, T, cfg)
	}
	rng := tensor.NewRNG(seed)
	inputs, targets := randomTokens(rng, B*T, cfg.Vocab)
	scale := checkScale(p)
	var loss [2]float32
	var grads [2][]float32
	var norms [2]float32
	models := [2]*Model{}
	defer func() {
		for _, m := range models {
			if m != nil {
				m.Close()
			}
		}
	}()
	for k, dv := range []device.Device{dev, ref} {
		m, err := New(dv, cfg, p)
		if err != nil {
			return d, fmt.Errorf("gpt: CompareStep on %s: %w", dv.Name(), err)
		}
		models[k] = m
		if k == 0 && dv.Fused() {
			// The device under test runs its LM head in about three
			// chunks, the last one shorter, as the fused step does at
			// gpt2's vocabulary; the reference runs it whole.
			m.headRows = checkHeadRows(B * T)
		}
		err = m.Init(seed)
		if err == nil {
			m.ZeroGrad()
			loss[k], err = m.Gradients(inputs, targets, B, T, scale)
		}
		if err == nil {
			grads[k], err = m.GradValues()
		}
		if err == nil {
			norms[k], _ = dv.GradNorm(m.Grads(), 1/scale)
			err = dv.Sync()
		}
		if err != nil {
			return d, fmt.Errorf("gpt: CompareStep on %s: %w", dv.Name(), err)
		}
	}
	layout := models[0].Layout()
	d.Loss, d.RefLoss = loss[0], loss[1]
	d.LossRelErr = finite(math.Abs(float64(loss[0]-loss[1])) / math.Abs(float64(loss[1])))
	d.GradRelErr = finite(tensor.RelErr(grads[0], grads[1]))
	d.NormRelErr = finite(math.Abs(float64(norms[0]-norms[1])) / math.Abs(float64(norms[1])))
	d.WorstErr = -1
	for _, s := range layout.Segments {
		lo, hi := s.Offset, s.Offset+s.Numel()
		if e := finite(tensor.RelErr(grads[0][lo:hi], grads[1][lo:hi])); e > d.WorstErr {
			d.Worst, d.WorstErr = s.Name, e
		}
	}
	var err error
	d.OptimRelErr, d.WorkRelErr, err = compareAdamW(models, grads[1], scale, rng)
	return d, err
}

// checkHeadRows is the LM head's chunk of CompareStep's device under test
// over n rows: about a third, rounded up to a multiple of 8 rows.
func checkHeadRows(n int) int { return max(8, (n/3+7)/8*8) }

// compareAdamW gives both models the same gradients and the same random
// moments, takes one AdamW step on each device (step 7, weight decay on)
// and compares master weights, moments and working copies.
func compareAdamW(models [2]*Model, g []float32, scale float32, rng *tensor.RNG) (optim, work float64, err error) {
	n := len(g)
	m0, v0 := make([]float32, n), make([]float32, n)
	for i := range m0 {
		m0[i] = float32(rng.Norm()) * 1e-3
		v0[i] = float32(rng.Float64()) * 1e-6
	}
	hp := device.AdamW{LR: 6e-4, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Step: 7, GradScale: 1 / scale}
	var after [2][3][]float32 // master, m, v
	var works [2][]float32
	for k, md := range models {
		dv := md.Device()
		mom, err1 := dv.Alloc(tensor.F32, n)
		vel, err2 := dv.Alloc(tensor.F32, n)
		if err := errors.Join(err1, err2); err != nil {
			return 0, 0, fmt.Errorf("gpt: CompareStep on %s: %w", dv.Name(), err)
		}
		defer dv.Free(mom)
		defer dv.Free(vel)
		for _, c := range []struct {
			dst *tensor.Tensor
			v   []float32
		}{{md.Grads(), g}, {mom, m0}, {vel, v0}} {
			h, err := tensor.FromF32(c.v, n)
			if err != nil {
				return 0, 0, err
			}
			dv.Upload(c.dst, h)
		}
		dv.AdamWStep(md.Master(), md.Work(), md.Grads(), mom, vel, md.Layout(), hp)
		for j, t := range []*tensor.Tensor{md.Master(), mom, vel} {
			h := tensor.New(tensor.F32, n)
			dv.Download(h, t)
			after[k][j] = h.F32()
		}
		if w := md.Work(); w != nil {
			h := tensor.New(w.DType, n)
			dv.Download(h, w)
			works[k] = h.ToF32()
		}
		if err := dv.Sync(); err != nil {
			return 0, 0, fmt.Errorf("gpt: CompareStep: AdamW on %s: %w", dv.Name(), err)
		}
	}
	for j := range 3 {
		optim = max(optim, finite(tensor.RelErr(after[0][j], after[1][j])))
	}
	if works[1] != nil {
		work = finite(tensor.RelErr(works[0], works[1]))
	}
	return optim, work, nil
}

// finite turns NaN and ±Inf into math.MaxFloat64: it fails every
// "<= limit", and JSON (detect's report) can encode it.
func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return math.MaxFloat64
	}
	return x
}

// randomTokens draws n inputs and n targets below vocab from rng.
func randomTokens(rng *tensor.RNG, n, vocab int) (inputs, targets []int32) {
	inputs, targets = make([]int32, n), make([]int32, n)
	for i := range inputs {
		inputs[i], targets[i] = int32(rng.Intn(vocab)), int32(rng.Intn(vocab))
	}
	return inputs, targets
}

// checkScale is the loss scale of a checked step under p: 1024 where p
// needs a scaler, else 1.
func checkScale(p amp.Policy) float32 {
	if p.NeedsScaler() {
		return 1024
	}
	return 1
}
