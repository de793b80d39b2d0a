package gpt

import (
	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// actSpec is one activation buffer: its kind (which decides its dtype under
// a policy) and shape. Memory accounting and allocation share this table.
type actSpec struct {
	name  string
	kind  amp.Kind
	shape []int
}

// activationSpecs lists every buffer a training step at (B, T) keeps: the
// saved activations of forward (per layer where the name says so) and the
// scratch gradients of backward.
func activationSpecs(c Config, B, T int) []actSpec {
	C, L, NH, V := c.Channels, c.Layers, c.Heads, c.Vocab
	N := B * T
	return []actSpec{
		{"tokens", amp.Stats, []int{N}}, // I32, counted as 4 bytes like Stats
		{"targets", amp.Stats, []int{N}},
		{"encoded", amp.Residual, []int{N, C}},
		{"ln1", amp.Activation, []int{L, N, C}},
		{"ln1_mean", amp.Stats, []int{L, N}},
		{"ln1_rstd", amp.Stats, []int{L, N}},
		{"qkv", amp.Activation, []int{L, N, 3 * C}},
		{"atty", amp.Activation, []int{L, N, C}},
		{"att", amp.Activation, []int{L, B, NH, T, T}},
		{"attproj", amp.Activation, []int{L, N, C}},
		{"residual2", amp.Residual, []int{L, N, C}},
		{"ln2", amp.Activation, []int{L, N, C}},
		{"ln2_mean", amp.Stats, []int{L, N}},
		{"ln2_rstd", amp.Stats, []int{L, N}},
		{"fch", amp.Activation, []int{L, N, 4 * C}},
		{"fch_gelu", amp.Activation, []int{L, N, 4 * C}},
		{"fcproj", amp.Activation, []int{L, N, C}},
		{"residual3", amp.Residual, []int{L, N, C}},
		{"lnf", amp.Activation, []int{N, C}},
		{"lnf_mean", amp.Stats, []int{N}},
		{"lnf_rstd", amp.Stats, []int{N}},
		{"logits", amp.Activation, []int{N, V}},
		{"losses", amp.Stats, []int{N}},
		// backward scratch
		{"dresidual", amp.Residual, []int{N, C}},
		{"dln", amp.ActGrad, []int{N, C}},
		{"datty", amp.ActGrad, []int{N, C}},
		{"dqkv", amp.ActGrad, []int{N, 3 * C}},
		{"dfch", amp.ActGrad, []int{N, 4 * C}},
	}
}

// activations holds the buffers of activationSpecs, by role.
type activations struct {
	B, T                                      int
	tokens, targets, encoded                  *tensor.Tensor
	ln1, ln1Mean, ln1Rstd, qkv, atty, att     *tensor.Tensor
	attproj, residual2, ln2, ln2Mean, ln2Rstd *tensor.Tensor
	fch, fchGelu, fcproj, residual3           *tensor.Tensor
	lnf, lnfMean, lnfRstd, logits, losses     *tensor.Tensor
	dresidual, dln, datty, dqkv, dfch         *tensor.Tensor
	all                                       []*tensor.Tensor
}

func allocActivations(dev device.Device, c Config, p amp.Policy, B, T int) (*activations, error) {
	specs := activationSpecs(c, B, T)
	ts := make([]*tensor.Tensor, len(specs))
	for i, s := range specs {
		dt := p.DType(s.kind)
		if s.name == "tokens" || s.name == "targets" {
			dt = tensor.I32
		}
		t, err := dev.Alloc(dt, s.shape...)
		if err != nil {
			for _, u := range ts[:i] {
				dev.Free(u)
			}
			return nil, err
		}
		ts[i] = t
	}
	a := &activations{B: B, T: T, all: ts}
	dst := []**tensor.Tensor{
		&a.tokens, &a.targets, &a.encoded,
		&a.ln1, &a.ln1Mean, &a.ln1Rstd, &a.qkv, &a.atty, &a.att,
		&a.attproj, &a.residual2, &a.ln2, &a.ln2Mean, &a.ln2Rstd,
		&a.fch, &a.fchGelu, &a.fcproj, &a.residual3,
		&a.lnf, &a.lnfMean, &a.lnfRstd, &a.logits, &a.losses,
		&a.dresidual, &a.dln, &a.datty, &a.dqkv, &a.dfch,
	}
	for i := range dst {
		*dst[i] = ts[i]
	}
	return a, nil
}

func (a *activations) free(dev device.Device) {
	for _, t := range a.all {
		dev.Free(t)
	}
}

// layer returns the per-layer slice l of a (L, ...) activation.
func layer(t *tensor.Tensor, l int) *tensor.Tensor {
	n := t.Numel() / t.Shape[0]
	return t.MustView(l*n, t.Shape[1:]...)
}
