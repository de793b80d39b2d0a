package gpt

import (
	"slices"
	"testing"

	"github.com/druto/druto/internal/aheadtest"
	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/tensor"
)

// decodeConfig is a small model whose context the tests fill.
var decodeConfig = Config{Vocab: 67, MaxSeq: 24, Layers: 2, Heads: 2, Channels: 32}

func decodeModel(t *testing.T, p amp.Policy, seed uint64) *Model {
	t.Helper()
	m, err := New(cpu.New(device.Options{Fused: true, Threads: 2}), decodeConfig, p)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Init(seed); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// fullLogits returns the logits at the last position of seq from the
// training forward over the whole sequence (no cache).
func fullLogits(t *testing.T, m *Model, seq []int32) []float32 {
	t.Helper()
	if _, err := m.Forward(seq, nil, 1, len(seq)); err != nil {
		t.Fatal(err)
	}
	row, err := m.LogitsAt(len(seq) - 1)
	if err != nil {
		t.Fatal(err)
	}
	return row
}

func randTokens(rng *tensor.RNG, n, V int) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = int32(rng.Intn(V))
	}
	return s
}

// TestKVCacheMatchesForward: at every step, prefill and then decode with the
// cache give the logits of the full forward over the same tokens, within
// the tolerance rule of the policy's activation dtype, up to a full context.
func TestKVCacheMatchesForward(t *testing.T) {
	for _, p := range []amp.Policy{amp.FP32, amp.BF16, amp.FP16} {
		m := decodeModel(t, p, 3)
		c, err := m.NewKVCache(1)
		if err != nil {
			t.Fatal(err)
		}
		rng := tensor.NewRNG(9)
		seq := randTokens(rng, 5, decodeConfig.Vocab)
		if err := c.Prefill(0, seq); err != nil {
			t.Fatal(err)
		}
		dt := p.DType(amp.Activation)
		// 16-bit: the cache path keeps the attention probabilities in fp32
		// where the training forward rounds them, and each layer's output is
		// rounded again: a few roundings of the dtype through two layers.
		scale := map[tensor.DType]float64{tensor.F32: 4, tensor.BF16: 8, tensor.F16: 8}[dt]
		for step := 0; ; step++ {
			got, err := c.Logits()
			if err != nil {
				t.Fatal(err)
			}
			want := fullLogits(t, m, seq)
			if err := tensor.CloseF32(got, want, dt, scale); err != nil {
				t.Fatalf("%s: step %d (%d positions): %v", p, step, len(seq), err)
			}
			if c.Full(0) {
				break
			}
			next := int32(rng.Intn(decodeConfig.Vocab))
			seq = append(seq, next)
			if err := c.Step([]int32{next}); err != nil {
				t.Fatal(err)
			}
		}
		if len(seq) != decodeConfig.MaxSeq {
			t.Fatalf("%s: compared up to %d positions, want the whole context %d", p, len(seq), decodeConfig.MaxSeq)
		}
		c.Close()
	}
}

// TestKVCacheBatched: sequences of different lengths decoded in one batch
// give the logits each gives alone, bit for bit (every row's ops are the
// same computation whatever the batch).
func TestKVCacheBatched(t *testing.T) {
	m := decodeModel(t, amp.FP32, 5)
	rng := tensor.NewRNG(11)
	prompts := [][]int32{randTokens(rng, 3, 67), randTokens(rng, 9, 67), randTokens(rng, 1, 67)}
	steps := make([][]int32, 6)
	for i := range steps {
		steps[i] = randTokens(rng, len(prompts), 67)
	}
	run := func(c *KVCache, rows []int) [][]float32 {
		var out [][]float32
		for j, b := range rows {
			if err := c.Prefill(j, prompts[b]); err != nil {
				t.Fatal(err)
			}
		}
		for s := 0; s <= len(steps); s++ {
			l, err := c.Logits()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, l)
			if s == len(steps) {
				break
			}
			toks := make([]int32, len(rows))
			for j, b := range rows {
				toks[j] = steps[s][b]
			}
			if err := c.Step(toks); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	all, err := m.NewKVCache(3)
	if err != nil {
		t.Fatal(err)
	}
	batched := run(all, []int{0, 1, 2})
	V := decodeConfig.Vocab
	for b := range prompts {
		one, err := m.NewKVCache(1)
		if err != nil {
			t.Fatal(err)
		}
		alone := run(one, []int{b})
		for s := range alone {
			got, want := batched[s][b*V:(b+1)*V], alone[s]
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("sequence %d step %d logit %d: batched %v, alone %v", b, s, i, got[i], want[i])
				}
			}
		}
		one.Close()
	}
}

