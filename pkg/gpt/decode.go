package gpt

// decode.go: generation over a key/value cache. A prompt runs once through
// the model (Prefill: the training forward's ops over its real length),
// and every layer's keys and values are kept in the cache; each new token
// then runs one row per sequence through the model (Step), attending to the
// cache, and the LM head and the sampling run fused (Sample), so that only
// the chosen ids leave the device.

import (
	"errors"
	"fmt"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// ErrNoDecoder is returned (wrapped) by NewKVCache on a device without the
// decode ops (device.Decoder); generation then recomputes the window.
var ErrNoDecoder = fmt.Errorf("gpt: the device has no key/value-cache ops: %w", device.ErrUnsupported)

// KVCache is the key/value cache of B sequences of up to MaxSeq positions
// each, with the buffers of prefill (one sequence of up to MaxSeq tokens)
// and of a decode step (one row a sequence). It allocates everything once;
// Prefill, Step and Sample allocate nothing on the device.
type KVCache struct {
	m    *Model
	dec  device.Decoder
	B, S int

	k, v []*tensor.Tensor // per layer (B,NH,S,hs), the activation dtype
	pos  []int            // the cached positions of each sequence

	step  rowBufs        // B rows
	pre   rowBufs        // S rows
	att   *tensor.Tensor // prefill's attention state, room for S positions
	zero  *tensor.Tensor // (1) I32 0: prefill writes from position 0
	posT  *tensor.Tensor // (B) I32 positions of the decode step
	hostP *tensor.Tensor // (B) I32 host staging of the positions
	hostI *tensor.Tensor // (B) I32 host copy of the chosen ids
	logit *tensor.Tensor // (B,V) logits, the activation dtype
	table *tensor.Tensor // (NS,V) I32 sampling table (SetTable)
	rows  *tensor.Tensor // (B,RowLen) I32 sampling state
	ns    int

	// Draws launched and not yet collected (Launch, Collect), oldest first,
	// and the host buffers free for the next.
	ahead []pending
	spare []*tensor.Tensor

	// The decode step and the draw as one graph (Next), on a device that
	// captures graphs, for the sampling options it was captured with.
	graph    device.Graph
	graphO   device.Sampling
	noGraph  bool   // capture failed once: run plainly
	GraphWhy string // why Next runs without a graph, "" while it uses one (or has not run)
}

// maxAhead is the most draws Launch leaves to be collected.
const maxAhead = 4

// pending is a launched draw's ids: in ids once f (nil: already there) is
// waited for.
type pending struct {
	ids *tensor.Tensor
	f   device.Fetched
}

// rowBufs are the activations of one run of n rows through the layers:
// x is the residual stream, ln a layernorm's output (the final one at the
// end), the rest scratch that every layer reuses.
type rowBufs struct {
	n                                           int
	tok, x, ln, qkv, atty, proj, res, fch, fchG *tensor.Tensor
	mean, rstd                                  *tensor.Tensor
}

// KVCacheBytes is the bytes of the keys and values of B sequences of S
// positions of cfg under policy p: 2·L·B·S·C values of the activation dtype.
func KVCacheBytes(cfg Config, B, S int, p amp.Policy) int64 {
	return 2 * int64(cfg.Layers) * int64(B) * int64(S) * int64(cfg.Channels) * int64(p.DType(amp.Activation).Size())
}

// DecodeBytes is every byte NewKVCache allocates for B sequences: the cache,
// the prefill buffers of MaxSeq rows (with the attention state of the CPU,
// the largest), the decode step's and the sampling's.
func DecodeBytes(cfg Config, B int, p amp.Policy) int64 {
	S, C, V := cfg.MaxSeq, int64(cfg.Channels), int64(cfg.Vocab)
	a := int64(p.DType(amp.Activation).Size())
	r := int64(p.DType(amp.Residual).Size())
	rowsBytes := func(n int64) int64 { return n*(4+2*4) + n*C*(a*12+r*2) } // tok, mean, rstd; ln qkv(3) atty proj fch(4) fchG(4); x res
	att := int64(device.ProbState(p.DType(amp.Activation), 1, S, cfg.Heads).Numel()) * a
	return KVCacheBytes(cfg, B, S, p) + rowsBytes(int64(S)) + rowsBytes(int64(B)) + att + int64(B)*(V*a+8+4*device.RowLen)
}

// NewKVCache allocates the cache of B sequences for m. It fails with
// ErrNoDecoder on a device without the decode ops.
func (m *Model) NewKVCache(B int) (*KVCache, error) {
	dec, ok := m.dev.(device.Decoder)
	if !ok {
		return nil, ErrNoDecoder
	}
	if err := dec.DecodeReady(); err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrNoDecoder, err)
	}
	if B < 1 {
		return nil, fmt.Errorf("gpt: a key/value cache needs at least one sequence, not %d", B)
	}
	cfg := m.Config
	c := &KVCache{m: m, dec: dec, B: B, S: cfg.MaxSeq, pos: make([]int, B)}
	if err := c.alloc(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *KVCache) alloc() error {
	d, cfg := c.m.dev, c.m.Config
	dt, rdt := c.m.Policy.DType(amp.Activation), c.m.Policy.DType(amp.Residual)
	C, NH, L := cfg.Channels, cfg.Heads, cfg.Layers
	var err error
	a := func(dt tensor.DType, shape ...int) *tensor.Tensor {
		if err != nil {
			return nil
		}
		var t *tensor.Tensor
		t, err = d.Alloc(dt, shape...)
		return t
	}
	for range L {
		c.k = append(c.k, a(dt, c.B, NH, c.S, C/NH))
		c.v = append(c.v, a(dt, c.B, NH, c.S, C/NH))
	}
	bufs := func(n int) rowBufs {
		// The dtypes of the training step's buffers (activationSpecs): the
		// residual stream in the policy's Residual type, the rest in its
		// Activation type.
		return rowBufs{n: n, tok: a(tensor.I32, n), x: a(rdt, n, C), ln: a(dt, n, C), qkv: a(dt, n, 3*C),
			atty: a(dt, n, C), proj: a(dt, n, C), res: a(rdt, n, C), fch: a(dt, n, 4*C), fchG: a(dt, n, 4*C),
			mean: a(tensor.F32, n), rstd: a(tensor.F32, n)}
	}
	c.step, c.pre = bufs(c.B), bufs(c.S)
	st := d.AttentionState(dt, 1, c.S, C, NH)
	c.att = a(st.DType, st.Numel())
	c.zero, c.posT = a(tensor.I32, 1), a(tensor.I32, c.B)
	c.hostP, c.hostI = tensor.New(tensor.I32, c.B), tensor.New(tensor.I32, c.B)
	c.logit = a(dt, c.B, cfg.Vocab)
	c.rows = a(tensor.I32, c.B, device.RowLen)
	if err != nil {
		return fmt.Errorf("gpt: key/value cache of %d sequences (%.1f MiB): %w", c.B, float64(DecodeBytes(cfg, c.B, c.m.Policy))/(1<<20), err)
	}
	return c.SetTable(nil, 1)
}

