package train

import (
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/druto/druto/pkg/data"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/tensor"
)

// SampleOptions choose how each token is drawn. The zero value is greedy.
type SampleOptions struct {
	Temperature float32 // softmax temperature; 0 picks the most likely token
	TopK        int     // draw among the K most likely tokens only (0: all)
	TopP        float32 // draw among the fewest most likely tokens whose probability reaches P (0 or 1: all)
	Seed        uint64  // the random stream of the draws
}

// Validate reports options that cannot be used, saying what to change.
func (o SampleOptions) Validate() error {
	switch {
	case !(o.Temperature >= 0) || math.IsInf(float64(o.Temperature), 0):
		return fmt.Errorf("train: temperature %g must be a finite number >= 0 (0: greedy)", o.Temperature)
	case o.TopK < 0:
		return fmt.Errorf("train: top-k %d must be >= 0 (0: off)", o.TopK)
	case !(o.TopP >= 0 && o.TopP <= 1):
		return fmt.Errorf("train: top-p %g must be in [0, 1] (0 or 1: off)", o.TopP)
	}
	return nil
}

// Sampler generates text from a model. On a device with the decode ops
// (device.Decoder) it runs each prompt once into a key/value cache and then
// one row per sequence a token, with the LM head and the draw fused on the
// device; elsewhere it recomputes the window of the last MaxSeq tokens for
// every token. Both draw by device.SampleRow: a token is allowed only when
// its bytes continue valid UTF-8 (and the tokenizer can decode it, which
// rules out the padding of a GPT-2 vocabulary), and in the last steps only
// when it leaves room to finish the character, so text never ends inside
// one. Each sequence b has its own stream of draws, from the seed plus b.
//
// Past the context: when a sequence's cache is full, its last MaxSeq/2
// tokens are run again as a new prompt (GPT-2's positions are absolute, so
// the cache cannot roll), and generation goes on from there.
type Sampler struct {
	m    *gpt.Model
	tok  data.Tokenizer
	opts SampleOptions
	seed uint64

	states []utf8State       // the sampling table's rows, by index
	index  map[utf8State]int // and their indexes
	table  []int32           // len(states)·V entries (device.TableEntry)
	cache  *gpt.KVCache      // for the last batch size, nil before the first use
	sent   int               // table rows the cache holds
	host   bool              // the device has no decode ops: recompute windows
	sc     device.SampleScratch
	stats  SampleStats
}

// SampleStats are the timings of a Sampler's last Generate.
type SampleStats struct {
	Batch   int           // sequences
	Prefill time.Duration // from the start to the first token of every sequence (prompts in, first draw out)
	Decode  time.Duration // from then to the last token
	Tokens  int           // tokens generated per sequence
	Cached  bool          // generated over a key/value cache
	Slides  int           // times a full cache was refilled from the last MaxSeq/2 tokens
	// Graph says how the decode steps ran on a device that captures
	// graphs: "graph" (each step and draw one CUDA graph launch), or
	// "plain: " and why not; "" elsewhere.
	Graph string
	// LaunchesPerToken is the device launches (kernels, cuBLAS calls,
	// graph launches) a decode step queued, over the steps after the
	// capture, on a device that counts them (0 elsewhere).
	LaunchesPerToken float64
}

// launchCounter is a device that counts its launches (gpu.Device).
type launchCounter interface{ Launches() int64 }

// DecodeRate returns the tokens per second of the decode phase over every
// sequence (the first token of each, which prefill yields, not counted).
func (s SampleStats) DecodeRate() float64 {
	if s.Tokens < 2 || s.Decode <= 0 {
		return 0
	}
	return float64(s.Batch*(s.Tokens-1)) / s.Decode.Seconds()
}

