package gpt

import (
	"fmt"

	"github.com/druto/druto/pkg/device"
)

// Recompute is how much of forward a training step keeps for backward; the
// rest is computed again during backward (activation recomputation, also
// called gradient checkpointing). Every level gives the same gradients: in
// fp32 on the CPU, the same bits.
type Recompute int

// Recomputation levels.
const (
	// RecomputeNone keeps every activation backward reads.
	RecomputeNone Recompute = iota
	// RecomputeGELU keeps the MLP's pre-activation but not its GELU output
	// (one (N, 4C) buffer serves every layer) and recomputes gelu(pre)
	// before each block's backward, as llm.c's -r 1 does.
	RecomputeGELU
	// RecomputeLayer keeps only each block's input (the residual stream)
	// and runs the block's forward again before its backward; one set of
	// the block's buffers serves every layer.
	RecomputeLayer
)

// RecomputeLevels lists the levels, least recomputation first.
var RecomputeLevels = []Recompute{RecomputeNone, RecomputeGELU, RecomputeLayer}

// String names the level: "none", "gelu" or "layer".
func (r Recompute) String() string {
	switch r {
	case RecomputeNone:
		return "none"
	case RecomputeGELU:
		return "gelu"
	case RecomputeLayer:
		return "layer"
	}
	return fmt.Sprintf("Recompute(%d)", int(r))
}

// ParseRecompute returns the level called s ("none", "gelu" or "layer").
func ParseRecompute(s string) (Recompute, error) {
	for _, r := range RecomputeLevels {
		if r.String() == s {
			return r, nil
		}
	}
	return 0, fmt.Errorf("gpt: unknown recompute level %q (choose none, gelu or layer)", s)
}

// Valid reports whether r is one of RecomputeLevels.
func (r Recompute) Valid() bool { return r >= RecomputeNone && r <= RecomputeLayer }

// perLayer returns how many layers of the per-layer activation name a
// step keeps at level r: L, or 1 where one buffer serves every layer.
func (r Recompute) perLayer(name string, L int) int {
	switch r {
	case RecomputeGELU:
		if name == "fch_gelu" {
			return 1
		}
	case RecomputeLayer:
		if name != "residual3" {
			return 1
		}
	}
	return L
}

// RecomputeFLOPsPerToken returns the FLOPs per token that level r adds to
// a training step at sequence length T, counted as FLOPsPerToken counts
// them (matmuls and attention products; elementwise work is not counted,
// so RecomputeGELU adds 0): RecomputeLayer runs the forward of every block
// but the last again, 2 FLOPs per block parameter and 4·C·T of attention
// per token and block.
func (c Config) RecomputeFLOPsPerToken(T int, r Recompute) float64 {
	if r != RecomputeLayer || c.Layers < 2 {
		return 0
	}
	C := float64(c.Channels)
	block := 12*C*C + 13*C // ln_1, c_attn, c_proj, ln_2, c_fc, mlp.c_proj: weights and biases
	return float64(c.Layers-1) * (2*block + 4*C*float64(T))
}

// SetRecompute sets the recomputation level of the following steps. The
// activation buffers are reallocated at the next step (their sizes depend
// on the level).
func (m *Model) SetRecompute(r Recompute) error {
	if !r.Valid() {
		return fmt.Errorf("gpt: unknown recompute level %d (choose none, gelu or layer)", int(r))
	}
	if r == m.recompute {
		return nil
	}
	for _, a := range m.cache {
		a.free(m.dev)
	}
	m.cache, m.acts, m.logitsOf = nil, nil, nil
	m.recompute = r
	return nil
}

// Recompute returns the model's recomputation level.
func (m *Model) Recompute() Recompute { return m.recompute }

// recomputeBlock runs block l's forward again from its input (encoded, or
// residual3 of the block before) into the one set of block buffers that
// RecomputeLayer keeps, with the ops and arguments of run, so that backward
// reads the values forward computed: the same bits on the CPU in fp32. The
// projections' outputs go to the work buffer, free at this point of
// backward (the block after has consumed its scratch).
func (m *Model) recomputeBlock(l int) {
	d, a, w := m.dev, m.acts, m.wp.layers[l]
	B, T := m.B, m.T
	N := B * T
	C, NH := m.Config.Channels, m.Config.Heads
	residual := a.encoded
	if l > 0 {
		residual = layer(a.residual3, l-1)
	}
	ln1, qkv, atty, att := layer(a.ln1, l), layer(a.qkv, l), layer(a.atty, l), layer(a.att, l)
	// forward computed ln_1 of block l > 0 in the fused residual add of the
	// block before, from the residual it stored: the same input here.
	d.LayerNorm(ln1, layer(a.ln1Mean, l), layer(a.ln1Rstd, l), residual, w.ln1w, w.ln1b, N, C)
	d.Matmul(qkv, nil, ln1, w.qkvw, w.qkvb, N, C, 3*C, device.None)
	d.Attention(atty, att, qkv, B, T, C, NH)
	d.Matmul(a.attproj, nil, atty, w.attprojw, w.attprojb, N, C, C, device.None)
	d.ResidualLayerNorm(layer(a.residual2, l), layer(a.ln2, l), layer(a.ln2Mean, l), layer(a.ln2Rstd, l), residual, a.attproj, w.ln2w, w.ln2b, N, C)
	d.Matmul(layer(a.fchGelu, l), layer(a.fch, l), layer(a.ln2, l), w.fcw, w.fcb, N, C, 4*C, device.GELU)
}

// recomputeGELU writes gelu(fch) of block l into the one GELU output buffer
// that RecomputeGELU keeps: through device.GELUer where the device has it,
// else by running the fc Matmul with its GELU epilogue again (the same
// values, one GEMM more).
func (m *Model) recomputeGELU(l int) {
	a := m.acts
	N, C := m.B*m.T, m.Config.Channels
	if g, ok := m.dev.(device.GELUer); ok {
		g.GELU(layer(a.fchGelu, l), layer(a.fch, l), N*4*C)
		return
	}
	w := m.wp.layers[l]
	m.dev.Matmul(layer(a.fchGelu, l), layer(a.fch, l), layer(a.ln2, l), w.fcw, w.fcb, N, C, 4*C, device.GELU)
}
