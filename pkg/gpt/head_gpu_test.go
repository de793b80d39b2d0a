package gpt

import (
	"math"
	"os"
	"testing"

	"github.com/druto/druto/internal/gputest/gpudev"
	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/tensor"
)

// TestGPUHeadChunked: on the GPU, a one-layer model of GPT-2's shape
// (V 50304, C 768) at B 5 T 1024 runs its LM head in HeadRows chunks
// (bf16/fp16: 2048, 2048 and a 1024-row tail; fp32: five of 1024) and gives
// the loss and gradients of the same step with the head run whole, within
// the tolerance rule (StepLimit), from a NaN-poisoned work buffer; the
// logits on demand agree; and the measured peak memory of the chunked step
// is below the whole one's by at least the logits rows it never holds,
// and within 256 MiB (the device's workspace and scratch) of what
// MemoryOn counts for the model and its activations.
func TestGPUHeadChunked(t *testing.T) {
	t.Setenv(HeadRowsEnv, "") // the rule, not an override
	dev := gpudev.Fused(t)
	cfg := Config{Vocab: 50304, MaxSeq: 1024, Layers: 1, Heads: 12, Channels: 768}
	const B, T = 5, 1024
	N := B * T
	inputs, targets := randomTokens(tensor.NewRNG(uint64(os.Getpid())), N, cfg.Vocab)
	for _, p := range []amp.Policy{amp.BF16, amp.FP16, amp.FP32} {
		scale := checkScale(p)
		var loss [2]float32
		var grads [2][]float32
		var peak [2]int64
		var rows [2]int
		var logits [2][]float32
		for k, hr := range []int{0, 1 << 30} {
			dev.ResetMemoryPeak()
			base := dev.MemoryPeak()
			m, err := New(dev, cfg, p)
			if err != nil {
				t.Fatal(err)
			}
			m.headRows = hr
			if err := m.Init(7); err != nil {
				t.Fatal(err)
			}
			poisonWork(t, m, B, T)
			m.ZeroGrad()
			if loss[k], err = m.Gradients(inputs, targets, B, T, scale); err != nil {
				t.Fatal(err)
			}
			peak[k] = dev.MemoryPeak() - base
			rows[k] = m.acts.rows
			if grads[k], err = m.GradValues(); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Forward(inputs, nil, B, T); err != nil {
				t.Fatal(err)
			}
			if logits[k], err = m.LogitsAt(0, 2047, 2048, N-1); err != nil {
				t.Fatal(err)
			}
			m.Close()
		}
		want := HeadRows(cfg.Vocab, N, p.Half(), true)
		if rows[0] != want || rows[1] != N {
			t.Fatalf("%s: head rows %d and %d, want %d and %d", p, rows[0], rows[1], want, N)
		}
		for _, g := range grads[0] {
			if math.IsNaN(float64(g)) || math.IsInf(float64(g), 0) {
				t.Fatalf("%s: a chunked gradient is %v", p, g)
			}
		}
		lossErr := math.Abs(float64(loss[0]-loss[1])) / math.Abs(float64(loss[1]))
		gradErr := tensor.RelErr(grads[0], grads[1])
		mem := MemoryOn(dev, cfg, B, T, p)
		mem.Optimizer = 0 // no optimizer here
		saved := int64(N-want) * int64(cfg.Vocab) * int64(p.Half().Size())
		t.Logf("RESULT head chunked gpt2-1layer %s B%d_T%d rows %d: loss %.6f vs %.6f relerr %.3g, grads relerr %.3g; peak %.1f MiB chunked, %.1f MiB whole, counted %.1f MiB",
			p, B, T, want, loss[0], loss[1], lossErr, gradErr, float64(peak[0])/(1<<20), float64(peak[1])/(1<<20), float64(mem.Total())/(1<<20))
		if lossErr > StepLimit(p) || gradErr > StepLimit(p) {
			t.Errorf("%s: chunked vs whole head: loss relerr %.3g, gradients %.3g (limit %.3g)", p, lossErr, gradErr, StepLimit(p))
		}
		if err := tensor.CloseF32(logits[0], logits[1], p.Half(), 1); err != nil {
			t.Errorf("%s: LogitsAt chunked vs whole: %v", p, err)
		}
		if !p.Mixed() {
			// fp32 attention runs the probability path, whose fp32 score
			// scratch (up to 1 GiB, pkg/device/gpu attnScratchBytes) the
			// count leaves out and whose size hides the head's saving: the
			// H200 measured 1.66 GB against 1.14 GB counted.
			continue
		}
		// (the chunked run's peak can be set elsewhere than at the head,
		// e.g. by cuDNN attention's workspace: 277 of 309 MB saved on the
		// H200 with it)
		if peak[1]-peak[0] < saved*8/10 {
			t.Errorf("%s: peak %d bytes chunked, %d whole: the chunks save %d bytes, want about %d", p, peak[0], peak[1], peak[1]-peak[0], saved)
		}
		if peak[0] < mem.Total() || peak[0] > mem.Total()+256<<20 {
			t.Errorf("%s: measured peak %d bytes, MemoryOn counts %d", p, peak[0], mem.Total())
		}
	}
}
