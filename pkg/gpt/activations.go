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
	dt    tensor.DType // with fixed: this dtype whatever the policy
	fixed bool
}

// dtype returns the spec's dtype under policy p.
func (s actSpec) dtype(p amp.Policy) tensor.DType {
	switch {
	case s.fixed:
		return s.dt
	case s.name == "tokens" || s.name == "targets":
		return tensor.I32
	}
	return p.DType(s.kind)
}

// activationSpecs lists every buffer a training step at (B, T) keeps: the
// saved activations of forward (per layer where the name says so) and the
// scratch gradients of backward. att is the attention state the device
// saves per layer (device.Device.AttentionState).
func activationSpecs(c Config, B, T int, att device.AttnState) []actSpec {
	C, L, V := c.Channels, c.Layers, c.Vocab
	N := B * T
	return []actSpec{
		{name: "tokens", kind: amp.Stats, shape: []int{N}}, // I32, counted as 4 bytes like Stats
		{name: "targets", kind: amp.Stats, shape: []int{N}},
		{name: "encoded", kind: amp.Residual, shape: []int{N, C}},
		{name: "ln1", kind: amp.Activation, shape: []int{L, N, C}},
		{name: "ln1_mean", kind: amp.Stats, shape: []int{L, N}},
		{name: "ln1_rstd", kind: amp.Stats, shape: []int{L, N}},
		{name: "qkv", kind: amp.Activation, shape: []int{L, N, 3 * C}},
		{name: "atty", kind: amp.Activation, shape: []int{L, N, C}},
		{name: "att", kind: amp.Activation, shape: append([]int{L}, att.Shape...), dt: att.DType, fixed: true},
		{name: "attproj", kind: amp.Activation, shape: []int{L, N, C}},
		{name: "residual2", kind: amp.Residual, shape: []int{L, N, C}},
		{name: "ln2", kind: amp.Activation, shape: []int{L, N, C}},
		{name: "ln2_mean", kind: amp.Stats, shape: []int{L, N}},
		{name: "ln2_rstd", kind: amp.Stats, shape: []int{L, N}},
		{name: "fch", kind: amp.Activation, shape: []int{L, N, 4 * C}},
		{name: "fch_gelu", kind: amp.Activation, shape: []int{L, N, 4 * C}},
		{name: "fcproj", kind: amp.Activation, shape: []int{L, N, C}},
		{name: "residual3", kind: amp.Residual, shape: []int{L, N, C}},
		{name: "lnf", kind: amp.Activation, shape: []int{N, C}},
		{name: "lnf_mean", kind: amp.Stats, shape: []int{N}},
		{name: "lnf_rstd", kind: amp.Stats, shape: []int{N}},
		{name: "logits", kind: amp.Activation, shape: []int{N, V}},
		{name: "losses", kind: amp.Stats, shape: []int{N}},
		// backward scratch
		{name: "dresidual", kind: amp.Residual, shape: []int{N, C}},
		{name: "dln", kind: amp.ActGrad, shape: []int{N, C}},
		{name: "datty", kind: amp.ActGrad, shape: []int{N, C}},
		{name: "dqkv", kind: amp.ActGrad, shape: []int{N, 3 * C}},
		{name: "dfch", kind: amp.ActGrad, shape: []int{N, 4 * C}},
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
	att := dev.AttentionState(p.DType(amp.Activation), B, T, c.Channels, c.Heads)
	specs := activationSpecs(c, B, T, att)
	ts := make([]*tensor.Tensor, len(specs))
	for i, s := range specs {
		t, err := dev.Alloc(s.dtype(p), s.shape...)
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
