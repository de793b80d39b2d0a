package gpt

import (
	"fmt"
	"math"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// Model is a GPT-2 style transformer on a device. Parameters, gradients and
// (in the optimizer) moments each live in one flat buffer, cut into views by
// the Config's Layout. Activations for the largest (B, T) seen are allocated
// once and reused; a step allocates nothing.
type Model struct {
	Config Config
	Policy amp.Policy

	dev    device.Device
	layout *tensor.Layout
	master *tensor.Tensor // fp32 parameters (layout.Total)
	work   *tensor.Tensor // parameters in the policy's 16-bit type, nil under FP32
	grads  *tensor.Tensor // fp32 gradients (layout.Total)

	wp, gp params // views of the working parameters and of the gradients

	acts      *activations   // the set of the last forward
	cache     []*activations // at most two sets, by (B, T)
	B, T      int            // sizes of the last forward
	logitsOf  *activations   // the set whose lnf Logits may read (the last run was a Forward), or nil
	headRows  int            // rows of the LM head's chunk for sets allocated from now; 0: HeadRows
	recompute Recompute      // what backward computes again instead of keeping (SetRecompute)
	fp8       *fp8State      // the FP8 step's scales and weight copies (amp.FP8), nil until its first step
	fp8Recipe *amp.FP8Recipe // SetFP8Recipe's, nil: amp.DefaultFP8Recipe
	// fp8Pending: ZeroGrad began a step before the FP8 state existed;
	// fp8Restore: SetFP8Scales's state for it. Both are taken when it is
	// made (ensureFP8).
	fp8Pending bool
	fp8Restore *amp.FP8Scales
	// fp8SplitLNCast: the FP8 backward runs each layernorm backward that
	// updates the residual gradient and the cast of that gradient as two
	// ops (LayerNormBackward, CastTransposeDBiasFP8) instead of
	// LayerNormBackwardCastFP8; set by tests, which compare the two.
	fp8SplitLNCast bool
}

// params are views of one flat buffer, by role.
type params struct {
	wte, wpe, lnfw, lnfb *tensor.Tensor
	layers               []layerParams
}

type layerParams struct {
	ln1w, ln1b, qkvw, qkvb, attprojw, attprojb *tensor.Tensor
	ln2w, ln2b, fcw, fcb, fcprojw, fcprojb     *tensor.Tensor
}

func cut(l *tensor.Layout, flat *tensor.Tensor) (params, error) {
	views, err := l.Views(flat)
	if err != nil {
		return params{}, err
	}
	by := make(map[string]*tensor.Tensor, len(views))
	for i, s := range l.Segments {
		by[s.Name] = views[i]
	}
	p := params{wte: by["wte"], wpe: by["wpe"], lnfw: by["ln_f.weight"], lnfb: by["ln_f.bias"]}
	for i := 0; ; i++ {
		q := fmt.Sprintf("h.%d.", i)
		if by[q+"ln_1.weight"] == nil {
			break
		}
		p.layers = append(p.layers, layerParams{
			ln1w: by[q+"ln_1.weight"], ln1b: by[q+"ln_1.bias"],
			qkvw: by[q+"attn.c_attn.weight"], qkvb: by[q+"attn.c_attn.bias"],
			attprojw: by[q+"attn.c_proj.weight"], attprojb: by[q+"attn.c_proj.bias"],
			ln2w: by[q+"ln_2.weight"], ln2b: by[q+"ln_2.bias"],
			fcw: by[q+"mlp.c_fc.weight"], fcb: by[q+"mlp.c_fc.bias"],
			fcprojw: by[q+"mlp.c_proj.weight"], fcprojb: by[q+"mlp.c_proj.bias"],
		})
	}
	return p, nil
}

// New allocates a model with zero parameters on dev; call Init or
// SetParams before use.
func New(dev device.Device, cfg Config, policy amp.Policy) (*Model, error) {
	return newModel(dev, cfg, policy, true)
}

// NewInference is New without the gradient buffer, for a model that only
// runs forward (evaluation, generation): it holds a third less memory in
// fp32, and Gradients returns an error.
func NewInference(dev device.Device, cfg Config, policy amp.Policy) (*Model, error) {
	return newModel(dev, cfg, policy, false)
}

func newModel(dev device.Device, cfg Config, policy amp.Policy, train bool) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Model{Config: cfg, Policy: policy, dev: dev, layout: cfg.Layout()}
	n := m.layout.Total
	var err error
	if m.master, err = dev.Alloc(tensor.F32, n); err != nil {
		return nil, err
	}
	if !train {
		working := m.master
		if policy.Mixed() {
			if m.work, err = dev.Alloc(policy.Half(), n); err != nil {
				return nil, err
			}
			working = m.work
		}
		m.wp, err = cut(m.layout, working)
		return m, err
	}
	if m.grads, err = dev.Alloc(tensor.F32, n); err != nil {
		return nil, err
	}
	working := m.master
	if policy.Mixed() {
		if m.work, err = dev.Alloc(policy.Half(), n); err != nil {
			return nil, err
		}
		working = m.work
	}
	if m.wp, err = cut(m.layout, working); err != nil {
		return nil, err
	}
	if m.gp, err = cut(m.layout, m.grads); err != nil {
		return nil, err
	}
	return m, nil
}

// Device returns the device the model lives on.
func (m *Model) Device() device.Device { return m.dev }

// Layout returns the flat parameter layout.
func (m *Model) Layout() *tensor.Layout { return m.layout }