// Close frees the cache's device memory.
func (c *KVCache) Close() {
	d := c.m.dev
	if c.graph != nil {
		c.graph.Close()
		c.graph = nil
	}
	for _, t := range c.all() {
		if t != nil {
			d.Free(t)
		}
	}
	c.k, c.v = nil, nil
}

func (c *KVCache) all() []*tensor.Tensor {
	ts := append(append([]*tensor.Tensor{}, c.k...), c.v...)
	for _, b := range []rowBufs{c.step, c.pre} {
		ts = append(ts, b.tok, b.x, b.ln, b.qkv, b.atty, b.proj, b.res, b.fch, b.fchG, b.mean, b.rstd)
	}
	return append(ts, c.att, c.zero, c.posT, c.logit, c.table, c.rows)
}

// Len returns the number of positions cached for sequence b.
func (c *KVCache) Len(b int) int { return c.pos[b] }

// Prefill runs the prompt tokens of sequence b through the model over their
// real length, keeping every layer's keys and values in the cache from
// position 0 on (whatever b held before is dropped), and leaves the final
// layernorm of the prompt's last position in row b of the step's output, so
// that Sample draws b's next token from it. The prompt must have 1 to
// MaxSeq tokens.
func (c *KVCache) Prefill(b int, tokens []int32) error {
	return c.batch(func() error { return c.prefill(b, tokens) })
}

