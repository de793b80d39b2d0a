package gpt

import (
	"fmt"
	"math"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// ensure makes the activations for (B, T) current, allocating them on first
// use. Up to two sets are kept (training, and sampling or eval at another
// size), so alternating between them allocates nothing.
func (m *Model) ensure(B, T int) error {
	if B < 1 || T < 1 {
		return fmt.Errorf("gpt: batch %d and sequence %d must be positive", B, T)
	}
	if T > m.Config.MaxSeq {
		return fmt.Errorf("gpt: sequence length %d exceeds the model's maximum %d (use a sequence length <= %d)", T, m.Config.MaxSeq, m.Config.MaxSeq)
	}
	for _, a := range m.cache {
		if a.B == B && a.T == T {
			m.acts = a
			return nil
		}
	}
	rows := HeadRows(m.Config.Vocab, B*T, m.Policy.DType(amp.Activation), m.dev.Fused())
	if m.headRows > 0 {
		rows = min(m.headRows, B*T)
	}
	a, err := allocActivations(m.dev, m.Config, m.Policy, B, T, rows, m.recompute)
	if err != nil {
		return err
	}
	if len(m.cache) == 2 { // evict the older set
		m.cache[0].free(m.dev)
		m.cache = m.cache[1:]
	}
	m.cache = append(m.cache, a)
	m.acts = a
	return nil
}

// Forward runs the model on inputs (B·T token ids, row-major (B,T)). With
// targets it also returns the mean cross-entropy loss; with targets nil it
// stops at the final layernorm and returns 0. Logits and LogitsAt then
// compute the logits from its output on demand.
func (m *Model) Forward(inputs, targets []int32, B, T int) (float32, error) {
	return m.forward(inputs, targets, B, T, 0)
}

// Gradients runs forward and backward on one batch and accumulates into the
// gradient buffer the gradient of lossScale × mean loss (call ZeroGrad first
// unless accumulating micro-batches; lossScale is the GradScaler's scale, 1
// without scaling, and must not be 0). It returns the mean loss. The LM
// head runs in chunks of rows (HeadRows): the fused classifier computes a
// chunk's losses and gradient in one pass, and the gradient goes at once
// into the input gradient and wte's, so the logits are not kept.
func (m *Model) Gradients(inputs, targets []int32, B, T int, lossScale float32) (float32, error) {
	return m.GradientsMicro(inputs, targets, B, T, lossScale, 1)
}

// GradientsMicro is Gradients on one of micro equal micro-batches of a
// step (gradient accumulation): it accumulates the gradient of lossScale ×
// mean loss / micro, so that the micro-batches of a step, accumulated into
// one zeroed gradient buffer, give the gradient of lossScale × the mean
// loss over all their tokens, as one batch of micro·B sequences would
// (the loss scaled once, by lossScale/(micro·B·T)). It returns the
// micro-batch's own mean loss.
func (m *Model) GradientsMicro(inputs, targets []int32, B, T int, lossScale float32, micro int) (float32, error) {
	if micro < 1 {
		return 0, fmt.Errorf("gpt: %d micro-batches, want at least 1", micro)
	}
	if targets == nil {
		return 0, fmt.Errorf("gpt: Gradients needs targets")
	}
	if m.grads == nil {
		return 0, errInference
	}
	if lossScale == 0 || math.IsNaN(float64(lossScale)) || math.IsInf(float64(lossScale), 0) {
		return 0, fmt.Errorf("gpt: Gradients: loss scale %v must be finite and nonzero", lossScale)
	}
	if err := m.SetBatch(inputs, targets, B, T); err != nil {
		return 0, err
	}
	if m.trainsFP8() {
		if err := m.prepareFP8(); err != nil {
			return 0, err
		}
	}
	m.run(B, T, true, lossScale/float32(micro*B*T), nil)
	m.backward()
	// One host synchronisation per step, after backward: the losses of the
	// fused classifier are read only now, so a GPU runs forward and
	// backward without a stall between them.
	return m.meanLoss()
}

func (m *Model) forward(inputs, targets []int32, B, T int, dscale float32) (float32, error) {
	if err := m.SetBatch(inputs, targets, B, T); err != nil {
		return 0, err
	}
	m.run(B, T, targets != nil, dscale, nil)
	if targets == nil {
		return 0, m.dev.Sync()
	}
	if dscale != 0 {
		return 0, nil // Gradients reads the losses after backward
	}
	return m.meanLoss()
}

// SetBatch checks inputs and targets (B·T token ids each, row-major (B,T);
// targets may be nil) and queues their upload into the activation buffers
// of (B, T), allocating them on first use.
func (m *Model) SetBatch(inputs, targets []int32, B, T int) error {
	if err := m.ensure(B, T); err != nil {
		return err
	}
	N := B * T
	if len(inputs) != N || (targets != nil && len(targets) != N) {
		return fmt.Errorf("gpt: %d inputs and %d targets for B %d x T %d: %w", len(inputs), len(targets), B, T, tensor.ErrShape)
	}
	V := int32(m.Config.Vocab)
	for i, tok := range inputs {
		if tok < 0 || tok >= V {
			return fmt.Errorf("gpt: input token %d at %d outside the vocabulary [0,%d)", tok, i, V)
		}
	}
	for i, tok := range targets {
		if tok < 0 || tok >= V {
			return fmt.Errorf("gpt: target token %d at %d outside the vocabulary [0,%d)", tok, i, V)
		}
	}
	// The FP8 step's buffers are made here, outside any graph capture,
	// when the step can run at this size (else Gradients says why).
	if m.trainsFP8() && m.fp8Refusal() == nil {
		if err := m.ensureFP8(); err != nil {
			return err
		}
	}
	host, _ := tensor.FromI32(inputs, N)
	m.dev.Upload(m.acts.tokens, host)
	if targets != nil {
		host, _ = tensor.FromI32(targets, N)
		m.dev.Upload(m.acts.targets, host)
	}
	return nil
}

// run queues the forward pass over the batch of SetBatch and, with
// targets, the LM head and the fused classifier (head): losses, and with
// dscale != 0 the gradient of the head, dscale multiplied on the device by
// the loss scale in state when state is not nil (device.Stepper). It
// neither uploads nor waits.
func (m *Model) run(B, T int, targets bool, dscale float32, state *tensor.Tensor) {
	d, a, p := m.dev, m.acts, m.wp
	N := B * T
	C, NH, L := m.Config.Channels, m.Config.Heads, m.Config.Layers
	if dscale != 0 && m.fp8 != nil && a.f8 != nil {
		m.runFP8(B, T)
		m.B, m.T = B, T
		m.logitsOf = nil
		if targets {
			m.head(N, dscale, state)
		}
		return
	}

	d.Encoder(a.encoded, p.wte, p.wpe, a.tokens, B, T, C)
	d.LayerNorm(layer(a.ln1, 0), layer(a.ln1Mean, 0), layer(a.ln1Rstd, 0), a.encoded, p.layers[0].ln1w, p.layers[0].ln1b, N, C)
	for l := 0; l < L; l++ {
		w := p.layers[l]
		residual := a.encoded
		if l > 0 {
			residual = layer(a.residual3, l-1)
		}
		ln1, qkv, atty, att := layer(a.ln1, l), layer(a.qkv, l), layer(a.atty, l), layer(a.att, l)
		// attproj and fcproj are one (N, C) buffer for every layer: each is
		// read only by the residual add after it (activationSpecs).
		attproj, residual2 := a.attproj, layer(a.residual2, l)
		ln2, fch, fchGelu, fcproj := layer(a.ln2, l), layer(a.fch, l), layer(a.fchGelu, l), a.fcproj

		d.Matmul(qkv, nil, ln1, w.qkvw, w.qkvb, N, C, 3*C, device.None)
		d.Attention(atty, att, qkv, B, T, C, NH)
		d.Matmul(attproj, nil, atty, w.attprojw, w.attprojb, N, C, C, device.None)
		d.ResidualLayerNorm(residual2, ln2, layer(a.ln2Mean, l), layer(a.ln2Rstd, l), residual, attproj, w.ln2w, w.ln2b, N, C)
		d.Matmul(fchGelu, fch, ln2, w.fcw, w.fcb, N, C, 4*C, device.GELU)
		d.Matmul(fcproj, nil, fchGelu, w.fcprojw, w.fcprojb, N, 4*C, C, device.None)
		// The residual add of this block is fused with the layernorm that
		// reads it: the next block's ln_1, or ln_f after the last block.
		if l+1 < L {
			nw := p.layers[l+1]
			d.ResidualLayerNorm(layer(a.residual3, l), layer(a.ln1, l+1), layer(a.ln1Mean, l+1), layer(a.ln1Rstd, l+1), residual2, fcproj, nw.ln1w, nw.ln1b, N, C)
		} else {
			d.ResidualLayerNorm(layer(a.residual3, l), a.lnf, a.lnfMean, a.lnfRstd, residual2, fcproj, p.lnfw, p.lnfb, N, C)
		}
	}
	m.B, m.T = B, T
	m.logitsOf = nil
	if dscale == 0 {
		m.logitsOf = a // Logits may compute them from lnf
	}
	if targets {
		m.head(N, dscale, state)
	}
}

// head queues the LM head and the fused classifier over the N rows of lnf
// in chunks of a.rows rows (HeadRows), so that the (N, V) logits never
// exist: per chunk, the logits into the chunk buffer, then the classifier
// (the chunk's losses, and with dscale != 0 the gradient
// (softmax - onehot)·dscale written over the chunk's logits in the same
// pass), and with the gradient at once dln[chunk] = dlogits·wte (stored)
// and dwte += dlogitsᵀ·lnf[chunk]; under amp.FP8Recipe.Head the logits
// and dln come from FP8 products (headLogitsFP8, headGradFP8). Every chunk
// uses the same buffers, so a graph captures it like any other op.
func (m *Model) head(N int, dscale float32, state *tensor.Tensor) {
	d, a, p, g := m.dev, m.acts, m.wp, m.gp
	C, V := m.Config.Channels, m.Config.Vocab
	for r := 0; r < N; r += a.rows {
		n := min(a.rows, N-r)
		logits, x := rowsOf(a.logits, 0, n), rowsOf(a.lnf, r, n)
		losses, targets := rowsOf(a.losses, r, n), rowsOf(a.targets, r, n)
		if dscale != 0 && m.headLogitsFP8(logits, r, n) {
			m.headGradFP8(losses, logits, targets, x, state, r, n, dscale)
			continue
		}
		d.Matmul(logits, nil, x, p.wte, nil, n, C, V, device.None)
		if state != nil {
			d.(device.Stepper).CrossEntropyScaled(losses, logits, targets, state, n, V, dscale)
		} else {
			d.CrossEntropy(losses, logits, targets, n, V, dscale)
		}
		if dscale != 0 { // each chunk's rows of dln stored once (zeroed first where the device cannot store)
			m.matmulBackwardStore(rowsOf(a.dln, r, n), g.wte, nil, logits, x, p.wte, n, C, V)
		}
	}
}

// meanLoss downloads the per-token losses of the last forward and returns
// their mean (summed in float64); it synchronises with the device and
// returns the first error of the queued work.
func (m *Model) meanLoss() (float32, error) {
	a := m.acts
	host := tensor.New(tensor.F32, a.losses.Numel())
	m.dev.Download(host, a.losses)
	if err := m.dev.Sync(); err != nil {
		return 0, err
	}
	var sum float64
	for _, v := range host.F32() {
		sum += float64(v)
	}
	return float32(sum / float64(len(host.F32()))), nil
}

// Logits returns the logits of the last Forward as (B, T, V) fp32 values
// (rounded to the policy's storage type). They are computed now, chunk by
// chunk, from the final layernorm's output that Forward kept and the
// current weights: on the device no more than one chunk exists at a time.
func (m *Model) Logits() ([]float32, error) {
	a, err := m.logitsSet()
	if err != nil {
		return nil, err
	}
	N, V := a.B*a.T, m.Config.Vocab
	out := make([]float32, N*V)
	for r := 0; r < N; r += a.rows {
		n := min(a.rows, N-r)
		logits := rowsOf(a.logits, 0, n)
		m.dev.Matmul(logits, nil, rowsOf(a.lnf, r, n), m.wp.wte, nil, n, m.Config.Channels, V, device.None)
		if err := m.fetch(out[r*V:(r+n)*V], logits); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// LogitsAt returns the logits of the given rows of the last Forward (row
// b·T + t is sequence b at position t), V fp32 values per row in the order
// given. Like Logits they are computed now, but only for these rows:
// sampling, which needs the last position, makes no (B·T, V) buffer.
func (m *Model) LogitsAt(rows ...int) ([]float32, error) {
	a, err := m.logitsSet()
	if err != nil {
		return nil, err
	}
	N, V, C := a.B*a.T, m.Config.Vocab, m.Config.Channels
	for _, r := range rows {
		if r < 0 || r >= N {
			return nil, fmt.Errorf("gpt: LogitsAt row %d outside the last Forward's %d rows (B %d x T %d)", r, N, a.B, a.T)
		}
	}
	out := make([]float32, len(rows)*V)
	for i := 0; i < len(rows); i += a.rows {
		n := min(a.rows, len(rows)-i)
		for j, r := range rows[i : i+n] {
			m.dev.Matmul(rowsOf(a.logits, j, 1), nil, rowsOf(a.lnf, r, 1), m.wp.wte, nil, 1, C, V, device.None)
		}
		if err := m.fetch(out[i*V:(i+n)*V], rowsOf(a.logits, 0, n)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// logitsSet returns the activations of the last Forward while Logits may
// read them: no Gradients ran since, and no SetBatch of another size.
func (m *Model) logitsSet() (*activations, error) {
	if m.acts == nil || m.logitsOf != m.acts {
		return nil, fmt.Errorf("gpt: no Forward has run since the last Gradients or SetBatch of another size")
	}
	return m.acts, nil
}

// fetch downloads t into dst as fp32 values, waiting for the device.
func (m *Model) fetch(dst []float32, t *tensor.Tensor) error {
	host := tensor.New(t.DType, t.Shape...)
	m.dev.Download(host, t)
	if err := m.dev.Sync(); err != nil {
		return err
	}
	copy(dst, host.ToF32())
	return nil
}
