package gpt

import (
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// backward accumulates the parameter gradients, starting from dln, the
// gradient of ln_f's output that the chunked LM head (head) wrote, and
// after the head's share of wte's gradient. Ops run in the reverse order of
// forward, as in llm.c. Errors surface at the next Sync.
func (m *Model) backward() {
	d, a, p, g := m.dev, m.acts, m.wp, m.gp
	B, T := m.B, m.T
	N := B * T
	C, L := m.Config.Channels, m.Config.Layers

	d.Zero(a.dresidual)
	if m.fp8 != nil && a.f8 != nil {
		// ln_f's backward also casts dresidual for the last block's MLP projection
		m.layerNormBackwardFP8(g.lnfw, g.lnfb, layer(a.residual3, L-1), p.lnfw, a.lnfMean, a.lnfRstd, g.layers[L-1].fcprojb, (L-1)*f8PerLayer+f8FCProjdy, N, C)
		m.blocksBackwardFP8()
	} else {
		d.LayerNormBackward(a.dresidual, g.lnfw, g.lnfb, a.dln, layer(a.residual3, L-1), p.lnfw, a.lnfMean, a.lnfRstd, N, C)
		m.blocksBackward()
	}
	d.EncoderBackward(g.wte, g.wpe, a.dresidual, a.tokens, B, T, C)
}

// blocksBackward runs the blocks' backward from the last to the first,
// from dresidual (the gradient of the last block's output) to the
// gradient of the encoder's output, in dresidual.
func (m *Model) blocksBackward() {
	d, a, p, g := m.dev, m.acts, m.wp, m.gp
	B, T := m.B, m.T
	N := B * T
	C, NH, L := m.Config.Channels, m.Config.Heads, m.Config.Layers
	for l := L - 1; l >= 0; l-- {
		// Under recomputation, the buffers that one slice serves for every
		// layer hold the last block's values after forward; the blocks
		// before it compute theirs again here.
		if l < L-1 {
			switch m.recompute {
			case RecomputeLayer:
				m.recomputeBlock(l)
			case RecomputeGELU:
				m.recomputeGELU(l)
			}
		}
		w, gw := p.layers[l], g.layers[l]
		residual := a.encoded
		if l > 0 {
			residual = layer(a.residual3, l-1)
		}
		// dresidual is the gradient of residual3[l] = residual2 + fcproj.
		// The projection's backward runs the GELU's backward and the fc
		// layer's bias gradient in its dgrad product (overwriting dfch); the
		// fc product's input gradient is stored where the device can
		// (device.GradStorer), else accumulated into a zeroed dln.
		d.MatmulBackwardGELU(a.dfch, gw.fcb, gw.fcprojw, gw.fcprojb, a.dresidual, layer(a.fchGelu, l), layer(a.fch, l), w.fcprojw, N, 4*C, C)
		m.matmulBackwardStore(a.dln, gw.fcw, nil, a.dfch, layer(a.ln2, l), w.fcw, N, C, 4*C)
		d.LayerNormBackward(a.dresidual, gw.ln2w, gw.ln2b, a.dln, layer(a.residual2, l), w.ln2w, layer(a.ln2Mean, l), layer(a.ln2Rstd, l), N, C)
		// dresidual is now the gradient of residual2 = residual + attproj.
		m.matmulBackwardStore(a.datty, gw.attprojw, gw.attprojb, a.dresidual, layer(a.atty, l), w.attprojw, N, C, C)
		// dq, dk and dv stored where the device can (no zeroing of dqkv)
		m.attentionBackwardStore(a.dqkv, a.datty, layer(a.qkv, l), layer(a.atty, l), layer(a.att, l), B, T, C, NH)
		m.matmulBackwardStore(a.dln, gw.qkvw, gw.qkvb, a.dqkv, layer(a.ln1, l), w.qkvw, N, C, 3*C)
		d.LayerNormBackward(a.dresidual, gw.ln1w, gw.ln1b, a.dln, residual, w.ln1w, layer(a.ln1Mean, l), layer(a.ln1Rstd, l), N, C)
	}
}

// matmulBackwardStore is MatmulBackward with dinp stored: through
// device.GradStorer where the device has it (no zeroing queued), else by
// zeroing dinp and accumulating. The values are the same (a product added
// to zero is the product; only a -0 product stays -0 when stored).
func (m *Model) matmulBackwardStore(dinp, dweight, dbias, dout, inp, weight *tensor.Tensor, N, C, OC int) {
	if s, ok := m.dev.(device.GradStorer); ok {
		s.MatmulBackwardStore(dinp, dweight, dbias, dout, inp, weight, N, C, OC)
		return
	}
	m.dev.Zero(dinp)
	m.dev.MatmulBackward(dinp, dweight, dbias, dout, inp, weight, N, C, OC)
}

// attentionBackwardStore is AttentionBackward with dqkv stored: through
// device.GradStorer where the device has it (no zeroing queued), else by
// zeroing dqkv and accumulating (the same values).
func (m *Model) attentionBackwardStore(dqkv, dout, qkv, out, att *tensor.Tensor, B, T, C, NH int) {
	if s, ok := m.dev.(device.GradStorer); ok {
		s.AttentionBackwardStore(dqkv, dout, qkv, out, att, B, T, C, NH)
		return
	}
	m.dev.Zero(dqkv)
	m.dev.AttentionBackward(dqkv, dout, qkv, out, att, B, T, C, NH)
}
