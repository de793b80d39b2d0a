package gpt

// fp8.go: the training step under amp.FP8 (issue 38). The four linear
// layers of every block (amp.FP8GEMMs) run as FP8 GEMMs, forward and
// backward, and with amp.FP8Recipe.Head the LM head's forward product and
// its input gradient (dx) and weight gradient too; attention, layernorm's
// backward, the softmax and the optimizer stay as under BF16.
// Every FP8 operand comes out of the op that produces it, cast with its
// transposed copy (where a GEMM reads one) and its amax (device.FP8):
//
//	forward   ln_1, ln_2       LayerNormFP8 / ResidualLayerNormFP8 → x of qkv, fc
//	          attention out    CastTransposeFP8                   → x of attn proj
//	          fc pre-act       GELUCastTransposeFP8               → x of fc proj
//	          weights          AdamWStateFP8 (the optimizer)      → W, Wᵀ (FP8Weights; else CastTransposeFP8 as a step begins)
//	          ln_f, wte (Head) CastTransposeFP8                   → x and w of the logits (ln_f's ᵀ a chunk's block)
//	backward  residual grads   LayerNormBackwardCastFP8 (e5m2)    → dy, dyᵀ, dbias of attn proj, fc proj
//	          qkv output grad  CastTransposeDBiasFP8 (e5m2)       → dy, dyᵀ, dbias
//	          fc output grad   DGELUCastTransposeDBiasFP8 (e5m2)  → dy·gelu'(pre), its ᵀ, dbias
//	          dlogits (Head)   CrossEntropyFP8 (e5m2)             → dy of the head's dx
//	                           then TransposeFP8                  → dyᵀ of its dW (unless HeadDWEnv=bf16)
//	          dx = dy·W        MatmulFP8 with Wᵀ
//	          dW += dyᵀ·x      MatmulFP8Add with dyᵀ and xᵀ (K = tokens)
//
// A step begins at ZeroGrad: FP8ScaleUpdate turns the amaxes the last step
// added into this step's scales (delayed scaling, amp.FP8Recipe), then the
// weights are cast with them; so every cast of a step and the inverse
// scales its GEMMs read belong to one update, and the whole step stays
// one CUDA graph. Where the trainer passes FP8Weights to the optimizer
// (the device-resident step), the weights' scales are updated just before
// it instead, and it writes their FP8 copies as it updates them
// (device.FP8's AdamWStateFP8): the same scales and copies, bit for bit,
// without a cast pass. Evaluation and generation read the bf16 working
// copy.