// NewSampler returns a sampler of model m whose tokens are tok's (nil: a
// byte-level model's bytes, for a model of vocabulary 256).
func NewSampler(m *gpt.Model, tok data.Tokenizer, o SampleOptions) (*Sampler, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if tok == nil {
		tok = data.Bytes{}
	}
	if tok.Vocab() > m.Config.Vocab {
		return nil, fmt.Errorf("train: the %s tokenizer has %d tokens, more than the model's vocabulary of %d", tok.Name(), tok.Vocab(), m.Config.Vocab)
	}
	return newSampler(m, tok, o, o.Seed), nil
}

func newSampler(m *gpt.Model, tok data.Tokenizer, o SampleOptions, seed uint64) *Sampler {
	return &Sampler{m: m, tok: tok, opts: o, seed: seed, index: map[utf8State]int{}}
}

// Stats returns the timings of the last Generate or GenerateBatch.
func (s *Sampler) Stats() SampleStats { return s.stats }

// Close frees the sampler's key/value cache (the model is the caller's).
func (s *Sampler) Close() {
	if s.cache != nil {
		s.cache.Close()
		s.cache = nil
	}
}

// Sample continues prompt by n tokens and returns the text generated (the
// prompt not included). When stream is not nil, each piece of text is
// written to it as soon as it forms whole characters.
func (s *Sampler) Sample(prompt string, n int, stream io.Writer) (string, error) {
	p, err := s.tok.Encode([]byte(prompt))
	if err != nil {
		return "", fmt.Errorf("train: prompt: %w", err)
	}
	var emit func(string) error
	if stream != nil {
		emit = func(piece string) error { _, err := io.WriteString(stream, piece); return err }
	}
	out, err := s.Generate(p, n, emit)
	if err != nil {
		return "", err
	}
	return data.DecodeText(s.tok, out), nil
}