func (c *KVCache) prefill(b int, tokens []int32) error {
	c.drop()
	P := len(tokens)
	if b < 0 || b >= c.B {
		return fmt.Errorf("gpt: sequence %d outside the cache's %d", b, c.B)
	}
	if P < 1 || P > c.S {
		return fmt.Errorf("gpt: a prompt of %d tokens; the model takes 1 to %d", P, c.S)
	}
	if err := c.m.checkTokens(tokens); err != nil {
		return err
	}
	m, d := c.m, c.m.dev
	C, NH := m.Config.Channels, m.Config.Heads
	host, _ := tensor.FromI32(tokens, P)
	pb := c.pre.rows(P)
	d.Upload(pb.tok, host)
	d.Zero(c.zero)
	d.Encoder(pb.x, m.wp.wte, m.wp.wpe, pb.tok, 1, P, C)
	st := d.AttentionState(pb.qkv.DType, 1, P, C, NH)
	att := c.att.MustView(0, st.Shape...)
	c.layers(pb, func(l int) {
		c.dec.KVAppend(c.slot(c.k[l], b), c.slot(c.v[l], b), pb.qkv, c.zero, 1, P, C, NH, c.S)
		d.Attention(pb.atty, att, pb.qkv, 1, P, C, NH)
	})
	d.Cast(rowsOf(c.step.ln, b, 1), rowsOf(pb.ln, P-1, 1))
	c.pos[b] = P
	return d.Sync()
}

// slot returns sequence b's part (1,NH,S,hs) of a layer's cache.
func (c *KVCache) slot(t *tensor.Tensor, b int) *tensor.Tensor {
	n := t.Numel() / c.B
	return t.MustView(b*n, append([]int{1}, t.Shape[1:]...)...)
}

// rows returns the first n rows of the buffers.
func (r rowBufs) rows(n int) rowBufs {
	v := func(t *tensor.Tensor) *tensor.Tensor { return rowsOf(t, 0, n) }
	return rowBufs{n: n, tok: v(r.tok), x: v(r.x), ln: v(r.ln), qkv: v(r.qkv), atty: v(r.atty), proj: v(r.proj),
		res: v(r.res), fch: v(r.fch), fchG: v(r.fchG), mean: v(r.mean), rstd: v(r.rstd)}
}

// layers queues the blocks over the rows of r, from x (the encoder's
// output) to ln (the final layernorm's); attend(l) queues layer l's
// attention from r.qkv into r.atty.
func (c *KVCache) layers(r rowBufs, attend func(l int)) {
	m, d := c.m, c.m.dev
	p, N := m.wp, r.n
	C, L := m.Config.Channels, m.Config.Layers
	d.LayerNorm(r.ln, r.mean, r.rstd, r.x, p.layers[0].ln1w, p.layers[0].ln1b, N, C)
	for l := range L {
		w := p.layers[l]
		d.Matmul(r.qkv, nil, r.ln, w.qkvw, w.qkvb, N, C, 3*C, device.None)
		attend(l)
		d.Matmul(r.proj, nil, r.atty, w.attprojw, w.attprojb, N, C, C, device.None)
		d.ResidualLayerNorm(r.res, r.ln, r.mean, r.rstd, r.x, r.proj, w.ln2w, w.ln2b, N, C)
		d.Matmul(r.fchG, r.fch, r.ln, w.fcw, w.fcb, N, C, 4*C, device.GELU)
		d.Matmul(r.proj, nil, r.fchG, w.fcprojw, w.fcprojb, N, 4*C, C, device.None)
		nw, nb := p.lnfw, p.lnfb
		if l+1 < L {
			nw, nb = p.layers[l+1].ln1w, p.layers[l+1].ln1b
		}
		d.ResidualLayerNorm(r.x, r.ln, r.mean, r.rstd, r.res, r.proj, nw, nb, N, C)
	}
}

// Step runs one token of every sequence through the model at its next
// position: tokens (B ids) when given, else the ids the last Sample chose.
// Each sequence's key and value are appended to the cache, and the final
// layernorm of each row is left for Sample. A sequence whose cache is full
// must be prefilled again first (Full).
func (c *KVCache) Step(tokens []int32) error {
	return c.batch(func() error { return c.stepTokens(tokens) })
}

func (c *KVCache) stepTokens(tokens []int32) error {
	c.drop()
	if err := c.stepPositions(); err != nil {
		return err
	}
	if tokens != nil {
		if len(tokens) != c.B {
			return fmt.Errorf("gpt: %d tokens for a step of %d sequences: %w", len(tokens), c.B, tensor.ErrShape)
		}
		if err := c.m.checkTokens(tokens); err != nil {
			return err
		}
		host, _ := tensor.FromI32(tokens, c.B)
		c.m.dev.Upload(c.step.tok, host)
	} // else step.tok holds the ids the last Sample chose
	c.queueStep()
	c.advance()
	return nil
}

// stepPositions checks that every sequence has room for a step and queues
// the upload of the positions the step writes at.
func (c *KVCache) stepPositions() error {
	ps := c.hostP.I32()
	for b, p := range c.pos {
		if p < 1 || p >= c.S {
			return fmt.Errorf("gpt: sequence %d holds %d positions: prefill it (1 to %d tokens) before a step", b, p, c.S-1)
		}
		ps[b] = int32(p)
	}
	c.m.dev.Upload(c.posT, c.hostP)
	return nil
}

