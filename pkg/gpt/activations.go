package gpt

import (
	"fmt"
	"os"
	"strconv"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// headBudget bounds the bytes of the fused step's logits chunk: the LM head
// and the cross-entropy run over the B·T rows in chunks of HeadRows rows,
// so the (B·T, V) logits never exist at once.
const headBudget = 256 << 20

// minHeadRows is the fewest rows of a chunk, whatever the vocabulary: a
// chunk's GEMMs stay large enough to keep the GPU busy.
const minHeadRows = 64

// HeadRows returns the rows of one chunk of the LM head over n rows in
// storage dtype dt: the largest power of two (at least 64) whose logits
// fit 256 MiB, or n itself when all n rows fit (one chunk, the unchunked
// head). At gpt2-124M (V 50304) that is 2048 rows under bf16 (206 MB) and
// 1024 under fp32. The decomposed baseline does not chunk (fused false).
// HeadRowsEnv, when set to a valid count, replaces the rule in fused modes.
func HeadRows(V, n int, dt tensor.DType, fused bool) int {
	if !fused {
		return n
	}
	if r, err := HeadRowsOverride(); err == nil && r > 0 {
		return min(r, n)
	}
	if int64(n)*int64(V)*int64(dt.Size()) <= headBudget {
		return n
	}
	r := minHeadRows
	for int64(2*r)*int64(V)*int64(dt.Size()) <= headBudget {
		r *= 2
	}
	return min(r, n)
}

// HeadRowsEnv names the environment variable that sets the LM head's chunk
// (rows, a multiple of 8) in fused modes, for measuring the trade between
// the chunk's memory and its GEMMs' speed (e.g. DRUTO_HEAD_ROWS=4096).
const HeadRowsEnv = "DRUTO_HEAD_ROWS"

// HeadRowsOverride returns the chunk HeadRowsEnv sets, 0 when it is unset,
// and an error naming the variable when its value is not a positive
// multiple of 8 (HeadRows then keeps its rule).
func HeadRowsOverride() (int, error) {
	v, ok := os.LookupEnv(HeadRowsEnv)
	if !ok || v == "" {
		return 0, nil
	}
	r, err := strconv.Atoi(v)
	if err != nil || r < 8 || r%8 != 0 {
		return 0, fmt.Errorf("%s=%q: want a positive multiple of 8 rows (or unset it)", HeadRowsEnv, v)
	}
	return r, nil
}

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

// bytes returns the spec's size in bytes under policy p.
func (s actSpec) bytes(p amp.Policy) int64 {
	e := int64(s.dtype(p).Size())
	for _, d := range s.shape {
		e *= int64(d)
	}
	return e
}

// workElems is the size of the shared work buffer (see activationSpecs):
// the largest of its three lives.
func workElems(c Config, N, rows int) int {
	return max(8*N*c.Channels, rows*c.Vocab)
}

// activationSpecs lists every buffer a training step at (B, T) keeps: the
// saved activations of forward (per layer where the name says so) and the
// scratch gradients of backward. att is the attention state the device
// saves per layer (device.Device.AttentionState); rows is the LM head's
// chunk (HeadRows).
//
// "work" is one buffer with three lives that never overlap in time:
//   - forward: the output of the attention projection and of the MLP
//     projection, (N, C) at offset 0, one buffer for every layer (each is
//     read once, by the residual add that follows it, and never by
//     backward);
//   - the LM head: a chunk of logits (rows, V), overwritten by its
//     gradient and consumed before the next chunk;
//   - backward: datty (N, C), dqkv (N, 3C) and dfch (N, 4C), side by side.
//
// At gpt2-124M B16 T1024 under bf16 the head's chunk (2048 × 50304) and the
// backward scratch (8·N·C) are both about 200 MB.
//
// Under recomputation r, a per-layer buffer that r does not keep has one
// layer instead of L (Recompute.perLayer): forward writes every layer into
// it, and backward computes it again before reading it.
//
// Under amp.FP8 the training step keeps the inputs of the blocks' linear
// layers as FP8 instead (fp8Batch, counted by ActivationBreakdown), so
// ln1, ln2 and fch_gelu hold one layer: only evaluation writes them, and
// reads each within its layer.
func activationSpecs(c Config, B, T int, att device.AttnState, rows int, r Recompute, p amp.Policy) []actSpec {
	specs := fullSpecs(c, B, T, att, rows)
	for i, s := range specs {
		k := r.perLayer(s.name, c.Layers)
		if p == amp.FP8 && fp8Replaced[s.name] {
			k = 1
		}
		if layered[s.name] && k != c.Layers {
			specs[i].shape = append([]int{k}, s.shape[1:]...)
		}
	}
	return specs
}

// fp8Replaced names the per-layer buffers whose training role FP8 copies
// take under amp.FP8.
var fp8Replaced = map[string]bool{"ln1": true, "ln2": true, "fch_gelu": true}

// layered names the buffers of fullSpecs that hold one slice per layer
// (shape (L, ...)).
var layered = map[string]bool{
	"ln1": true, "ln1_mean": true, "ln1_rstd": true, "qkv": true, "atty": true, "att": true,
	"residual2": true, "ln2": true, "ln2_mean": true, "ln2_rstd": true,
	"fch": true, "fch_gelu": true, "residual3": true,
}

// fullSpecs is activationSpecs without recomputation.
func fullSpecs(c Config, B, T int, att device.AttnState, rows int) []actSpec {
	C, L := c.Channels, c.Layers
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
		{name: "residual2", kind: amp.Residual, shape: []int{L, N, C}},
		{name: "ln2", kind: amp.Activation, shape: []int{L, N, C}},
		{name: "ln2_mean", kind: amp.Stats, shape: []int{L, N}},
		{name: "ln2_rstd", kind: amp.Stats, shape: []int{L, N}},
		{name: "fch", kind: amp.Activation, shape: []int{L, N, 4 * C}},
		{name: "fch_gelu", kind: amp.Activation, shape: []int{L, N, 4 * C}},
		{name: "residual3", kind: amp.Residual, shape: []int{L, N, C}},
		{name: "lnf", kind: amp.Activation, shape: []int{N, C}},
		{name: "lnf_mean", kind: amp.Stats, shape: []int{N}},
		{name: "lnf_rstd", kind: amp.Stats, shape: []int{N}},
		{name: "losses", kind: amp.Stats, shape: []int{N}},
		// backward scratch
		{name: "dresidual", kind: amp.Residual, shape: []int{N, C}},
		{name: "dln", kind: amp.ActGrad, shape: []int{N, C}},
		// Activation and ActGrad share the policy's half type.
		{name: "work", kind: amp.ActGrad, shape: []int{workElems(c, N, rows)}},
	}
}