// Generate continues the prompt tokens by n tokens and returns them. emit,
// when not nil, receives the text as it forms whole characters.
func (s *Sampler) Generate(prompt []int32, n int, emit func(string) error) ([]int32, error) {
	var e func(int, string) error
	if emit != nil {
		e = func(_ int, piece string) error { return emit(piece) }
	}
	out, err := s.GenerateBatch([][]int32{prompt}, n, e)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// GenerateBatch continues every prompt by n tokens, all in one batch, and
// returns each one's tokens. Prompts may differ in length; an empty one
// starts from a newline. emit, when not nil, receives each sequence's text
// as it forms whole characters.
func (s *Sampler) GenerateBatch(prompts [][]int32, n int, emit func(b int, piece string) error) ([][]int32, error) {
	m := s.m
	V := m.Config.Vocab
	B := len(prompts)
	switch {
	case n < 0:
		return nil, fmt.Errorf("train: %d tokens to generate must not be negative", n)
	case B == 0:
		return nil, fmt.Errorf("train: no prompt to continue")
	}
	seqs := make([]*sequence, B)
	for b, p := range prompts {
		for i, t := range p {
			if t < 0 || int(t) >= V {
				return nil, fmt.Errorf("train: prompt %d: token %d at %d is outside the model's vocabulary of %d", b, t, i, V)
			}
		}
		q := &sequence{toks: append([]int32(nil), p...)}
		if len(q.toks) == 0 {
			nl, err := s.tok.Encode([]byte("\n"))
			if err != nil || len(nl) == 0 {
				nl = []int32{0}
			}
			q.toks = nl
		}
		q.start = len(q.toks)
		for _, t := range q.toks { // the prompt may itself end inside a character
			q.st = q.st.advance(s.tok.Token(t))
		}
		s.stateIndex(q.st)
		seqs[b] = q
	}
	s.stats = SampleStats{Batch: B, Tokens: n}
	if n > 0 {
		start := time.Now()
		var err error
		if !s.host {
			err = s.decode(seqs, n, emit, start)
			if errors.Is(err, gpt.ErrNoDecoder) {
				s.host = true
			}
		}
		if s.host {
			err = s.recompute(seqs, n, emit, start)
		}
		if err != nil {
			return nil, err
		}
	}
	out := make([][]int32, B)
	for b, q := range seqs {
		if emit != nil && len(q.pending) > 0 { // a prompt ending inside a character
			if err := emit(b, string(q.pending)); err != nil {
				return nil, fmt.Errorf("train: stream: %w", err)
			}
		}
		out[b] = q.toks[q.start:]
	}
	return out, nil
}

// sequence is one prompt's generation: its tokens so far, where its text
// stands in UTF-8, and the bytes not yet emitted.
type sequence struct {
	toks    []int32
	start   int
	st      utf8State
	pending []byte
}

// took records a generated token and emits whole characters.
func (s *Sampler) took(b int, q *sequence, id int32, emit func(int, string) error) error {
	q.toks = append(q.toks, id)
	bs := s.tok.Token(id)
	q.st = q.st.advance(bs)
	q.pending = append(q.pending, bs...)
	if emit != nil && q.st.need == 0 && len(q.pending) > 0 {
		if err := emit(b, string(q.pending)); err != nil {
			return fmt.Errorf("train: stream: %w", err)
		}
		q.pending = q.pending[:0]
	}
	return nil
}

// checkID turns SampleRow's non-token answers into errors.
func (s *Sampler) checkID(id int32, b, i int) error {
	switch id {
	case device.SampleNotFinite:
		return fmt.Errorf("train: a logit of sequence %d is not finite at generated token %d: the model's outputs are not finite, so nothing can be sampled", b, i+1)
	case device.SampleNone:
		return fmt.Errorf("train: no token of the %s tokenizer continues valid UTF-8 here", s.tok.Name())
	}
	if id < 0 {
		return fmt.Errorf("train: the device drew token %d", id)
	}
	return nil
}

// sampling returns the options as SampleRow takes them.
func (s *Sampler) sampling() device.Sampling {
	o := s.opts
	return device.Sampling{Temperature: o.Temperature, TopK: o.TopK, TopP: o.TopP}
}

// decode generates over the key/value cache.
func (s *Sampler) decode(seqs []*sequence, n int, emit func(int, string) error, start time.Time) error {
	B, S := len(seqs), s.m.Config.MaxSeq
	if s.cache == nil || s.cache.B != B {
		s.Close()
		c, err := s.m.NewKVCache(B)
		if err != nil {
			return err
		}
		s.cache, s.sent = c, 0
	}
	c := s.cache
	if s.sent != len(s.states) {
		if err := c.SetTable(s.table, len(s.states)); err != nil {
			return err
		}
		s.sent = len(s.states)
	}
	rows := make([]int32, B*device.RowLen)
	for b, q := range seqs {
		r := rows[b*device.RowLen:]
		seed := s.seed + uint64(b)
		r[device.RowState], r[device.RowLeft] = int32(s.index[q.st]), int32(n-1)
		r[device.RowSeedLo], r[device.RowSeedHi] = int32(uint32(seed)), int32(uint32(seed>>32))
		window := q.toks[max(0, len(q.toks)-S):]
		if err := c.Prefill(b, window); err != nil {
			return err
		}
	}
	if err := c.SetRows(rows); err != nil {
		return err
	}
	s.stats.Cached = true
	lc, counts := s.m.Device().(launchCounter)
	var first time.Time
	var l0 int64
	// Tokens 1.. are launched up to ahead draws before their ids are
	// collected, so that the device runs the next token while the host
	// takes this one's ids (KVCache.Launch). Launching stops while a
	// sequence's cache is full: its slide needs every id drawn so far.
	launched := 1 // draws queued: token 0's Sample, then Launches
	for i := range n {
		var ids []int32
		var err error
		if i == 0 {
			ids, err = c.Sample(s.sampling())
		} else {
			for err == nil && launched < n && launched-i < ahead && !anyFull(c, B) {
				err = c.Launch(s.sampling())
				launched++
				if counts && launched == 2 { // after the first decode draw: its plain run and capture
					l0 = lc.Launches()
				}
			}
			if err == nil {
				ids, err = c.Collect()
			}
		}
		if err != nil {
			return err
		}
		for b, id := range ids {
			if err := s.checkID(id, b, i); err != nil {
				return err
			}
			if err := s.took(b, seqs[b], id, emit); err != nil {
				return err
			}
		}
		if i == 0 {
			first = time.Now()
			s.stats.Prefill = first.Sub(start)
		}
		if i == n-1 {
			break
		}
		if c.Ahead() > 0 {
			continue // a full sequence slides once the draws before it are taken
		}
		for b, q := range seqs {
			if c.Full(b) { // refill from the last S/2 tokens before the one just drawn
				hist := q.toks[:len(q.toks)-1]
				if err := c.Prefill(b, hist[len(hist)-S/2:]); err != nil {
					return err
				}
				s.stats.Slides++
			}
		}
	}
	s.stats.Decode = time.Since(first)
	if counts && launched > 2 {
		s.stats.LaunchesPerToken = float64(lc.Launches()-l0) / float64(launched-2)
	}
	if _, ok := s.m.Device().(device.Grapher); ok {
		s.stats.Graph = "graph"
		if c.GraphWhy != "" {
			s.stats.Graph = "plain: " + c.GraphWhy
		}
	}
	return nil
}

// ahead is the most decode draws the sampler keeps queued beyond the one
// whose ids it waits for: two, so that a token's ids are on the host while
// the next runs, and the one after is queued before that ends.
const ahead = 2

// anyFull reports whether a sequence's cache has no room for another step.
func anyFull(c *gpt.KVCache, B int) bool {
	for b := range B {
		if c.Full(b) {
			return true
		}
	}
	return false
}

// recompute generates by running the last MaxSeq tokens of each sequence
// through the model for every token (padded after their end: attention is
// causal, so padding does not change the logits at the last real
// position), drawing on the host by the same rule as SampleHead.
func (s *Sampler) recompute(seqs []*sequence, n int, emit func(int, string) error, start time.Time) error {
	m := s.m
	T, V := m.Config.MaxSeq, m.Config.Vocab
	ctx := make([]int32, T)
	var first time.Time
	for i := range n {
		for b, q := range seqs {
			window := q.toks[max(0, len(q.toks)-T):]
			clear(ctx)
			copy(ctx, window)
			if _, err := m.Forward(ctx, nil, 1, T); err != nil {
				return err
			}
			row, err := m.LogitsAt(len(window) - 1) // only the last position's logits
			if err != nil {
				return err
			}
			st := s.index[q.st]
			u := device.Uniform(s.seed+uint64(b), uint32(i))
			id, e := device.SampleRow(row, s.table[st*V:(st+1)*V], n-i-1, s.sampling(), u, &s.sc)
			if err := s.checkID(int32(id), b, i); err != nil {
				return err
			}
			_ = e
			if err := s.took(b, q, int32(id), emit); err != nil {
				return err
			}
		}
		if i == 0 {
			first = time.Now()
			s.stats.Prefill = first.Sub(start)
		}
	}
	s.stats.Decode = time.Since(first)
	return nil
}

// stateIndex returns the table row of state st, adding the rows of every
// state reachable from it first.
func (s *Sampler) stateIndex(st utf8State) int {
	if i, ok := s.index[st]; ok {
		return i
	}
	V := s.m.Config.Vocab
	todo := []utf8State{st}
	s.index[st] = len(s.states)
	s.states = append(s.states, st)
	for len(todo) > 0 {
		cur := todo[0]
		todo = todo[1:]
		row := make([]int32, V)
		for id := range V {
			row[id] = device.TableNo
			b := s.tok.Token(int32(id))
			if len(b) == 0 || id >= s.tok.Vocab() {
				continue
			}
			e := cur
			for _, c := range b {
				if e = e.step(c); e.bad {
					break
				}
			}
			if e.bad {
				continue
			}
			j, ok := s.index[e]
			if !ok {
				j = len(s.states)
				s.index[e] = j
				s.states = append(s.states, e)
				todo = append(todo, e)
			}
			row[id] = device.TableEntry(j, int(e.need))
		}
		// rows are appended in index order: states are added to todo in
		// the order of their indexes
		s.table = append(s.table, row...)
	}
	return s.index[st]
}

// utf8State is where a byte stream stands in UTF-8: need more continuation
// bytes are due, the next one in [lo, hi]. The zero value is "between
// characters"; a stream that broke UTF-8 is bad.
type utf8State struct {
	need   int8
	lo, hi byte
	bad    bool
}

// step returns the state after byte b.
func (st utf8State) step(b byte) utf8State {
	if st.bad {
		return st
	}
	if st.need > 0 {
		if b < st.lo || b > st.hi {
			return utf8State{bad: true}
		}
		return utf8State{need: st.need - 1, lo: 0x80, hi: 0xbf}
	}
	switch {
	case b < 0x80:
		return utf8State{}
	case b >= 0xc2 && b <= 0xdf:
		return utf8State{need: 1, lo: 0x80, hi: 0xbf}
	case b == 0xe0:
		return utf8State{need: 2, lo: 0xa0, hi: 0xbf}
	case b == 0xed: // no surrogates
		return utf8State{need: 2, lo: 0x80, hi: 0x9f}
	case b >= 0xe1 && b <= 0xef:
		return utf8State{need: 2, lo: 0x80, hi: 0xbf}
	case b == 0xf0:
		return utf8State{need: 3, lo: 0x90, hi: 0xbf}
	case b >= 0xf1 && b <= 0xf3:
		return utf8State{need: 3, lo: 0x80, hi: 0xbf}
	case b == 0xf4:
		return utf8State{need: 3, lo: 0x80, hi: 0x8f}
	}
	return utf8State{bad: true}
}

// advance returns the state after the bytes of a token; a prompt's state
// that broke UTF-8 starts afresh (the prompt was valid text, so this only
// happens for prompt tokens the caller made up).
func (st utf8State) advance(b []byte) utf8State {
	for _, c := range b {
		st = st.step(c)
	}
	if st.bad {
		return utf8State{}
	}
	return st
}

// Generate continues prompt by n tokens with model m, drawing from the
// softmax at temperature (0 picks the most likely token) with rng. A model
// of vocabulary 256 is taken as byte-level and emits only valid UTF-8 (see
// Sampler); for other vocabularies use a Sampler with the tokenizer.
func Generate(m *gpt.Model, rng *tensor.RNG, prompt []int32, n int, temperature float32) ([]int32, error) {
	var tok data.Tokenizer = allTokens(m.Config.Vocab)
	if m.Config.Vocab == data.VocabSize {
		tok = data.Bytes{}
	}
	o := SampleOptions{Temperature: temperature}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	s := newSampler(m, tok, o, rng.Uint64())
	defer s.Close()
	return s.Generate(prompt, n, nil)
}

// Unmasked returns a tokenizer of V ids that allows every id at every step
// (no UTF-8 rule): for sampling token ids whose text does not matter, as a
// comparison with another program's argmax does.
func Unmasked(V int) data.Tokenizer { return allTokens(V) }

// allTokens stands for a tokenizer not known: every id is allowed (as one
// ASCII byte, which keeps the UTF-8 state between characters).
type allTokens int

func (v allTokens) Name() string                     { return "unknown" }
func (v allTokens) Vocab() int                       { return int(v) }
func (v allTokens) Encode([]byte) ([]int32, error)   { return nil, fmt.Errorf("train: no tokenizer") }
func (v allTokens) Decode(t []int32) ([]byte, error) { return make([]byte, len(t)), nil }
func (v allTokens) Token(id int32) []byte            { return []byte{'?'} }