// queueStep queues a decode step's device work from step.tok and posT (no
// upload, no wait: a graph captures it).
func (c *KVCache) queueStep() {
	m := c.m
	r := c.step
	C, NH := m.Config.Channels, m.Config.Heads
	c.dec.EncoderAt(r.x, m.wp.wte, m.wp.wpe, r.tok, c.posT, c.B, C)
	c.layers(r, func(l int) {
		c.dec.AttentionDecode(r.atty, r.qkv, c.k[l], c.v[l], c.posT, c.B, C, NH, c.S)
	})
}

// queueSample queues the LM head and the draw (SampleHead).
func (c *KVCache) queueSample(o device.Sampling) {
	m := c.m
	c.dec.SampleHead(c.step.tok, c.logit, c.step.ln, m.wp.wte, c.table, c.rows, c.B, m.Config.Channels, m.Config.Vocab, c.ns, o)
}

func (c *KVCache) advance() {
	for b := range c.pos {
		c.pos[b]++
	}
}

// Next is Step(nil) followed by Sample(o): a decode step from the tokens
// the last Sample or Next chose, then the next tokens drawn. On a device
// that captures graphs (device.Grapher) the step and the draw are one graph,
// captured at the first call (after a plain run) and replayed for every
// later token: one launch a token, with only the positions going in and the
// ids coming out. Next is Launch then Collect; draws launched before it must
// have been collected.
func (c *KVCache) Next(o device.Sampling) (ids []int32, err error) {
	err = c.batch(func() error {
		if len(c.ahead) > 0 {
			return fmt.Errorf("gpt: Next with %d launched draws not collected: Collect them first", len(c.ahead))
		}
		if err := c.launch(o); err != nil {
			return err
		}
		ids, err = c.collect()
		return err
	})
	return ids, err
}

// Launch queues what Next does, the decode step and the draw, and returns
// without waiting for the ids; Collect returns them, in launch order. Up to
// maxAhead draws may wait to be collected. On a device that copies to the
// host without waiting (device.Fetcher) the host so queues token t+1 while
// the device still runs token t, and the device does not wait for the host
// between tokens; elsewhere Launch waits for the ids itself. Prefill, Step
// and Sample drop the draws not collected.
func (c *KVCache) Launch(o device.Sampling) error {
	return c.batch(func() error { return c.launch(o) })
}

// Collect returns the ids of the oldest draw Launch queued and no Collect
// returned yet, waiting for them.
func (c *KVCache) Collect() (ids []int32, err error) {
	err = c.batch(func() error {
		ids, err = c.collect()
		return err
	})
	return ids, err
}

// Ahead returns the draws launched and not yet collected.
func (c *KVCache) Ahead() int { return len(c.ahead) }

// batch runs fn in one hand-off to the device's thread where the device
// has one (device.Batcher: the GPU's CUDA thread), so that a token's
// upload, launch, download and wait cost one hand-off instead of one each;
// else it runs fn.
func (c *KVCache) batch(fn func() error) error { return device.Batch(c.m.dev, fn) }

func (c *KVCache) launch(o device.Sampling) error {
	if len(c.ahead) >= maxAhead {
		return fmt.Errorf("gpt: %d launched draws not collected, the most Launch leaves: Collect first", len(c.ahead))
	}
	if err := c.stepPositions(); err != nil {
		return err
	}
	g, graphs := c.m.dev.(device.Grapher)
	switch {
	case graphs && !c.noGraph && c.graph != nil && c.graphO == o:
		err := c.graph.Launch()
		if err == nil {
			break
		}
		if !errors.Is(err, device.ErrGraphStale) {
			return err
		}
		c.graph.Close() // a buffer moved (a larger prefill grew a scratch): run plainly, capture again
		c.graph = nil
		fallthrough
	default:
		c.queueStep()
		c.queueSample(o)
		if graphs && !c.noGraph { // capture for the next tokens
			if c.graph != nil {
				c.graph.Close()
				c.graph = nil
			}
			if err := c.m.dev.Sync(); err != nil {
				return err
			}
			gr, err := g.Capture(func() error {
				c.queueStep()
				c.queueSample(o)
				return nil
			})
			if err != nil {
				c.noGraph, c.GraphWhy = true, err.Error()
			} else {
				c.graph, c.graphO = gr, o
			}
		}
	}
	c.advance()
	var host *tensor.Tensor
	if n := len(c.spare); n > 0 {
		host, c.spare = c.spare[n-1], c.spare[:n-1]
	} else {
		host = tensor.New(tensor.I32, c.B)
	}
	p := pending{ids: host}
	if f, ok := c.m.dev.(device.Fetcher); ok {
		p.f = f.Fetch(host, c.step.tok)
	} else {
		c.m.dev.Download(host, c.step.tok)
		if err := c.m.dev.Sync(); err != nil {
			c.spare = append(c.spare, host)
			return err
		}
	}
	c.ahead = append(c.ahead, p)
	return nil
}