// Master returns the fp32 master parameter buffer (device memory).
func (m *Model) Master() *tensor.Tensor { return m.master }

// Work returns the 16-bit working copy of the parameters, nil under FP32.
func (m *Model) Work() *tensor.Tensor { return m.work }

// Grads returns the fp32 gradient buffer (device memory), nil for a model
// of NewInference.
func (m *Model) Grads() *tensor.Tensor { return m.grads }

// InitParams returns GPT-2's initialisation for cfg as a host slice in
// layout order: every weight and embedding N(0, 0.02), the residual
// projections (attn.c_proj, mlp.c_proj) N(0, 0.02/sqrt(2L)), biases zero,
// layernorm gains one. It is deterministic in seed.
func InitParams(cfg Config, seed uint64) []float32 {
	l := cfg.Layout()
	out := make([]float32, l.Total)
	rng := tensor.NewRNG(seed)
	resid := 0.02 / math.Sqrt(2*float64(cfg.Layers))
	for _, s := range l.Segments {
		v := out[s.Offset : s.Offset+s.Numel()]
		switch {
		case hasSuffix(s.Name, "ln_1.weight", "ln_2.weight", "ln_f.weight"):
			for i := range v {
				v[i] = 1
			}
		case len(s.Shape) == 1: // biases
		default:
			std := 0.02
			if hasSuffix(s.Name, "attn.c_proj.weight", "mlp.c_proj.weight") {
				std = resid
			}
			for i := range v {
				v[i] = float32(rng.Norm() * std)
			}
		}
	}
	return out
}

func hasSuffix(s string, suffixes ...string) bool {
	for _, x := range suffixes {
		if len(s) >= len(x) && s[len(s)-len(x):] == x {
			return true
		}
	}
	return false
}

// Init sets the parameters to GPT-2's initialisation (see InitParams).
func (m *Model) Init(seed uint64) error { return m.SetParams(InitParams(m.Config, seed)) }

// SetParams uploads fp32 parameters in layout order and refreshes the
// working copy.
func (m *Model) SetParams(p []float32) error {
	if len(p) != m.layout.Total {
		return fmt.Errorf("gpt: %d parameters given, the model has %d: %w", len(p), m.layout.Total, tensor.ErrShape)
	}
	host, _ := tensor.ViewF32(p, len(p))
	m.dev.Upload(m.master, host)
	m.SyncWork()
	return m.dev.Sync()
}

// UseParams is SetParams for a caller that hands p over: on a device whose
// tensors are host memory (the CPU) the model keeps p itself as its fp32
// parameters, without a copy (p must not be changed or used after); on
// others it uploads p as SetParams does. Loading a checkpoint to generate
// from it then holds its weights once.
func (m *Model) UseParams(p []float32) error {
	if len(p) != m.layout.Total {
		return fmt.Errorf("gpt: %d parameters given, the model has %d: %w", len(p), m.layout.Total, tensor.ErrShape)
	}
	if !m.master.IsHost() || len(p) == 0 {
		return m.SetParams(p)
	}
	view, err := tensor.ViewF32(p, m.master.Shape...)
	if err != nil {
		return err
	}
	m.dev.Free(m.master)
	m.master = view
	if m.work == nil { // the working parameters are the master ones: cut them again
		if m.wp, err = cut(m.layout, m.master); err != nil {
			return err
		}
	}
	m.SyncWork()
	return m.dev.Sync()
}

// SyncWork rewrites the 16-bit working copy from the master parameters (the
// optimizer does this itself in its pass; this is for loads and edits).
func (m *Model) SyncWork() {
	if m.work != nil {
		m.dev.Cast(m.work, m.master)
	}
}

// Params downloads the fp32 master parameters in layout order.
func (m *Model) Params() ([]float32, error) { return m.download(m.master) }

// GradValues downloads the fp32 gradients in layout order.
func (m *Model) GradValues() ([]float32, error) {
	if m.grads == nil {
		return nil, errInference
	}
	return m.download(m.grads)
}

// errInference is the error of a training call on a model of NewInference.
var errInference = fmt.Errorf("gpt: the model was built for inference (NewInference): it has no gradients")

func (m *Model) download(t *tensor.Tensor) ([]float32, error) {
	host := tensor.New(t.DType, t.Shape...)
	m.dev.Download(host, t)
	if err := m.dev.Sync(); err != nil {
		return nil, err
	}
	return host.ToF32(), nil
}

// ZeroGrad sets every gradient to zero (backward accumulates): a
// training step begins. Under amp.FP8 it also queues the FP8 scales'
// update from the last step's amaxes and the weights' FP8 casts.
func (m *Model) ZeroGrad() {
	if m.grads != nil {
		m.dev.Zero(m.grads)
	}
	if m.fp8 != nil {
		m.beginFP8Step()
	} else if m.trainsFP8() {
		m.fp8Pending = true
	}
}

// Close frees the model's device memory; the model must not be used after.
func (m *Model) Close() {
	for _, a := range m.cache {
		a.free(m.dev)
	}
	m.cache, m.acts = nil, nil
	if m.fp8 != nil {
		m.fp8.free(m.dev)
		m.fp8 = nil
	}
	for _, t := range []*tensor.Tensor{m.master, m.work, m.grads} {
		if t != nil {
			m.dev.Free(t)
		}
	}
	m.master, m.work, m.grads = nil, nil, nil
}