// TestKVCacheErrors: bad calls are refused with errors, never a panic.
func TestKVCacheErrors(t *testing.T) {
	m := decodeModel(t, amp.FP32, 1)
	c, err := m.NewKVCache(2)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Step([]int32{1, 2}); err == nil {
		t.Error("a step before any prefill was accepted")
	}
	if err := c.Prefill(0, nil); err == nil {
		t.Error("an empty prompt was accepted")
	}
	if err := c.Prefill(2, []int32{1}); err == nil {
		t.Error("sequence 2 of a cache of 2 was accepted")
	}
	if err := c.Prefill(0, make([]int32, decodeConfig.MaxSeq+1)); err == nil {
		t.Error("a prompt longer than the context was accepted")
	}
	if err := c.Prefill(0, []int32{67}); err == nil {
		t.Error("a token outside the vocabulary was accepted")
	}
	if _, err := m.NewKVCache(0); err == nil {
		t.Error("a cache of 0 sequences was accepted")
	}
}

// replayDev is a CPU device that "captures" a graph by keeping the function
// and replays it by running it again: what a CUDA graph does, on the CPU,
// so that Next's graph path runs here.
type replayDev struct {
	*cpu.Device
	captures, launches int
}

type replayGraph struct {
	d  *replayDev
	fn func() error
}

func (g *replayGraph) Launch() error { g.d.launches++; return g.fn() }
func (g *replayGraph) Close() error  { return nil }

func (d *replayDev) Capture(fn func() error) (device.Graph, error) {
	d.captures++
	return &replayGraph{d, fn}, nil
}

// primedSequences is twoSequences with the prompts {1, 2, 3} and {9}
// prefilled and the rows' sampling state set (100 tokens left, seeds 5
// and 6).
func primedSequences(t *testing.T, dev device.Device) *KVCache {
	t.Helper()
	c := twoSequences(t, dev)
	for b, p := range [][]int32{{1, 2, 3}, {9}} {
		if err := c.Prefill(b, p); err != nil {
			t.Fatal(err)
		}
	}
	rows := make([]int32, 2*device.RowLen)
	rows[device.RowLeft], rows[device.RowLen+device.RowLeft] = 100, 100
	rows[device.RowSeedLo], rows[device.RowLen+device.RowSeedLo] = 5, 6
	if err := c.SetRows(rows); err != nil {
		t.Fatal(err)
	}
	return c
}

// twoSequences opens decodeConfig's fp32 model (Init(4)) on dev with a
// cache of two sequences, both closed when the test ends.
func twoSequences(t *testing.T, dev device.Device) *KVCache {
	m, err := New(dev, decodeConfig, amp.FP32)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	if err := m.Init(4); err != nil {
		t.Fatal(err)
	}
	c, err := m.NewKVCache(2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestKVCacheNextGraph: Next through a graph (captured once, replayed for
// every later token) draws what Step and Sample draw without one, and a
// change of the sampling options captures again.
func TestKVCacheNextGraph(t *testing.T) {
	run := func(dev device.Device, o []device.Sampling) [][]int32 {
		c := primedSequences(t, dev)
		ids, err := c.Sample(o[0])
		if err != nil {
			t.Fatal(err)
		}
		out := [][]int32{ids}
		for i := 1; i < len(o); i++ {
			if _, graphs := dev.(*replayDev); graphs {
				ids, err = c.Next(o[i])
			} else {
				if err = c.Step(nil); err == nil {
					ids, err = c.Sample(o[i])
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, ids)
		}
		return out
	}
	var o []device.Sampling
	for i := range 12 {
		s := device.Sampling{Temperature: 1, TopK: 10}
		if i >= 7 {
			s.Temperature = 0.5
		}
		o = append(o, s)
	}
	rd := &replayDev{Device: cpu.New(device.Options{Fused: true, Threads: 2})}
	got := run(rd, o)
	want := run(cpu.New(device.Options{Fused: true, Threads: 2}), o)
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("token %d: through the graph %v, plainly %v", i, got[i], want[i])
		}
	}
	// Captured at the first Next and again when the temperature changed;
	// replayed for the other tokens.
	if rd.captures != 2 || rd.launches != 11-2 {
		t.Errorf("%d captures and %d launches, want 2 and 9", rd.captures, rd.launches)
	}
}

// batchDev is the CPU device with device.Batcher: it counts the hand-offs
// and records a Batch inside another.
type batchDev struct {
	*cpu.Device
	batches int
	depth   int
	nested  bool
}

func (d *batchDev) Batch(fn func() error) error {
	d.batches++
	d.depth++
	defer func() { d.depth-- }()
	if d.depth > 1 {
		d.nested = true
	}
	return fn()
}

// TestKVCacheBatches: on a device with device.Batcher, each of Prefill,
// Sample, Step and Next is one hand-off (the GPU's per-op hops were most of
// a token's host time), never one inside another, and draws what it draws
// without one.
func TestKVCacheBatches(t *testing.T) {
	run := func(dev device.Device) ([][]int32, int) {
		c := twoSequences(t, dev)
		calls := 0
		for b, p := range [][]int32{{1, 2, 3}, {9}} {
			if err := c.Prefill(b, p); err != nil {
				t.Fatal(err)
			}
			calls++
		}
		rows := make([]int32, 2*device.RowLen)
		rows[device.RowLeft], rows[device.RowLen+device.RowLeft] = 100, 100
		if err := c.SetRows(rows); err != nil {
			t.Fatal(err)
		}
		o := device.Sampling{Temperature: 1, TopK: 10}
		var out [][]int32
		for i := range 5 {
			var ids []int32
			var err error
			switch i {
			case 0:
				ids, err = c.Sample(o)
				calls++
			case 2:
				if err = c.Step(nil); err == nil {
					ids, err = c.Sample(o)
				}
				calls += 2
			default:
				ids, err = c.Next(o)
				calls++
			}
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, ids)
		}
		return out, calls
	}
	want, _ := run(cpu.New(device.Options{Fused: true, Threads: 2}))
	bd := &batchDev{Device: cpu.New(device.Options{Fused: true, Threads: 2})}
	got, calls := run(bd)
	if bd.batches != calls || bd.nested {
		t.Errorf("%d hand-offs (nested: %v) for %d cache calls; want one each, none nested", bd.batches, bd.nested, calls)
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("token %d: %v with Batch, %v without", i, got[i], want[i])
		}
	}
}

