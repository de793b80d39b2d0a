package train

import (
	"math"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/druto/druto/internal/aheadtest"
	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/data"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/tensor"
)

func randomModel(t *testing.T, cfg gpt.Config, seed uint64) *gpt.Model {
	t.Helper()
	m, err := gpt.New(cpu.New(device.Options{Fused: true}), cfg, amp.FP32)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Init(seed); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// TestSampleValidUTF8 samples 10,000 tokens from a random-init byte model,
// whose draws are close to uniform over the 256 bytes, and checks that the
// text is valid UTF-8 (also with top-k and top-p); without the mask the
// same model's bytes are not.
func TestSampleValidUTF8(t *testing.T) {
	m := randomModel(t, testCfg, 1)
	for _, o := range []SampleOptions{
		{Temperature: 1, Seed: 1},
		{Temperature: 1.5, TopK: 40, Seed: 2},
		{Temperature: 1, TopP: 0.9, Seed: 3},
	} {
		n := 10000
		if o.Seed > 1 {
			n = 2000
		}
		s, err := NewSampler(m, data.Bytes{}, o)
		if err != nil {
			t.Fatal(err)
		}
		var streamed strings.Builder
		pieces := 0
		toks, err := s.Generate([]int32{'R'}, n, func(p string) error {
			if !utf8.ValidString(p) {
				t.Fatalf("streamed piece %q is not valid UTF-8", p)
			}
			pieces++
			streamed.WriteString(p)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := data.Decode(toks)
		if len(toks) != n || !utf8.Valid(b) {
			t.Fatalf("%+v: %d tokens (want %d), valid UTF-8 %v", o, len(toks), n, utf8.Valid(b))
		}
		if streamed.String() != string(b) || pieces < 2 {
			t.Fatalf("%+v: the stream (%d pieces) differs from the result", o, pieces)
		}
		if o.Seed == 1 && utf8.RuneCount(b) == len(b) {
			t.Fatalf("10,000 random bytes without one multi-byte character: the mask test has no teeth")
		}
	}
	// The old API masks too, for a vocabulary of 256.
	out, err := Generate(m, tensor.NewRNG(5), nil, 3000, 1)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := data.Decode(out); !utf8.Valid(b) {
		t.Fatal("Generate on a byte model gave invalid UTF-8")
	}
	// Unmasked, the same model breaks UTF-8: the mask is doing the work.
	raw, err := newSampler(m, allTokens(256), SampleOptions{Temperature: 1}, 5).Generate(nil, 3000, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := data.Decode(raw); utf8.Valid(b) {
		t.Fatal("unmasked sampling of a random model gave valid UTF-8; the test model is not random enough")
	}
}

// TestSampleOptions checks greedy, top-k 1 and a tiny top-p agree, that the
// seed decides the draws, and that bad options are refused.
func TestSampleOptions(t *testing.T) {
	m := randomModel(t, testCfg, 2)
	gen := func(o SampleOptions) []int32 {
		s, err := NewSampler(m, nil, o)
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.Generate([]int32{'a'}, 60, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	greedy := gen(SampleOptions{})
	if !slices.Equal(greedy, gen(SampleOptions{Temperature: 1, TopK: 1, Seed: 9})) ||
		!slices.Equal(greedy, gen(SampleOptions{Temperature: 1, TopP: 1e-6, Seed: 9})) {
		t.Error("top-k 1 or top-p 1e-6 differs from greedy")
	}
	a, b := gen(SampleOptions{Temperature: 1, Seed: 4}), gen(SampleOptions{Temperature: 1, Seed: 4})
	c := gen(SampleOptions{Temperature: 1, Seed: 5})
	if !slices.Equal(a, b) || slices.Equal(a, c) {
		t.Error("the same seed must give the same sample and another seed another")
	}
	for _, o := range []SampleOptions{{Temperature: float32(math.NaN())}, {Temperature: -1}, {Temperature: float32(math.Inf(1))}, {TopK: -1}, {TopP: 1.5}, {TopP: float32(math.NaN())}} {
		if _, err := NewSampler(m, nil, o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	big, err := data.GPT2()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewSampler(m, big, SampleOptions{}); err == nil {
		t.Error("a 50257-token tokenizer accepted for a 256-token model")
	}
}

// TestSampleBPEAndGPT2 samples from random models with the GPT-2 and a
// trained BPE vocabulary (padded): no padding id is drawn, the text is
// valid UTF-8, and Sample returns what it streamed.
func TestSampleBPEAndGPT2(t *testing.T) {
	g, err := data.GPT2()
	if err != nil {
		t.Fatal(err)
	}
	bpe, err := data.TrainBPE(data.Corpus(1, 32<<10), 300)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []data.Tokenizer{g, bpe} {
		cfg := gpt.Config{Vocab: PaddedVocab(tok.Vocab()), MaxSeq: 16, Layers: 1, Heads: 2, Channels: 16}
		m := randomModel(t, cfg, 3)
		s, err := NewSampler(m, tok, SampleOptions{Temperature: 1.2, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		text, err := s.Sample("রিনা ", 300, &sb)
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.ValidString(text) || strings.ContainsRune(text, utf8.RuneError) || sb.String() != text {
			t.Fatalf("%s: sample %q (streamed %q)", tok.Name(), text, sb.String())
		}
		ids, err := s.Generate(nil, 200, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if int(id) >= tok.Vocab() {
				t.Fatalf("%s: drew padding id %d (vocab %d)", tok.Name(), id, tok.Vocab())
			}
		}
	}
}

// TestCacheMatchesRecompute: within the context, greedy generation over the
// key/value cache gives the tokens of recomputing the window every token
// (fp32, CPU), for a byte model with its UTF-8 masks and a model with none.
func TestCacheMatchesRecompute(t *testing.T) {
	m := randomModel(t, testCfg, 7)
	for _, tok := range []data.Tokenizer{data.Bytes{}, allTokens(testCfg.Vocab)} {
		gen := func(host bool) []int32 {
			s := newSampler(m, tok, SampleOptions{}, 1)
			defer s.Close()
			s.host = host
			out, err := s.Generate([]int32{'T', 'h', 'e'}, testCfg.MaxSeq-3, nil)
			if err != nil {
				t.Fatal(err)
			}
			if st := s.Stats(); st.Cached == host || st.Slides != 0 {
				t.Fatalf("host %v: stats %+v", host, st)
			}
			return out
		}
		cached, recomputed := gen(false), gen(true)
		if !slices.Equal(cached, recomputed) {
			t.Fatalf("%s: cache %v\nrecompute %v", tok.Name(), cached, recomputed)
		}
	}
}

// TestSlidingWindow: past the context, a full cache is refilled from the
// last MaxSeq/2 tokens, and what follows is what a fresh generation from
// those tokens gives; the generation never stops or emits garbage.
func TestSlidingWindow(t *testing.T) {
	m := randomModel(t, testCfg, 8)
	S := testCfg.MaxSeq
	tok := allTokens(testCfg.Vocab)
	s := newSampler(m, tok, SampleOptions{}, 1)
	defer s.Close()
	prompt := []int32{1, 2, 3}
	n := 2*S + 5
	out, err := s.Generate(prompt, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != n || s.Stats().Slides < 2 {
		t.Fatalf("%d tokens (want %d), %d slides", len(out), n, s.Stats().Slides)
	}
	all := append(append([]int32{}, prompt...), out...)
	// The first slide comes when the cache holds S positions: the token
	// drawn then (index S of all) is appended after the last S/2 before it.
	first := S
	window := all[first-S/2 : first+1]
	fresh := newSampler(m, tok, SampleOptions{}, 1)
	defer fresh.Close()
	k := S/2 - 2
	cont, err := fresh.Generate(window, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cont, all[first+1:first+1+k]) {
		t.Fatalf("after the slide: %v\nfresh from the window: %v", all[first+1:first+1+k], cont)
	}
}

// TestBatchedEqualsAlone: prompts of different lengths generated in one
// batch give, with temperature and top-k, the tokens each gives alone with
// the seed of its row (seed + b).
func TestBatchedEqualsAlone(t *testing.T) {
	m := randomModel(t, testCfg, 9)
	o := SampleOptions{Temperature: 1, TopK: 20, Seed: 40}
	prompts := [][]int32{{'a'}, {'T', 'h', 'e', ' ', 'c'}, {}}
	s, err := NewSampler(m, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	batch, err := s.GenerateBatch(prompts, 40, nil)
	if err != nil {
		t.Fatal(err)
	}
	for b, p := range prompts {
		ob := o
		ob.Seed = o.Seed + uint64(b)
		one, err := NewSampler(m, nil, ob)
		if err != nil {
			t.Fatal(err)
		}
		alone, err := one.Generate(p, 40, nil)
		one.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(batch[b], alone) {
			t.Errorf("prompt %d: batched %v\nalone %v", b, batch[b], alone)
		}
	}
}

// countingGrapher is replayGrapher counting its graph launches as a GPU
// device counts launches (a plain op on the CPU counts none here).
type countingGrapher struct {
	replayGrapher
	launches int64
}

type countingGraph struct {
	device.Graph
	c *countingGrapher
}

func (g countingGraph) Launch() error { g.c.launches++; return g.Graph.Launch() }

func (c *countingGrapher) Capture(fn func() error) (device.Graph, error) {
	g, err := c.replayGrapher.Capture(fn)
	return countingGraph{g, c}, err
}

func (c *countingGrapher) Launches() int64 { return c.launches }

// TestSampleGraphStats: on a device that captures graphs, the stats say the
// decode steps ran as one graph launch a token (the steps after the
// capture), the tokens equal the plain device's; where capture fails they
// say why.
func TestSampleGraphStats(t *testing.T) {
	const n = 12
	gen := func(dev device.Device) ([]int32, SampleStats) {
		m, err := gpt.New(dev, testCfg, amp.FP32)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if err := m.Init(3); err != nil {
			t.Fatal(err)
		}
		s := newSampler(m, data.Bytes{}, SampleOptions{}, 1)
		defer s.Close()
		out, err := s.Generate([]int32{'a', 'b'}, n, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out, s.Stats()
	}
	plain, pst := gen(cpu.New(device.Options{Fused: true}))
	if pst.Graph != "" || pst.LaunchesPerToken != 0 {
		t.Fatalf("plain CPU device: graph %q, %.1f launches a token; want none", pst.Graph, pst.LaunchesPerToken)
	}
	cg := &countingGrapher{replayGrapher: replayGrapher{Device: cpu.New(device.Options{Fused: true})}}
	graphed, gst := gen(cg)
	if !slices.Equal(plain, graphed) {
		t.Fatalf("graph tokens %v, plain %v", graphed, plain)
	}
	if gst.Graph != "graph" || gst.LaunchesPerToken != 1 || cg.captures != 1 {
		t.Fatalf("graph device: graph %q, %.2f launches a token, %d captures; want graph, 1, 1", gst.Graph, gst.LaunchesPerToken, cg.captures)
	}
	_, fst := gen(&fakeGrapher{Device: cpu.New(device.Options{Fused: true})})
	if !strings.HasPrefix(fst.Graph, "plain: ") || !strings.Contains(fst.Graph, "NOT_SUPPORTED") {
		t.Fatalf("failing capture: graph %q; want plain: and the cause", fst.Graph)
	}
}

// aheadGrapher is replayGrapher with device.Fetcher as the GPU's works
// (aheadtest).
type aheadGrapher struct {
	replayGrapher
	aheadtest.Fetcher
}

// TestSampleAhead: on a device that fetches without waiting, the sampler
// keeps the next draw queued while it takes a token's ids, and a batch of
// prompts with temperature, top-k and two slides past the context gives
// the plain device's tokens.
func TestSampleAhead(t *testing.T) {
	n := 2*testCfg.MaxSeq + 5
	gen := func(dev device.Device) [][]int32 {
		m, err := gpt.New(dev, testCfg, amp.FP32)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if err := m.Init(5); err != nil {
			t.Fatal(err)
		}
		s, err := NewSampler(m, nil, SampleOptions{Temperature: 1, TopK: 20, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		out, err := s.GenerateBatch([][]int32{{'a'}, {'T', 'h', 'e', ' '}}, n, nil)
		if err != nil {
			t.Fatal(err)
		}
		if s.Stats().Slides < 2 {
			t.Fatalf("%T: %d slides, want at least 2", dev, s.Stats().Slides)
		}
		return out
	}
	want := gen(cpu.New(device.Options{Fused: true}))
	ag := &aheadGrapher{replayGrapher: replayGrapher{Device: cpu.New(device.Options{Fused: true})}}
	got := gen(ag)
	for b := range want {
		if !slices.Equal(got[b], want[b]) {
			t.Fatalf("sequence %d: launched ahead %v\none at a time %v", b, got[b], want[b])
		}
	}
	if ag.Most != ahead || ag.Overlapped < n/2 || ag.Out != 0 {
		t.Errorf("fetches: at most %d waiting (want %d), %d of %d queued while another waited, %d never waited", ag.Most, ahead, ag.Overlapped, n, ag.Out)
	}
}