func (c *KVCache) collect() ([]int32, error) {
	if len(c.ahead) == 0 {
		return nil, fmt.Errorf("gpt: Collect with no draw launched")
	}
	p := c.ahead[0]
	c.ahead = append(c.ahead[:0], c.ahead[1:]...)
	c.spare = append(c.spare, p.ids)
	if p.f != nil {
		if err := p.f.Wait(); err != nil {
			c.drop() // the later draws ran after a failure
			return nil, err
		}
	}
	return append([]int32(nil), p.ids.I32()...), nil
}

// drop forgets the draws launched and not collected.
func (c *KVCache) drop() {
	for _, p := range c.ahead {
		c.spare = append(c.spare, p.ids)
	}
	c.ahead = c.ahead[:0]
}

// Full reports whether sequence b's cache has no room for another step.
func (c *KVCache) Full(b int) bool { return c.pos[b] >= c.S }

// Logits returns the (B,V) logits of the rows the last Prefill or Step left,
// as fp32 values of the activation dtype (for tests and for callers that
// sample on the host).
func (c *KVCache) Logits() ([]float32, error) {
	m := c.m
	V, C := m.Config.Vocab, m.Config.Channels
	m.dev.Matmul(c.logit, nil, c.step.ln, m.wp.wte, nil, c.B, C, V, device.None)
	host := tensor.New(c.logit.DType, c.logit.Shape...)
	m.dev.Download(host, c.logit)
	if err := m.dev.Sync(); err != nil {
		return nil, err
	}
	return host.ToF32(), nil
}

// SetTable sets the sampling table (NS rows of V entries, device.TableEntry
// or TableNo; nil: one row allowing every token).
func (c *KVCache) SetTable(table []int32, ns int) error {
	V := c.m.Config.Vocab
	if table == nil {
		table, ns = make([]int32, V), 1
	}
	if ns < 1 || len(table) != ns*V {
		return fmt.Errorf("gpt: a sampling table of %d entries for %d states of %d tokens: %w", len(table), ns, V, tensor.ErrShape)
	}
	if c.table == nil || c.ns != ns {
		if c.table != nil {
			c.m.dev.Free(c.table)
		}
		var err error
		if c.table, err = c.m.dev.Alloc(tensor.I32, ns, V); err != nil {
			return err
		}
		c.ns = ns
	}
	host, _ := tensor.FromI32(table, ns, V)
	c.m.dev.Upload(c.table, host)
	return c.m.dev.Sync()
}

// SetRows sets the sampling state of every sequence (B·RowLen values,
// the device.Row* slots).
func (c *KVCache) SetRows(rows []int32) error {
	if len(rows) != c.B*device.RowLen {
		return fmt.Errorf("gpt: %d sampling-state values for %d sequences: %w", len(rows), c.B, tensor.ErrShape)
	}
	host, _ := tensor.FromI32(rows, c.B, device.RowLen)
	c.m.dev.Upload(c.rows, host)
	return nil
}

// Sample runs the LM head and the sampling over the rows the last Prefill
// or Step left and returns each sequence's token (-1 where the table allows
// none); they are also the tokens of the next Step (Step(nil)).
func (c *KVCache) Sample(o device.Sampling) (ids []int32, err error) {
	err = c.batch(func() error {
		c.drop()
		c.queueSample(o)
		ids, err = c.readIDs()
		return err
	})
	return ids, err
}

// readIDs downloads the ids the last draw chose, waiting for the device.
func (c *KVCache) readIDs() ([]int32, error) {
	c.m.dev.Download(c.hostI, c.step.tok)
	if err := c.m.dev.Sync(); err != nil {
		return nil, err
	}
	return append([]int32(nil), c.hostI.I32()...), nil
}

// checkTokens reports a token outside the vocabulary.
func (m *Model) checkTokens(tokens []int32) error {
	V := int32(m.Config.Vocab)
	for i, t := range tokens {
		if t < 0 || t >= V {
			return fmt.Errorf("gpt: token %d at %d outside the vocabulary [0,%d)", t, i, V)
		}
	}
	return nil
}