// aheadDev is replayDev with device.Fetcher as the GPU's works
// (aheadtest).
type aheadDev struct {
	replayDev
	aheadtest.Fetcher
}

// TestKVCacheLaunchAhead: draws launched ahead and collected later are the
// draws Next makes one at a time, on a device that fetches without waiting
// and on one that does not; misuse is an error, and Prefill drops the
// draws not collected.
func TestKVCacheLaunchAhead(t *testing.T) {
	o := device.Sampling{Temperature: 1, TopK: 10}
	start := func(dev device.Device) *KVCache {
		c := primedSequences(t, dev)
		if _, err := c.Sample(o); err != nil {
			t.Fatal(err)
		}
		return c
	}
	const n = 10
	ref := start(cpu.New(device.Options{Fused: true, Threads: 2}))
	var want [][]int32
	for range n {
		ids, err := ref.Next(o)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, ids)
	}
	for _, dev := range []device.Device{&aheadDev{replayDev: replayDev{Device: cpu.New(device.Options{Fused: true, Threads: 2})}},
		cpu.New(device.Options{Fused: true, Threads: 2})} {
		c := start(dev)
		var got [][]int32
		launched := 0
		for len(got) < n {
			for launched < n && c.Ahead() < 3 {
				if err := c.Launch(o); err != nil {
					t.Fatal(err)
				}
				launched++
			}
			ids, err := c.Collect()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ids)
		}
		for i := range want {
			if !slices.Equal(got[i], want[i]) {
				t.Fatalf("%T: token %d launched ahead %v, by Next %v", dev, i, got[i], want[i])
			}
		}
		if a, ok := dev.(*aheadDev); ok && (a.Most != 3 || a.Overlapped == 0 || a.Out != 0) {
			t.Errorf("fetches: at most %d waiting (want 3), %d queued while others waited, %d never waited", a.Most, a.Overlapped, a.Out)
		}
		if _, err := c.Collect(); err == nil {
			t.Error("Collect with nothing launched: no error")
		}
		if err := c.Launch(o); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Next(o); err == nil {
			t.Error("Next with a draw not collected: no error")
		}
		for c.Ahead() < maxAhead {
			if err := c.Launch(o); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Launch(o); err == nil {
			t.Errorf("Launch with %d draws not collected: no error", maxAhead)
		}
		if err := c.Prefill(0, []int32{4}); err != nil || c.Ahead() != 0 {
			t.Errorf("Prefill: %v, %d draws left to collect; want them dropped", err, c.Ahead())
		}
	}
}