// activations holds the buffers of activationSpecs, by role.
type activations struct {
	B, T                                  int
	rows                                  int // the LM head's chunk
	tokens, targets, encoded              *tensor.Tensor
	ln1, ln1Mean, ln1Rstd, qkv, atty, att *tensor.Tensor
	residual2, ln2, ln2Mean, ln2Rstd      *tensor.Tensor
	fch, fchGelu, residual3               *tensor.Tensor
	lnf, lnfMean, lnfRstd, losses         *tensor.Tensor
	dresidual, dln, work                  *tensor.Tensor
	// views of work
	attproj, fcproj   *tensor.Tensor // (N, C), both at offset 0
	logits            *tensor.Tensor // (rows, V)
	datty, dqkv, dfch *tensor.Tensor
	all               []*tensor.Tensor
	f8                *fp8Batch // the FP8 step's buffers for this set (fp8.go), nil until trained under amp.FP8
}

// allocActivations allocates the buffers of activationSpecs, the LM head
// in chunks of rows rows.
func allocActivations(dev device.Device, c Config, p amp.Policy, B, T, rows int, r Recompute) (*activations, error) {
	att := dev.AttentionState(p.DType(amp.Activation), B, T, c.Channels, c.Heads)
	N, C := B*T, c.Channels
	specs := activationSpecs(c, B, T, att, rows, r, p)
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
	a := &activations{B: B, T: T, rows: rows, all: ts}
	dst := []**tensor.Tensor{
		&a.tokens, &a.targets, &a.encoded,
		&a.ln1, &a.ln1Mean, &a.ln1Rstd, &a.qkv, &a.atty, &a.att,
		&a.residual2, &a.ln2, &a.ln2Mean, &a.ln2Rstd,
		&a.fch, &a.fchGelu, &a.residual3,
		&a.lnf, &a.lnfMean, &a.lnfRstd, &a.losses,
		&a.dresidual, &a.dln, &a.work,
	}
	for i := range dst {
		*dst[i] = ts[i]
	}
	a.attproj = a.work.MustView(0, N, C)
	a.fcproj = a.attproj
	a.logits = a.work.MustView(0, rows, c.Vocab)
	a.datty = a.work.MustView(0, N, C)
	a.dqkv = a.work.MustView(N*C, N, 3*C)
	a.dfch = a.work.MustView(4*N*C, N, 4*C)
	return a, nil
}

func (a *activations) free(dev device.Device) {
	for _, t := range a.all {
		dev.Free(t)
	}
	if a.f8 != nil {
		a.f8.free(dev)
		a.f8 = nil
	}
}

// layer returns the per-layer slice l of a (L, ...) activation, or the one
// slice of a (1, ...) activation that recomputation reuses for every layer.
func layer(t *tensor.Tensor, l int) *tensor.Tensor {
	if t.Shape[0] == 1 {
		l = 0
	}
	n := t.Numel() / t.Shape[0]
	return t.MustView(l*n, t.Shape[1:]...)
}

// rowsOf returns rows [r, r+n) of a (N, ...) tensor (or of an (N) one).
func rowsOf(t *tensor.Tensor, r, n int) *tensor.Tensor {
	w := t.Numel() / t.Shape[0]
	if len(t.Shape) == 1 {
		return t.MustView(r, n)
	}
	return t.MustView(r*w, append([]int{n}, t.Shape[1:]...)...)
}
