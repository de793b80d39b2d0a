package train

import (
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/druto/druto/pkg/data"
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

// Sampler generates text from a model one token at a time. It only ever
// draws a token whose bytes continue valid UTF-8 (the others are masked out
// before the draw, as are ids that the tokenizer cannot decode, such as the
// padding of a GPT-2 vocabulary), and in the last steps only tokens that
// leave room to finish the character, so the text never ends inside one.
type Sampler struct {
	m    *gpt.Model
	tok  data.Tokenizer
	opts SampleOptions
	rng  *tensor.RNG

	masks map[utf8State]*stateMask
	order []int     // candidate ids, sorted by logit for top-k/top-p
	probs []float64 // scratch
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
	return newSampler(m, tok, o, tensor.NewRNG(o.Seed)), nil
}

func newSampler(m *gpt.Model, tok data.Tokenizer, o SampleOptions, rng *tensor.RNG) *Sampler {
	return &Sampler{m: m, tok: tok, opts: o, rng: rng, masks: map[utf8State]*stateMask{}}
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
// when not nil, receives the text as it forms whole characters. The context
// is the last MaxSeq tokens, padded after its end: attention is causal, so
// padding does not change the logits at the last real position.
func (s *Sampler) Generate(prompt []int32, n int, emit func(string) error) ([]int32, error) {
	if n < 0 {
		return nil, fmt.Errorf("train: %d tokens to generate must not be negative", n)
	}
	m := s.m
	T, V := m.Config.MaxSeq, m.Config.Vocab
	for i, t := range prompt {
		if t < 0 || int(t) >= V {
			return nil, fmt.Errorf("train: prompt token %d at %d is outside the model's vocabulary of %d", t, i, V)
		}
	}
	out := append([]int32(nil), prompt...)
	if len(out) == 0 {
		nl, err := s.tok.Encode([]byte("\n"))
		if err != nil || len(nl) == 0 {
			nl = []int32{0}
		}
		out = append(out, nl...)
	}
	start := len(out)
	// The prompt may itself end inside a character.
	st := utf8State{}
	for _, t := range out {
		st = st.advance(s.tok.Token(t))
	}
	var pending []byte
	ctx := make([]int32, T)
	for i := 0; i < n; i++ {
		window := out
		if len(window) > T {
			window = window[len(window)-T:]
		}
		clear(ctx)
		copy(ctx, window)
		if _, err := m.Forward(ctx, nil, 1, T); err != nil {
			return nil, err
		}
		// Only the last position's logits: no (T, V) buffer.
		row, err := m.LogitsAt(len(window) - 1)
		if err != nil {
			return nil, err
		}
		for j, v := range row {
			if !finite(float64(v)) {
				return nil, fmt.Errorf("train: the model's logit %d is %v at generated token %d: its outputs are not finite, so nothing can be sampled", j, v, i+1)
			}
		}
		id, err := s.pick(row, st, n-i-1)
		if err != nil {
			return nil, err
		}
		out = append(out, int32(id))
		b := s.tok.Token(int32(id))
		st = st.advance(b)
		pending = append(pending, b...)
		if emit != nil && st.need == 0 && len(pending) > 0 {
			if err := emit(string(pending)); err != nil {
				return nil, fmt.Errorf("train: stream: %w", err)
			}
			pending = pending[:0]
		}
	}
	if emit != nil && len(pending) > 0 { // a prompt ending inside a character
		if err := emit(string(pending)); err != nil {
			return nil, fmt.Errorf("train: stream: %w", err)
		}
	}
	return out[start:], nil
}

// pick draws the next token from row among the tokens allowed after state
// st with left tokens to come after this one.
func (s *Sampler) pick(row []float32, st utf8State, left int) (int, error) {
	mk := s.mask(st)
	ok := func(id int) bool { return mk.allowed[id] && int(mk.need[id]) <= left }
	best := -1
	for id := range mk.allowed {
		if ok(id) && (best < 0 || row[id] > row[best]) {
			best = id
		}
	}
	if best < 0 {
		return 0, fmt.Errorf("train: no token of the %s tokenizer continues valid UTF-8 here", s.tok.Name())
	}
	o := s.opts
	if o.Temperature <= 0 {
		return best, nil
	}
	s.order = s.order[:0]
	for id := range mk.allowed {
		if ok(id) {
			s.order = append(s.order, id)
		}
	}
	filter := o.TopK > 0 && o.TopK < len(s.order) || o.TopP > 0 && o.TopP < 1
	if filter {
		sort.SliceStable(s.order, func(a, b int) bool { return row[s.order[a]] > row[s.order[b]] })
		if o.TopK > 0 && o.TopK < len(s.order) {
			s.order = s.order[:o.TopK]
		}
	}
	s.probs = s.probs[:0]
	var sum float64
	for _, id := range s.order {
		p := math.Exp(float64(row[id]-row[best]) / float64(o.Temperature))
		s.probs = append(s.probs, p)
		sum += p
	}
	if o.TopP > 0 && o.TopP < 1 {
		var c float64
		for i, p := range s.probs {
			c += p
			if c >= float64(o.TopP)*sum {
				s.order, s.probs, sum = s.order[:i+1], s.probs[:i+1], c
				break
			}
		}
	}
	r := s.rng.Float64() * sum
	for i, p := range s.probs {
		r -= p
		if r < 0 {
			return s.order[i], nil
		}
	}
	return s.order[len(s.order)-1], nil
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

// stateMask is, for one state, which tokens may follow and how many
// continuation bytes each then leaves due.
type stateMask struct {
	allowed []bool
	need    []int8
}

func (s *Sampler) mask(st utf8State) *stateMask {
	if mk, ok := s.masks[st]; ok {
		return mk
	}
	V := s.m.Config.Vocab
	mk := &stateMask{allowed: make([]bool, V), need: make([]int8, V)}
	for id := 0; id < V; id++ {
		b := s.tok.Token(int32(id))
		if len(b) == 0 {
			continue
		}
		e := st
		for _, c := range b {
			if e = e.step(c); e.bad {
				break
			}
		}
		mk.allowed[id], mk.need[id] = !e.bad, e.need
	}
	s.masks[st] = mk
	return mk
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
	return newSampler(m, tok, o, rng).Generate(prompt, n, nil)
}

// allTokens stands for a tokenizer not known: every id is allowed (as one
// ASCII byte, which keeps the UTF-8 state between characters).
type allTokens int

func (v allTokens) Name() string                     { return "unknown" }
func (v allTokens) Vocab() int                       { return int(v) }
func (v allTokens) Encode([]byte) ([]int32, error)   { return nil, fmt.Errorf("train: no tokenizer") }
func (v allTokens) Decode(t []int32) ([]byte, error) { return make([]byte, len(t)), nil }
func (v allTokens) Token(id int32) []byte            { return []byte{'?'} }
