package bench

// sample.go: the generation benchmark (druto bench --sample): time to the
// first token and decode tokens per second over the key/value cache, beside
// the bound that reading the weights once a step sets.

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/gpu"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/record"
	"github.com/druto/druto/pkg/train"
)

// SampleRecord is one generation benchmark: Batch prompts of PromptTokens
// tokens continued by NewTokens tokens each, greedy, a random model of the
// preset, the median of Rounds rounds (record.Sample).
type SampleRecord = record.Sample

// Sample benchmarks generation on dev for case c (Batch prompts of Seq
// tokens) under mode m: newTokens tokens a prompt, rounds times after one
// warm-up round; copyGBps (0: unknown) sets the record's bound. The model
// has params (in layout order) when not nil, else GPT-2's initialisation.
func Sample(dev device.Device, c Case, m Mode, newTokens, rounds int, copyGBps float64, params []float32) (SampleRecord, error) {
	r := SampleRecord{Config: c.Name, Mode: m.String(), Batch: c.Batch, PromptTokens: c.Seq, NewTokens: newTokens, Rounds: rounds}
	if newTokens < 2 || rounds < 1 || c.Seq < 1 || c.Batch < 1 {
		return r, fmt.Errorf("bench: generation needs at least 2 new tokens, a round and a prompt token: %d, %d, %d", newTokens, rounds, c.Seq)
	}
	if c.Seq > c.Config.MaxSeq {
		return r, fmt.Errorf("bench: a prompt of %d tokens is longer than %s's context of %d", c.Seq, c.Name, c.Config.MaxSeq)
	}
	model, err := gpt.NewInference(dev, c.Config, m.Policy)
	if err != nil {
		return r, err
	}
	defer model.Close()
	r.Weights = "random"
	if params != nil {
		r.Weights = "checkpoint"
		err = model.SetParams(params)
	} else {
		err = model.Init(1)
	}
	if err != nil {
		return r, err
	}
	s, err := train.NewSampler(model, train.Unmasked(c.Config.Vocab), train.SampleOptions{})
	if err != nil {
		return r, err
	}
	defer s.Close()
	prompts := make([][]int32, c.Batch)
	for b := range prompts {
		prompts[b] = make([]int32, c.Seq)
		for i := range prompts[b] {
			prompts[b][i] = int32((i + 7*b) % c.Config.Vocab)
		}
	}
	var pre, dec []float64
	for i := range rounds + 1 {
		if _, err := s.GenerateBatch(prompts, newTokens, nil); err != nil {
			return r, err
		}
		st := s.Stats()
		if i > 0 {
			pre = append(pre, float64(st.Prefill)/float64(time.Millisecond))
			dec = append(dec, st.DecodeRate())
		}
		r.Cached, r.Graph, r.LaunchesPerToken = st.Cached, st.Graph, st.LaunchesPerToken
	}
	sort.Float64s(pre)
	sort.Float64s(dec)
	r.PrefillMs, r.DecodeTokS = pre[len(pre)/2], dec[len(dec)/2]
	r.DecodeMin, r.DecodeMax = dec[0], dec[len(dec)-1]
	cfg := c.Config
	r.WeightBytes = int64(cfg.NumParams()-(cfg.MaxSeq-1)*cfg.Channels) * int64(m.Policy.DType(amp.Activation).Size())
	if copyGBps > 0 {
		r.BoundTokS = float64(c.Batch) * copyGBps * 1e9 / float64(r.WeightBytes)
	}
	return r, nil
}

// HostCopyBandwidth measures the host's copy bandwidth in GB/s (bytes read
// plus written) with threads goroutines each copying its part of 512 MiB,
// the median of 5 after a warm-up: what a CPU decode step, which streams the
// weights over the same threads, can read at most.
func HostCopyBandwidth(threads int) float64 {
	const n = 256 << 20
	threads = max(threads, 1)
	a, b := make([]byte, n), make([]byte, n)
	for i := range a {
		a[i] = byte(i)
	}
	var ts []float64
	for i := range 6 {
		start := time.Now()
		var wg sync.WaitGroup
		chunk := (n + threads - 1) / threads
		for lo := 0; lo < n; lo += chunk {
			hi := min(lo+chunk, n)
			wg.Go(func() { copy(b[lo:hi], a[lo:hi]) })
		}
		wg.Wait()
		if i > 0 {
			ts = append(ts, time.Since(start).Seconds())
		}
	}
	sort.Float64s(ts)
	return 2 * n / ts[len(ts)/2] / 1e9
}

// SampleCopyBandwidth is the bandwidth Sample's bound uses on dev: the
// device copy on a GPU, HostCopyBandwidth with the device's threads on the
// CPU.
func SampleCopyBandwidth(dev device.Device, threads int) (float64, error) {
	if _, ok := dev.(*gpu.Device); ok {
		return CopyBandwidth(dev)
	}
	return HostCopyBandwidth(threads), nil
}