import (
	"fmt"
	"os"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// The FP8 tensors of one block, in their order in the scaling state: for
// each linear layer its input (x), its weight (w) and its output gradient
// (dy).
const (
	f8QKVx = iota
	f8QKVw
	f8QKVdy
	f8Projx
	f8Projw
	f8Projdy
	f8FCx
	f8FCw
	f8FCdy
	f8FCProjx
	f8FCProjw
	f8FCProjdy
	f8PerLayer
)

// The LM head's FP8 tensors follow the blocks' (tensor L·f8PerLayer + i):
// ln_f's output and wte, the operands of the logits, and the logits'
// gradient (e5m2), the operand of the head's dx = dlogits·wte, under
// amp.FP8Recipe.Head. Their records exist under every recipe, so that a
// state's size depends on the model alone. f8HeadDy came last: a state
// saved before it (f8HeadOld head records) is extended with a fresh
// record when restored (SetFP8Scales).
const (
	f8HeadX = iota
	f8HeadW
	f8HeadDy
	f8Head
	f8HeadOld = f8HeadDy
)

// fp8Tensors returns the FP8 tensors of a model of L blocks.
func fp8Tensors(L int) int { return L*f8PerLayer + f8Head }

// f8Stride spaces the tensors' records in the scaling state: tensor k is
// record k·f8Stride, and the records between are unused (amax 0, scale 1),
// so that every scale and inverse sits on a 16-byte boundary: cuBLASLt's
// FP8 GEMMs refuse scales at other addresses (CUBLAS_STATUS_NOT_SUPPORTED;
// gpu.MatmulFP8 checks it).
const f8Stride = 4

// fp8Pair is an FP8 tensor and its transpose.
type fp8Pair struct{ q, qt *tensor.Tensor }

// fp8State is a model's FP8 state: the scaling state on the device and
// the weights' FP8 copies.
type fp8State struct {
	ops          device.FP8
	K, H, margin int
	st, meta     *tensor.Tensor // amp.FP8Scales.St and .Meta on the device
	w            [][4]fp8Pair   // [layer][qkv, attn proj, fc, fc proj]
	wte          fp8Pair        // wte (V, C) and its (C, V) transpose under Recipe.Head, else empty
	begun        bool           // a step has begun: the weights are cast
	// optCast: the optimizer writes the weights' FP8 copies (FP8Weights
	// was called), so a step begins with the update of the other records
	// (rest) alone; weights lists the weights' records, which FP8Weights
	// updates just before the optimizer casts them.
	optCast       bool
	weights, rest *tensor.Tensor     // I32 record lists on the device
	wlist         []device.FP8Weight // FP8Weights' list, once built
	// current: current scaling (amp.FP8Recipe.Current): each FP8
	// tensor's producer runs twice, first for its amax, then, after its
	// record's update (every, the K record indices, one a view), with
	// the scale that amax gives (with micro-steps, the largest amax of
	// the step's so far); dbias takes the first run's column sums of the
	// output gradients' casts, which add theirs into dbias.
	current      bool
	every, dbias *tensor.Tensor
	// restored: the state came from SetFP8Scales under delayed scaling;
	// its first step casts the weights with the scales it holds.
	restored bool
	owned
}

// fp8Batch is one activation set's FP8 buffers: the saved FP8 inputs of
// the blocks' GEMMs and one output gradient's scratch.
type fp8Batch struct {
	x  [][4]fp8Pair // [layer][ln_1, attention out, ln_2, gelu]
	dy fp8Pair      // (N, 4C): the widest output gradient
	// lnf is ln_f's output (N, C) under Recipe.Head, else empty; its
	// transpose is in the LM head's chunks: chunk r..r+n's (C, n) at
	// element r·C (castLnf), the K-major operand of that chunk's dW.
	lnf fp8Pair
	// dlogits is the logits' gradient in e5m2 (rows, V) under
	// Recipe.Head: one chunk's, reused by every chunk as the logits are;
	// dlogitsT its transpose (V, rows) where the head's weight gradient
	// runs in FP8 (headDWFP8), else nil.
	dlogits, dlogitsT *tensor.Tensor
	owned
}

// owned is the device tensors a holder allocated and frees.
type owned []*tensor.Tensor

// SetFP8Recipe sets how the FP8 scales are chosen (amp.DefaultFP8Recipe
// unless set) and resets the scaling state, a restore SetFP8Scales left
// pending included (it belonged to the old recipe). Under current scaling
// (amp.FP8Recipe.Current) every FP8 producer runs twice, the first time
// for the tensor's amax (fp8State.produce): it costs a pass over each
// FP8 tensor, which delayed scaling, the default, saves. It is an error
// unless the model trains under amp.FP8.
func (m *Model) SetFP8Recipe(r amp.FP8Recipe) error {
	if m.Policy != amp.FP8 {
		return fmt.Errorf("gpt: an FP8 recipe for a model under %s (train with --amp fp8)", m.Policy)
	}
	if err := r.Validate(); err != nil {
		return err
	}
	if m.fp8 != nil {
		m.fp8.free(m.dev)
		m.fp8 = nil
	}
	m.fp8Recipe, m.fp8Restore = &r, nil
	return nil
}

// FP8Scales downloads the FP8 scaling state, nil before the first FP8
// step: each tensor's scale, inverse, amax history and count of
// non-finite amaxes (overflow events), in the order of the blocks and,
// within one, qkv, attn proj, fc, fc proj, each with its x, w and dy,
// then the LM head's x, w and dy; tensor k is record k·4 (FP8Record), the
// three after it unused.
func (m *Model) FP8Scales() (*amp.FP8Scales, error) {
	f := m.fp8
	if f == nil {
		return nil, nil
	}
	st, meta := tensor.New(tensor.F32, f.st.Numel()), tensor.New(tensor.I32, f.meta.Numel())
	m.dev.Download(st, f.st)
	m.dev.Download(meta, f.meta)
	if err := m.dev.Sync(); err != nil {
		return nil, err
	}
	return &amp.FP8Scales{K: f.K, H: f.H, Margin: f.margin, St: st.F32(), Meta: meta.I32()}, nil
}

// FP8Underflows returns the values the FP8 casts of the last step (all
// its micro-steps, the weights' casts included) flushed to zero, summed
// over the tensors but the logits' gradient (FP8LogitGradUnderflows),
// and how many values those casts took, so that the share can be read;
// 0, 0 before the first FP8 step. accum is the micro-steps the step ran.
// It synchronises with the device.
func (m *Model) FP8Underflows(accum int) (under, values int64, err error) {
	return m.fp8Underflows(accum, false)
}

// FP8LogitGradUnderflows is FP8Underflows of the logits' gradient alone
// (the LM head's dx in FP8, amp.FP8Recipe.Head; 0, 0 without it). It is
// counted apart because most of it flushes by design: a row's gradient
// is its softmax (less one at the target) times 1/(B·T), and E5M2 spans
// about 2^32 below the row's largest value, so the probabilities of the
// unlikely tokens, a large share of a trained model's vocabulary, become
// 0; what they would have added to dx is under 2^-32 of the largest
// term each, V·2^-32 (about 1e-5) of it in all.
func (m *Model) FP8LogitGradUnderflows(accum int) (under, values int64, err error) {
	return m.fp8Underflows(accum, true)
}

// fp8Underflows sums the pending underflows and the values cast of the
// logits' gradient (logits) or of every other tensor.
func (m *Model) fp8Underflows(accum int, logits bool) (under, values int64, err error) {
	s, err := m.FP8Scales()
	if err != nil || s == nil {
		return 0, 0, err
	}
	dy := m.Config.Layers*f8PerLayer + f8HeadDy
	for k := range fp8Tensors(m.Config.Layers) {
		if (k == dy) != logits {
			continue
		}
		under += int64(s.PendingUnder(FP8Record(k)))
		values += m.fp8Values(k, accum)
	}
	return under, values, nil
}

// fp8Values returns how many values the casts of FP8 tensor k take in a
// step of accum micro-steps: a block's inputs and output gradients every
// micro-step (B·T rows of the layer's width), its weights once; the LM
// head's three only under amp.FP8Recipe.Head (ln_f's output and the
// logits' gradient every micro-step, wte once).
func (m *Model) fp8Values(k, accum int) int64 {
	N, C, V := int64(m.acts.B*m.acts.T), int64(m.Config.Channels), int64(m.Config.Vocab)
	a := int64(max(accum, 1))
	if h := k - m.Config.Layers*f8PerLayer; h >= 0 {
		switch {
		case !m.fp8Head():
			return 0
		case h == f8HeadX:
			return a * N * C
		case h == f8HeadDy:
			return a * N * V
		default:
			return V * C
		}
	}
	// Each linear layer's input and output widths.
	in, out := [4]int64{C, C, C, 4 * C}, [4]int64{3 * C, C, 4 * C, C}
	i, what := k%f8PerLayer/3, k%3 // qkv, attn proj, fc, fc proj; x, w, dy
	switch what {
	case 0:
		return a * N * in[i]
	case 1:
		return in[i] * out[i]
	default:
		return a * N * out[i]
	}
}

// FP8Record returns the record of the scaling state (FP8Scales) that
// holds FP8 tensor k: block k/12, within it qkv, attn proj, fc, fc proj,
// each with its x, w and dy; after the blocks the LM head's x, w and dy.
func FP8Record(k int) int { return k * f8Stride }

// fp8Formats returns the formats of the scaling state's records for L
// blocks (an unused record has its tensor's format).
func fp8Formats(L int) []tensor.FP8Format { return fp8FormatsOf(L, f8Head) }

// fp8FormatsOf is fp8Formats with only the first head of the LM head's
// tensors: f8Head, or f8HeadOld for a state saved before f8HeadDy.
func fp8FormatsOf(L, head int) []tensor.FP8Format {
	fs := make([]tensor.FP8Format, 0, (L*f8PerLayer+head)*f8Stride)
	add := func(f tensor.FP8Format) {
		for range f8Stride {
			fs = append(fs, f)
		}
	}
	for range L * 4 {
		for _, f := range []tensor.FP8Format{tensor.E4M3, tensor.E4M3, tensor.E5M2} {
			add(f)
		}
	}
	for _, f := range []tensor.FP8Format{tensor.E4M3, tensor.E4M3, tensor.E5M2}[:head] { // x, w, dy
		add(f)
	}
	return fs
}

// fp8Head reports whether the LM head's forward product and input
// gradient run in FP8 (amp.FP8Recipe.Head).
func (m *Model) fp8Head() bool { return m.fp8Recipe != nil && m.fp8Recipe.Head }

// trainsFP8 reports whether the model's gradients run the FP8 step.
func (m *Model) trainsFP8() bool { return m.Policy == amp.FP8 && m.grads != nil }

// fp8Refusal returns why the FP8 step cannot run for the current
// activations, nil when it can: a device without FP8 ops, recomputation,
// sizes whose FP8 GEMMs cuBLASLt cannot take, or with the FP8 head a
// HeadDWEnv value HeadDWFromEnv refuses.
func (m *Model) fp8Refusal() error {
	C, N := m.Config.Channels, m.acts.B*m.acts.T
	switch _, ok := m.dev.(device.FP8); {
	case !ok:
		return fmt.Errorf("gpt: %s has no FP8 operations: %w", m.dev.Name(), device.ErrUnsupported)
	case m.recompute != RecomputeNone:
		return fmt.Errorf("gpt: --amp fp8 trains without recomputation for now (use --recompute none)")
	case C%16 != 0 || N%16 != 0:
		return fmt.Errorf("gpt: --amp fp8 needs channels (%d) and batch × sequence (%d) that are multiples of 16 (FP8 GEMMs take 16-byte rows)", C, N)
	case m.fp8Head() && m.Config.Vocab%16 != 0:
		return fmt.Errorf("gpt: the LM head in fp8 needs a vocabulary that is a multiple of 16 (its input gradient's FP8 GEMM reads rows of V bytes; this one has %d: pad it, or leave --fp8-head off)", m.Config.Vocab)
	}
	if m.fp8Head() {
		if _, err := HeadDWFromEnv(); err != nil {
			return err
		}
	}
	return nil
}

// ensureFP8 makes the FP8 state and the current activation set's FP8
// buffers exist, or returns fp8Refusal's reason. A new state begins the
// step that a ZeroGrad before it began (fp8Pending); prepareFP8 begins one
// that no ZeroGrad began.
func (m *Model) ensureFP8() error {
	if err := m.fp8Refusal(); err != nil {
		return err
	}
	C, L := m.Config.Channels, m.Config.Layers
	if m.fp8 == nil {
		r := amp.DefaultFP8Recipe()
		if m.fp8Recipe != nil {
			r = *m.fp8Recipe
		}
		s, err := amp.NewFP8Scales(fp8Formats(L), r)
		if err != nil {
			return err
		}
		restored := m.fp8Restore != nil && s.H > 0
		if m.fp8Restore != nil {
			s, m.fp8Restore = m.fp8Restore, nil
		}
		if restored {
			// A state saved after a step holds the weights' scales that the
			// step's optimizer cast their next copies with, and those
			// copies' amaxes pending (FP8Weights): the copies are made again
			// with the same scales as the step begins (beginFP8Step), and
			// their amaxes add up to the same pending values from zero.
			ws, _ := fp8WeightRecords(L, m.fp8Head(), s.K)
			for _, k := range ws {
				s.St[2*k], s.St[2*k+1] = 0, 0
			}
		}
		m.seedHeadDy(s)
		f := &fp8State{ops: m.dev.(device.FP8), K: s.K, H: s.H, margin: s.Margin, current: s.H == 0, restored: restored}
		if err := f.alloc(m.dev, s, C, L, m.Config.Vocab, m.fp8Head()); err != nil {
			f.free(m.dev)
			return err
		}
		m.fp8 = f
		if m.fp8Pending { // ZeroGrad began this step before the state existed
			m.fp8Pending = false
			m.beginFP8Step()
		}
	}
	if m.acts.f8 == nil {
		b := &fp8Batch{}
		if err := b.alloc(m.dev, m.acts.B*m.acts.T, C, L); err != nil {
			b.free(m.dev)
			return err
		}
		m.acts.f8 = b
	}
	if b := m.acts.f8; m.fp8Head() && b.lnf.q == nil {
		var err error
		if b.lnf, err = b.pair(m.dev, tensor.F8E4M3, m.acts.B*m.acts.T, C); err != nil {
			return err
		}
		if b.dlogits, err = b.new(m.dev, tensor.F8E5M2, m.acts.rows, m.Config.Vocab); err != nil {
			return err
		}
		if m.headDWFP8() {
			if b.dlogitsT, err = b.new(m.dev, tensor.F8E5M2, m.Config.Vocab, m.acts.rows); err != nil {
				return err
			}
		}
	}
	return nil
}

// HeadDWEnv names the environment variable that picks the LM head's
// weight gradient under amp.FP8Recipe.Head: unset or "fp8" (the default)
// an FP8 GEMM (headDWFP8), "bf16" the bf16 product of the bf16 gradient
// over the logits, which the classifier then also writes; any other value
// is an error (HeadDWFromEnv). FP8 is the default since a 2,000-step loss
// curve showed that the gradients the e5m2 cast flushes (the unlikely
// tokens', which the tied embedding also gets) keep the final loss within
// the FP8 step's target of bf16's (the curve is in
// bench/results/h100/2026-12-06-s47, the step times in
// bench/results/h100/2026-12-06-s46).
const HeadDWEnv = "DRUTO_FP8_HEAD_DW"

// HeadDWFromEnv reads HeadDWEnv: whether the LM head's weight gradient
// runs in FP8 under amp.FP8Recipe.Head (unset or "fp8") or in bf16
// ("bf16"), and an error naming the variable for any other value (fp8
// then false). The FP8 step refuses to run with such a value
// (fp8Refusal), and cmd/druto checks it before training.
func HeadDWFromEnv() (fp8 bool, err error) {
	switch v := os.Getenv(HeadDWEnv); v {
	case "", "fp8":
		return true, nil
	case "bf16":
		return false, nil
	default:
		return false, fmt.Errorf("gpt: %s=%q: want fp8 (the default) or bf16 (the LM head's weight gradient under --fp8-head) or unset", HeadDWEnv, v)
	}
}

// headDWFP8 reports whether the LM head's weight gradient runs as an FP8
// GEMM (amp.FP8Recipe.Head, and HeadDWEnv unset or fp8): dwte +=
// dlogitsᵀ·lnf with K = a chunk's rows, from the transpose of the
// classifier's e5m2 gradient and ln_f's transposed e4m3 output. It needs
// chunks of a multiple of 16 rows (the operands' rows are K bytes; the
// batch's rows are, fp8Refusal); other chunks keep the bf16 product.
func (m *Model) headDWFP8() bool { return m.fp8Head() && m.acts != nil && headDWOn(m.acts.rows) }

// headDWOn reports whether HeadDWEnv leaves the weight gradient in FP8
// (false for a value HeadDWFromEnv refuses) and the head's chunks of rows
// rows allow it.
func headDWOn(rows int) bool {
	fp8, _ := HeadDWFromEnv()
	return fp8 && rows%16 == 0
}

// seedHeadDy sets the first scale of the logits' gradient (f8HeadDy) in
// s, while no amax has reached its record (its history empty), from the
// bound the softmax gives it: |g| = |p - onehot|·dscale ≤ dscale =
// 1/(B·T) for one micro-step at the loss scale 1 that the FP8 step trains
// at (amp.FP8 has no loss scaler). Delayed scaling would otherwise cast
// the first step's gradient with the scale 1, which flushes all but its
// largest values (p·dscale of a token of probability 1/V is far below
// e5m2's smallest subnormal, 2^-16); the blocks' output gradients, which
// have no such bound, start at 1. With k micro-steps the seed is k times
// smaller than their amax allows; from the first update on the scale
// follows the recorded amaxes. A state under another recipe than Head is
// left as it is.
func (m *Model) seedHeadDy(s *amp.FP8Scales) {
	k := FP8Record(m.Config.Layers*f8PerLayer + f8HeadDy)
	if !m.fp8Head() || m.acts == nil || s.Meta[k*amp.FP8MetaLen+amp.FP8MetaFilled] != 0 {
		return
	}
	sc, _ := amp.FP8ScaleFor(tensor.E5M2, 1/float32(m.acts.B*m.acts.T), s.Margin, 1)
	s.St[2*s.K+k], s.St[3*s.K+k] = sc, 1/sc
}

// alloc allocates the scaling state (uploaded from s) and the weights'
// FP8 copies, wte's (V, C) with head.
func (f *fp8State) alloc(dev device.Device, s *amp.FP8Scales, C, L, V int, head bool) error {
	var err error
	if f.st, err = f.new(dev, tensor.F32, len(s.St)); err != nil {
		return err
	}
	if f.meta, err = f.new(dev, tensor.I32, len(s.Meta)); err != nil {
		return err
	}
	st, _ := tensor.FromF32(s.St, len(s.St))
	meta, _ := tensor.FromI32(s.Meta, len(s.Meta))
	dev.Upload(f.st, st)
	dev.Upload(f.meta, meta)
	shapes := [4][2]int{{3 * C, C}, {C, C}, {4 * C, C}, {C, 4 * C}} // (OC, C) of each weight
	f.w = make([][4]fp8Pair, L)
	for l := range f.w {
		for i, sh := range shapes {
			if f.w[l][i], err = f.pair(dev, tensor.F8E4M3, sh[0], sh[1]); err != nil {
				return err
			}
		}
	}
	if head {
		if f.wte, err = f.pair(dev, tensor.F8E4M3, V, C); err != nil {
			return err
		}
	}
	ws, rest := fp8WeightRecords(L, head, s.K)
	every := make([]int32, s.K)
	for k := range every {
		every[k] = int32(k)
	}
	if f.dbias, err = f.new(dev, tensor.F32, 4*C); err != nil {
		return err
	}
	for _, x := range []struct {
		t  **tensor.Tensor
		rs []int32
	}{{&f.weights, ws}, {&f.rest, rest}, {&f.every, every}} {
		if *x.t, err = f.new(dev, tensor.I32, len(x.rs)); err != nil {
			return err
		}
		h, _ := tensor.FromI32(x.rs, len(x.rs))
		dev.Upload(*x.t, h)
	}
	return nil
}

// fp8WeightRecords splits the K records of a scaling state for L blocks
// into those of the weights the optimizer casts (the blocks' four, and
// wte's with head) and the rest.
func fp8WeightRecords(L int, head bool, K int) (weights, rest []int32) {
	w := make(map[int]bool)
	for l := range L {
		for _, i := range []int{f8QKVw, f8Projw, f8FCw, f8FCProjw} {
			w[FP8Record(l*f8PerLayer+i)] = true
		}
	}
	if head {
		w[FP8Record(L*f8PerLayer+f8HeadW)] = true
	}
	for k := range K {
		if w[k] {
			weights = append(weights, int32(k))
		} else {
			rest = append(rest, int32(k))
		}
	}
	return weights, rest
}

// alloc allocates the saved FP8 inputs and the gradient scratch for N
// rows.
func (b *fp8Batch) alloc(dev device.Device, N, C, L int) error {
	b.x = make([][4]fp8Pair, L)
	var err error
	for l := range b.x {
		for i, w := range [4]int{C, C, C, 4 * C} {
			if b.x[l][i], err = b.pair(dev, tensor.F8E4M3, N, w); err != nil {
				return err
			}
		}
	}
	b.dy, err = b.pair(dev, tensor.F8E5M2, N, 4*C)
	return err
}

// pair allocates an (R, W) FP8 tensor and its (W, R) transpose.
func (o *owned) pair(dev device.Device, dt tensor.DType, R, W int) (fp8Pair, error) {
	q, err := o.new(dev, dt, R, W)
	if err != nil {
		return fp8Pair{}, err
	}
	qt, err := o.new(dev, dt, W, R)
	if err != nil {
		return fp8Pair{}, err
	}
	return fp8Pair{q, qt}, nil
}

func (o *owned) new(dev device.Device, dt tensor.DType, shape ...int) (*tensor.Tensor, error) {
	t, err := dev.Alloc(dt, shape...)
	if err != nil {
		return nil, fmt.Errorf("gpt: FP8 buffers: %w", err)
	}
	*o = append(*o, t)
	return t, nil
}

func (o *owned) free(dev device.Device) {
	for _, t := range *o {
		dev.Free(t)
	}
	*o = nil
}

// dims returns the (n, w) head of an FP8 tensor and the (w, n) head of
// its transpose: the gradient scratch serves every layer width.
func (p fp8Pair) dims(n, w int) fp8Pair {
	return fp8Pair{p.q.MustView(0, n, w), p.qt.MustView(0, w, n)}
}

// scale, inv and amax return views of tensor k's entries in the state.
// (amax: the pair of max |x| and the underflow count, amp.FP8Scales.)
func (f *fp8State) scale(k int) *tensor.Tensor { return f.st.MustView(2*f.K+FP8Record(k), 1) }
func (f *fp8State) inv(k int) *tensor.Tensor   { return f.st.MustView(3*f.K+FP8Record(k), 1) }
func (f *fp8State) amax(k int) *tensor.Tensor  { return f.st.MustView(2*FP8Record(k), 2) }

// cast queues x (N, C) cast into p as tensor k (under current scaling
// with the scale of its own amax: produce).
func (f *fp8State) cast(p fp8Pair, k int, x *tensor.Tensor, N, C int) {
	f.produce(k, func() { f.ops.CastTransposeFP8(p.q, p.qt, f.amax(k), x, f.scale(k), N, C) })
}

// produce queues op, the producer of FP8 tensor k, which adds to k's amax
// and reads its scale. Under delayed scaling it runs once, with the scale
// the history gave. Under current scaling it runs, k's record is updated
// from the amax it added (rescale), and it runs again with that scale:
// the FP8 codes, the amax and the underflows the record keeps are those of
// the tensor's own scale, at the cost of a second pass. op must give the
// same outputs when run twice (its accumulating outputs, if any, go to
// scratch in the first run: the callers see to it).
func (f *fp8State) produce(k int, op func()) {
	if f.current {
		op()
		f.rescale(k)
	}
	op()
}

// rescale queues the update of tensor k's record alone.
func (f *fp8State) rescale(k int) {
	f.ops.FP8ScaleUpdate(f.st, f.meta, f.every.MustView(FP8Record(k), 1), f.K, f.H, f.margin)
}

// beginFP8Step queues the start of an FP8 step: the scales from the amaxes
// the last step added, then the weights' FP8 copies cast with them; or,
// where the optimizer writes the copies (FP8Weights), the update of the
// other tensors' scales alone (the weights' were updated before the
// optimizer cast them); or, first after a restore (restored), that update
// and the weights cast with the scales the state holds.
func (m *Model) beginFP8Step() {
	f := m.fp8
	if f.optCast {
		f.ops.FP8ScaleUpdate(f.st, f.meta, f.rest, f.K, f.H, f.margin)
		return
	}
	if f.restored { // the saved weights' scales are those the step before cast with
		f.restored = false
		f.ops.FP8ScaleUpdate(f.st, f.meta, f.rest, f.K, f.H, f.margin)
		f.begun = true
		m.castWeights()
		return
	}
	// Under current scaling this clears what the last step's casts added,
	// so that each cast's first run adds only its own tensor's amax (with
	// micro-steps, the step's so far); each cast then updates its record.
	f.ops.FP8ScaleUpdate(f.st, f.meta, nil, f.K, f.H, f.margin)
	f.begun = true
	m.castWeights()
}

// castWeights queues the weights' FP8 copies cast with their scales.
func (m *Model) castWeights() {
	f, p := m.fp8, m.wp
	C := m.Config.Channels
	for l, w := range p.layers {
		k := l * f8PerLayer
		f.cast(f.w[l][0], k+f8QKVw, w.qkvw, 3*C, C)
		f.cast(f.w[l][1], k+f8Projw, w.attprojw, C, C)
		f.cast(f.w[l][2], k+f8FCw, w.fcw, 4*C, C)
		f.cast(f.w[l][3], k+f8FCProjw, w.fcprojw, C, 4*C)
	}
	if f.wte.q != nil {
		f.cast(f.wte, len(p.layers)*f8PerLayer+f8HeadW, p.wte, m.Config.Vocab, C)
	}
}

// FP8Weights queues the update of the FP8 weights' scales from the amaxes
// their last casts added, and returns those weights with their FP8 copies
// and scales, for the optimizer step that follows to write the copies as
// it updates them (device.FP8's AdamWStateFP8, optim.AdamW.UpdateState):
// from then on a step begins without casting the weights (beginFP8Step).
// So the copies cost no pass of their own, and each weight is cast with
// the scale its last amax gave, as when the step cast it. It returns nil
// when no FP8 step ran (the model does not train under amp.FP8) and under
// current scaling, whose casts need the weights' own amaxes. Call it
// once a step, after the step's gradients and before the optimizer, and
// pass its result to it every step.
func (m *Model) FP8Weights() []device.FP8Weight {
	f := m.fp8
	if f == nil || !m.trainsFP8() || f.current {
		return nil // current scaling casts each weight with its own amax as the step begins
	}
	f.ops.FP8ScaleUpdate(f.st, f.meta, f.weights, f.K, f.H, f.margin)
	f.optCast = true
	if f.wlist == nil {
		f.wlist = m.fp8WeightList()
	}
	return f.wlist
}

// fp8WeightList lists the FP8 weights for the optimizer (FP8Weights),
// built once: the copies and the state's records stay where they were
// allocated.
func (m *Model) fp8WeightList() []device.FP8Weight {
	f := m.fp8
	L := m.Config.Layers
	names := [4]string{"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"}
	kinds := [4]int{f8QKVw, f8Projw, f8FCw, f8FCProjw}
	w := make([]device.FP8Weight, 0, 4*L+1)
	add := func(name string, p fp8Pair, k int) {
		seg, err := m.layout.Find(name)
		if err != nil {
			panic(err) // the layout names every weight (Config.Layout)
		}
		w = append(w, device.FP8Weight{Offset: seg.Offset, Rows: p.q.Shape[0], Cols: p.q.Shape[1],
			Q: p.q, QT: p.qt, Amax: f.amax(k), Scale: f.scale(k)})
	}
	for l := range L {
		for i := range 4 {
			add(fmt.Sprintf("h.%d.%s", l, names[i]), f.w[l][i], l*f8PerLayer+kinds[i])
		}
	}
	if f.wte.q != nil {
		add("wte", f.wte, L*f8PerLayer+f8HeadW)
	}
	return w
}

// runFP8 is run's block loop under FP8 (forward with targets and a
// gradient to follow): the blocks' GEMMs in FP8 from the saved FP8
// inputs, ending with ln_f (bf16, for the LM head) like run.
func (m *Model) runFP8(B, T int) {
	d, a, p, f := m.dev, m.acts, m.wp, m.fp8
	N := B * T
	C, NH, L := m.Config.Channels, m.Config.Heads, m.Config.Layers
	d.Encoder(a.encoded, p.wte, p.wpe, a.tokens, B, T, C)
	x0 := a.f8.x[0][0]
	f.produce(f8QKVx, func() {
		f.ops.LayerNormFP8(x0.q, x0.qt, f.amax(f8QKVx), layer(a.ln1Mean, 0), layer(a.ln1Rstd, 0), a.encoded, p.layers[0].ln1w, p.layers[0].ln1b, f.scale(f8QKVx), N, C)
	})
	for l := 0; l < L; l++ {
		w, x, k := p.layers[l], a.f8.x[l], l*f8PerLayer
		residual := a.encoded
		if l > 0 {
			residual = layer(a.residual3, l-1)
		}
		qkv, atty, att := layer(a.qkv, l), layer(a.atty, l), layer(a.att, l)
		attproj, residual2, fch, fcproj := a.attproj, layer(a.residual2, l), layer(a.fch, l), a.fcproj

		f.ops.MatmulFP8(qkv, x[0].q, f.w[l][0].q, w.qkvb, f.inv(k+f8QKVx), f.inv(k+f8QKVw), N, C, 3*C)
		d.Attention(atty, att, qkv, B, T, C, NH)
		f.cast(x[1], k+f8Projx, atty, N, C)
		f.ops.MatmulFP8(attproj, x[1].q, f.w[l][1].q, w.attprojb, f.inv(k+f8Projx), f.inv(k+f8Projw), N, C, C)
		f.produce(k+f8FCx, func() {
			f.ops.ResidualLayerNormFP8(residual2, x[2].q, x[2].qt, f.amax(k+f8FCx), layer(a.ln2Mean, l), layer(a.ln2Rstd, l), residual, attproj, w.ln2w, w.ln2b, f.scale(k+f8FCx), N, C)
		})
		f.ops.MatmulFP8(fch, x[2].q, f.w[l][2].q, w.fcb, f.inv(k+f8FCx), f.inv(k+f8FCw), N, C, 4*C)
		f.produce(k+f8FCProjx, func() {
			f.ops.GELUCastTransposeFP8(x[3].q, x[3].qt, f.amax(k+f8FCProjx), fch, f.scale(k+f8FCProjx), N, 4*C)
		})
		f.ops.MatmulFP8(fcproj, x[3].q, f.w[l][3].q, w.fcprojb, f.inv(k+f8FCProjx), f.inv(k+f8FCProjw), N, 4*C, C)
		if l+1 < L {
			nw, nx, nk := p.layers[l+1], a.f8.x[l+1][0], (l+1)*f8PerLayer
			f.produce(nk+f8QKVx, func() {
				f.ops.ResidualLayerNormFP8(layer(a.residual3, l), nx.q, nx.qt, f.amax(nk+f8QKVx), layer(a.ln1Mean, l+1), layer(a.ln1Rstd, l+1), residual2, fcproj, nw.ln1w, nw.ln1b, f.scale(nk+f8QKVx), N, C)
			})
		} else {
			d.ResidualLayerNorm(layer(a.residual3, l), a.lnf, a.lnfMean, a.lnfRstd, residual2, fcproj, p.lnfw, p.lnfb, N, C)
		}
	}
	if f.wte.q != nil { // the logits' x; lnf (bf16) stays for the head's backward
		m.castLnf(N, C)
	}
}

// castLnf queues ln_f's output (N, C) cast into a.f8.lnf (tensor
// f8HeadX) in the LM head's chunks (head): rows r..r+n of q, and their
// transpose as a (C, n) block at element r·C of qt, so that each chunk's
// weight gradient reads its K-major ln_f as one matrix. The codes and the
// amax are those of one cast of the whole (N, C).
func (m *Model) castLnf(N, C int) {
	a, f := m.acts, m.fp8
	k := m.Config.Layers*f8PerLayer + f8HeadX
	f.produce(k, func() { // the chunks are one tensor: one scale
		for r := 0; r < N; r += a.rows {
			n := min(a.rows, N-r)
			p := fp8Pair{rowsOf(a.f8.lnf.q, r, n), a.f8.lnf.qt.MustView(r*C, C, n)}
			f.ops.CastTransposeFP8(p.q, p.qt, f.amax(k), rowsOf(a.lnf, r, n), f.scale(k), n, C)
		}
	})
}

// headLogitsFP8 queues the logits of rows r..r+n of the batch from the
// FP8 copies of ln_f's output and wte (amp.FP8Recipe.Head), or returns
// false when the head runs in bf16. headGradFP8 follows it in the step.
func (m *Model) headLogitsFP8(logits *tensor.Tensor, r, n int) bool {
	f, a := m.fp8, m.acts
	if f == nil || f.wte.q == nil || a.f8 == nil || a.f8.lnf.q == nil {
		return false
	}
	k := m.Config.Layers * f8PerLayer
	f.ops.MatmulFP8(logits, rowsOf(a.f8.lnf.q, r, n), f.wte.q, nil, f.inv(k+f8HeadX), f.inv(k+f8HeadW), n, m.Config.Channels, m.Config.Vocab)
	return true
}

// headGradFP8 queues the classifier and the backward of the LM head's
// chunk of rows r..r+n under amp.FP8Recipe.Head, after headLogitsFP8: the
// losses, and the gradient cast to e5m2 (CrossEntropyFP8, tensor
// f8HeadDy, by rows), with its transpose made by a byte transpose of its
// own (TransposeFP8) where the weight gradient runs in FP8 (headDWFP8,
// the default), and over the logits in bf16 only where it does
// not (the bf16 weight gradient is the one reader of that copy: with both
// products in FP8 the classifier leaves the logits as they were and
// writes no bf16 gradient); then dln[chunk] = dlogits·wte from
// the e5m2 gradient and wte's transposed e4m3 copy (the FP8 GEMM, K = V,
// stored), and dwte += dlogitsᵀ·lnf[chunk], accumulated into the f32
// gradient as the bf16 product accumulates it: the FP8 GEMM of the
// transposed e5m2 gradient and the chunk's block of ln_f's transposed
// e4m3 copy (K = n; castLnf), or with headDWFP8 off the bf16 product of
// the bf16 gradient.
func (m *Model) headGradFP8(losses, logits, targets, x, state *tensor.Tensor, r, n int, dscale float32) {
	f, a, p, g := m.fp8, m.acts, m.wp, m.gp
	C, V := m.Config.Channels, m.Config.Vocab
	k := m.Config.Layers * f8PerLayer
	q := rowsOf(a.f8.dlogits, 0, n)
	var qt *tensor.Tensor
	if a.f8.dlogitsT != nil && m.headDWFP8() {
		qt = a.f8.dlogitsT.MustView(0, V, n)
	}
	if f.current { // the first run leaves the logits as they were (no bf16 gradient over them)
		f.ops.CrossEntropyFP8(losses, logits, q, f.amax(k+f8HeadDy), targets, f.scale(k+f8HeadDy), state, n, V, dscale, false)
		f.rescale(k + f8HeadDy)
	}
	f.ops.CrossEntropyFP8(losses, logits, q, f.amax(k+f8HeadDy), targets, f.scale(k+f8HeadDy), state, n, V, dscale, qt == nil)
	f.ops.MatmulFP8(rowsOf(a.dln, r, n), q, f.wte.qt, nil, f.inv(k+f8HeadDy), f.inv(k+f8HeadW), n, V, C)
	if qt != nil {
		f.ops.TransposeFP8(qt, q, n, V)
		f.ops.MatmulFP8Add(g.wte, qt, a.f8.lnf.qt.MustView(r*C, C, n), f.inv(k+f8HeadDy), f.inv(k+f8HeadX), V, n, C)
		return
	}
	m.dev.MatmulBackward(nil, g.wte, nil, logits, x, p.wte, n, C, V)
}

// linearBackwardFP8 queues the backward of one FP8 linear layer y = x·Wᵀ
// + b with dy (N, OC): dy cast to E5M2 with its transpose and the bias
// gradient, then the layer's GEMMs (linearGEMMsFP8). With pre (the fc
// layer: y is the GELU's pre-activation, stored as pre), dy is the
// gradient of gelu(y) and the layer's output gradient dy·gelu'(pre) is
// made in the same cast (DGELUCastTransposeDBiasFP8), with no GELU
// backward pass of its own.
func (m *Model) linearBackwardFP8(dx, dw, db, dy, pre *tensor.Tensor, x, w fp8Pair, k, kx, kw, N, C, OC int) {
	f := m.fp8
	g := m.acts.f8.dy.dims(N, OC)
	cast := func(db *tensor.Tensor) {
		if pre != nil {
			f.ops.DGELUCastTransposeDBiasFP8(g.q, g.qt, f.amax(k), db, dy, pre, f.scale(k), N, OC)
		} else {
			f.ops.CastTransposeDBiasFP8(g.q, g.qt, f.amax(k), db, dy, f.scale(k), N, OC)
		}
	}
	if f.current { // the first run's column sums go to scratch
		cast(f.dbias.MustView(0, OC))
		f.rescale(k)
	}
	cast(db)
	m.linearGEMMsFP8(dx, dw, x, w, k, kx, kw, N, C, OC)
}

// linearGEMMsFP8 queues the GEMMs of an FP8 linear layer's backward from
// its output gradient (tensor k) already cast into the dy scratch as
// (N, OC): dW += dyᵀ·x, dx = dy·W (stored into dx).
func (m *Model) linearGEMMsFP8(dx, dw *tensor.Tensor, x, w fp8Pair, k, kx, kw, N, C, OC int) {
	f := m.fp8
	g := m.acts.f8.dy.dims(N, OC)
	f.ops.MatmulFP8Add(dw, g.qt, x.qt, f.inv(k), f.inv(kx), OC, N, C)
	f.ops.MatmulFP8(dx, g.q, w.qt, nil, f.inv(k), f.inv(kw), N, OC, C)
}

// layerNormBackwardFP8 queues the backward of a layernorm of the residual
// stream (inp): dresidual += its gradient from dln, dweight and dbias +=
// theirs; and the updated dresidual, which is the output gradient of the
// projection before the layernorm (tensor k, bias gradient db), cast into
// the dy scratch as (N, C) with its bias gradient, for linearGEMMsFP8. One
// op (LayerNormBackwardCastFP8: the gradient is cast as it is computed,
// not read again), or with fp8SplitLNCast the two it fuses.
func (m *Model) layerNormBackwardFP8(dweight, dbias, inp, weight, mean, rstd, db *tensor.Tensor, k, N, C int) {
	d, a, f := m.dev, m.acts, m.fp8
	g := a.f8.dy.dims(N, C)
	if m.fp8SplitLNCast || f.current { // under current scaling the cast runs twice, the layernorm backward (accumulating) once
		d.LayerNormBackward(a.dresidual, dweight, dbias, a.dln, inp, weight, mean, rstd, N, C)
		if f.current {
			f.ops.CastTransposeDBiasFP8(g.q, g.qt, f.amax(k), f.dbias.MustView(0, C), a.dresidual, f.scale(k), N, C)
			f.rescale(k)
		}
		f.ops.CastTransposeDBiasFP8(g.q, g.qt, f.amax(k), db, a.dresidual, f.scale(k), N, C)
		return
	}
	f.ops.LayerNormBackwardCastFP8(a.dresidual, dweight, dbias, g.q, g.qt, f.amax(k), db, a.dln, inp, weight, mean, rstd, f.scale(k), N, C)
}

// blocksBackwardFP8 is blocksBackward under FP8: the blocks' linear
// layers through linearBackwardFP8, the rest as blocksBackward does. The
// layernorm backwards that update dresidual cast it for the projection
// before them (layerNormBackwardFP8): ln_2's for the attention projection,
// ln_1's of block l > 0 for block l-1's MLP projection, and ln_f's
// (backward, before this) for the last block's; so the projections run
// only their GEMMs. Block 0's ln_1 is followed by no FP8 layer (the
// encoder's backward reads dresidual).
func (m *Model) blocksBackwardFP8() {
	a, p, g, f := m.acts, m.wp, m.gp, m.fp8
	B, T := m.B, m.T
	N := B * T
	C, NH, L := m.Config.Channels, m.Config.Heads, m.Config.Layers
	for l := L - 1; l >= 0; l-- {
		w, gw, x, fw, k := p.layers[l], g.layers[l], a.f8.x[l], f.w[l], l*f8PerLayer
		residual := a.encoded
		if l > 0 {
			residual = layer(a.residual3, l-1)
		}
		// dresidual is already cast as this layer's fc proj dy (ln_f's or
		// block l+1's ln_1 backward)
		m.linearGEMMsFP8(a.dfch, gw.fcprojw, x[3], fw[3], k+f8FCProjdy, k+f8FCProjx, k+f8FCProjw, N, 4*C, C)
		// dfch is d gelu(fch): the fc layer's cast applies the GELU's derivative
		m.linearBackwardFP8(a.dln, gw.fcw, gw.fcb, a.dfch, layer(a.fch, l), x[2], fw[2], k+f8FCdy, k+f8FCx, k+f8FCw, N, C, 4*C)
		m.layerNormBackwardFP8(gw.ln2w, gw.ln2b, layer(a.residual2, l), w.ln2w, layer(a.ln2Mean, l), layer(a.ln2Rstd, l), gw.attprojb, k+f8Projdy, N, C)
		m.linearGEMMsFP8(a.datty, gw.attprojw, x[1], fw[1], k+f8Projdy, k+f8Projx, k+f8Projw, N, C, C)
		m.attentionBackwardStore(a.dqkv, a.datty, layer(a.qkv, l), layer(a.atty, l), layer(a.att, l), B, T, C, NH)
		m.linearBackwardFP8(a.dln, gw.qkvw, gw.qkvb, a.dqkv, nil, x[0], fw[0], k+f8QKVdy, k+f8QKVx, k+f8QKVw, N, C, 3*C)
		if l > 0 {
			m.layerNormBackwardFP8(gw.ln1w, gw.ln1b, residual, w.ln1w, layer(a.ln1Mean, l), layer(a.ln1Rstd, l), g.layers[l-1].fcprojb, k-f8PerLayer+f8FCProjdy, N, C)
		} else {
			m.dev.LayerNormBackward(a.dresidual, gw.ln1w, gw.ln1b, a.dln, residual, w.ln1w, layer(a.ln1Mean, l), layer(a.ln1Rstd, l), N, C)
		}
	}
}

// prepareFP8 readies a gradient run under amp.FP8: the state and buffers
// (ensureFP8), and the weights cast if no step has begun yet (a first
// Gradients without ZeroGrad).
func (m *Model) prepareFP8() error {
	if err := m.ensureFP8(); err != nil {
		return err
	}
	if !m.fp8.begun {
		m.beginFP8Step()
	}
	return nil
}

// SetFP8Scales restores a scaling state that FP8Scales returned (a
// resumed run continues with the amax histories and scales it had). It
// must match the model's tensors and recipe, or be a state saved before
// the LM head's logits' gradient had its record (f8HeadDy: one tensor
// fewer), which is restored with that record added fresh (and seeded as
// a new state's, seedHeadDy), so that older checkpoints resume. It is an
// error unless the model trains under amp.FP8.
func (m *Model) SetFP8Scales(s *amp.FP8Scales) error {
	if !m.trainsFP8() {
		return fmt.Errorf("gpt: FP8 scales for a model that does not train under fp8")
	}
	r := amp.DefaultFP8Recipe()
	if m.fp8Recipe != nil {
		r = *m.fp8Recipe
	}
	L := m.Config.Layers
	K, oldK := fp8Tensors(L)*f8Stride, (L*f8PerLayer+f8HeadOld)*f8Stride
	switch {
	case s == nil:
		return fmt.Errorf("gpt: nil FP8 scales")
	case (s.K != K && s.K != oldK) || s.H != r.History || s.Margin != r.Margin:
		return fmt.Errorf("gpt: FP8 scales of %d tensors, history %d, margin %d; this model has %d tensors, history %d, margin %d",
			s.K, s.H, s.Margin, K, r.History, r.Margin)
	}
	head := f8Head
	if s.K == oldK {
		head = f8HeadOld
	}
	if err := s.Check(fp8FormatsOf(L, head)); err != nil {
		return fmt.Errorf("gpt: FP8 scales: %w", err)
	}
	c := &amp.FP8Scales{K: s.K, H: s.H, Margin: s.Margin, St: append([]float32(nil), s.St...), Meta: append([]int32(nil), s.Meta...)}
	if s.K == oldK {
		// Saved before the logits' gradient had a record (f8HeadDy): its
		// records are added fresh (scale 1, no history), as a new state's.
		var err error
		if c, err = extendFP8Scales(c, fp8Formats(L), r); err != nil {
			return err
		}
	}
	if m.fp8 == nil {
		m.fp8Restore = c
		return nil
	}
	m.seedHeadDy(c)
	st, _ := tensor.FromF32(c.St, len(c.St))
	meta, _ := tensor.FromI32(c.Meta, len(c.Meta))
	m.dev.Upload(m.fp8.st, st)
	m.dev.Upload(m.fp8.meta, meta)
	return m.dev.Sync()
}

// extendFP8Scales returns s with the records of formats past s.K added as
// amp.NewFP8Scales makes them (amax 0, scale and inverse 1, an empty
// history), the records of s kept as they are: a state of fewer tensors
// (a checkpoint from before the last ones were added) resumed by a model
// of more.
func extendFP8Scales(s *amp.FP8Scales, formats []tensor.FP8Format, r amp.FP8Recipe) (*amp.FP8Scales, error) {
	n, err := amp.NewFP8Scales(formats, r)
	if err != nil {
		return nil, err
	}
	if n.K < s.K || n.H != s.H {
		return nil, fmt.Errorf("gpt: FP8 scales of %d tensors, history %d, cannot be extended to %d tensors, history %d", s.K, s.H, n.K, n.H)
	}
	n.Margin = s.Margin
	K, k := n.K, s.K
	copy(n.St[:2*k], s.St[:2*k])                   // amax pairs
	copy(n.St[2*K:2*K+k], s.St[2*k:3*k])           // scales
	copy(n.St[3*K:3*K+k], s.St[3*k:4*k])           // inverses
	copy(n.St[4*K:4*K+k*s.H], s.St[4*k:4*k+k*s.H]) // histories
	copy(n.Meta[:k*amp.FP8MetaLen], s.Meta)
	return n, nil
}
