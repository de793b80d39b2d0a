package dist

import (
	"math"
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/data"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/optim"
	"github.com/druto/druto/pkg/tensor"
	"github.com/druto/druto/pkg/train"
)

var (
	_ train.Reducer = (*Ring)(nil)
	_ train.Reducer = (*NCCLReducer)(nil)
)

var testCfg = gpt.Config{Vocab: 256, MaxSeq: 32, Layers: 2, Heads: 4, Channels: 32}

func trainOptions(steps, batch int, p amp.Policy, r train.Reducer) train.Options {
	oc := optim.Defaults(steps)
	oc.LR, oc.Warmup = 3e-3, 2
	return train.Options{Config: testCfg, Policy: p, Batch: batch, Seq: 32, Optim: oc, Seed: 7, Reducer: r}
}

func trainTokens(t *testing.T) []int32 {
	t.Helper()
	toks, err := data.Encode(data.Corpus(1, 64<<10))
	if err != nil {
		t.Fatal(err)
	}
	return toks
}

func newTrainer(t *testing.T, o train.Options, toks []int32) *train.Trainer {
	t.Helper()
	tr, err := train.New(cpu.New(device.Options{Fused: true, Threads: 1}), o, toks, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	return tr
}

// stepAll runs one step on every trainer at once.
func stepAll(t *testing.T, trs []*train.Trainer) []train.Metric {
	t.Helper()
	ms := make([]train.Metric, len(trs))
	errs := make([]error, len(trs))
	done := make(chan struct{})
	for r, tr := range trs {
		go func() {
			ms[r], errs[r] = tr.Step()
			done <- struct{}{}
		}()
	}
	for range trs {
		<-done
	}
	noErrors(t, errs)
	return ms
}

func master(tr *train.Trainer) []float32 {
	return append([]float32(nil), tr.Model.Master().F32()...)
}

func sameBits(a, b []float32) int {
	if len(a) != len(b) || len(a) == 0 {
		return 0 // nothing or not the same things to compare: never "same"
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestTrainTwoRanksMatchesOne: two ranks of batch 2 train like one process
// of batch 4 on the same global batches, within the tolerance rule, and
// stay bit-identical to each other. The scale: the runs differ only in the
// order of float32 sums over the batch (two halves, then the ring's mean)
// and the per-step rounding differences accumulate through AdamW; allowing
// scale = step (1e-5·step relative) admits that growth and nothing more.
func TestTrainTwoRanksMatchesOne(t *testing.T) {
	const steps = 10
	toks := trainTokens(t)
	rs := rings(t, 2, Plan{})
	single := newTrainer(t, trainOptions(steps, 4, amp.FP32, nil), toks)
	ranks := []*train.Trainer{
		newTrainer(t, trainOptions(steps, 2, amp.FP32, rs[0]), toks),
		newTrainer(t, trainOptions(steps, 2, amp.FP32, rs[1]), toks),
	}
	for step := 1; step <= steps; step++ {
		want, err := single.Step()
		if err != nil {
			t.Fatal(err)
		}
		got := stepAll(t, ranks)
		if got[0].Loss != got[1].Loss || got[0].GradNorm != got[1].GradNorm {
			t.Fatalf("step %d: ranks differ: loss %g/%g norm %g/%g", step, got[0].Loss, got[1].Loss, got[0].GradNorm, got[1].GradNorm)
		}
		t.Logf("step %2d: loss %.7f vs %.7f (rel %.1e), grad norm rel %.1e", step, got[0].Loss, want.Loss,
			math.Abs(float64(got[0].Loss-want.Loss))/float64(want.Loss), math.Abs(float64(got[0].GradNorm-want.GradNorm))/float64(want.GradNorm))
		if err := tensor.CloseF32([]float32{got[0].Loss, got[0].GradNorm}, []float32{want.Loss, want.GradNorm}, tensor.F32, float64(step)); err != nil {
			t.Fatalf("step %d: (loss, grad norm) of 2 ranks vs 1 process: %v", step, err)
		}
		if i := sameBits(master(ranks[0]), master(ranks[1])); i >= 0 {
			t.Fatalf("step %d: rank parameters differ at %d", step, i)
		}
	}
	if err := tensor.CloseF32(master(ranks[0]), master(single), tensor.F32, steps); err != nil {
		t.Fatalf("parameters after %d steps: %v", steps, err)
	}
}

// TestTrainOneRankUnaffected: a reducer of world 1 changes nothing: the
// same bits as no reducer.
func TestTrainOneRankUnaffected(t *testing.T) {
	toks := trainTokens(t)
	g, err := Join(Config{World: 1}, Options{Ring: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRing(g, Plan{})
	if err != nil {
		t.Fatal(err)
	}
	a := newTrainer(t, trainOptions(5, 2, amp.FP32, nil), toks)
	b := newTrainer(t, trainOptions(5, 2, amp.FP32, r), toks)
	for step := 1; step <= 5; step++ {
		ma, err := a.Step()
		if err != nil {
			t.Fatal(err)
		}
		mb, err := b.Step()
		if err != nil {
			t.Fatal(err)
		}
		if ma.Loss != mb.Loss || ma.GradNorm != mb.GradNorm {
			t.Fatalf("step %d: loss %g vs %g, norm %g vs %g", step, ma.Loss, mb.Loss, ma.GradNorm, mb.GradNorm)
		}
	}
	if i := sameBits(master(a), master(b)); i >= 0 {
		t.Fatalf("parameters differ at %d", i)
	}
}

// poison wraps a reducer and writes an Inf into this rank's gradients
// before the reduction at one step: a non-finite gradient on one rank only.
type poison struct {
	train.Reducer
	at, step int
}

func (p *poison) AllReduceMean(dev device.Device, grads *tensor.Tensor) error {
	p.step++
	if p.step == p.at {
		h := tensor.New(tensor.F32, grads.Numel())
		dev.Download(h, grads)
		h.F32()[1234] = float32(math.Inf(1))
		dev.Upload(grads, h)
	}
	return p.Reducer.AllReduceMean(dev, grads)
}

// TestGradScalerAgreesAcrossRanks: under fp16, an Inf in rank 1's
// gradients at step 3 makes BOTH ranks skip that step (parameters and
// moments unchanged, the loss scale halved on both), and both go on in
// step, bit-identical.
func TestGradScalerAgreesAcrossRanks(t *testing.T) {
	toks := trainTokens(t)
	rs := rings(t, 2, Plan{})
	ranks := []*train.Trainer{
		newTrainer(t, trainOptions(6, 2, amp.FP16, rs[0]), toks),
		newTrainer(t, trainOptions(6, 2, amp.FP16, &poison{Reducer: rs[1], at: 3}), toks),
	}
	stepAll(t, ranks)
	stepAll(t, ranks)
	before := [][]float32{master(ranks[0]), master(ranks[1])}
	scale := ranks[0].Scaler.Scale
	ms := stepAll(t, ranks)
	for r, tr := range ranks {
		if ms[r].Skipped != 1 || tr.Scaler.Scale != scale/2 || tr.Opt.Steps != 2 {
			t.Fatalf("rank %d at the poisoned step: skipped %d, scale %g (was %g), optimizer steps %d",
				r, ms[r].Skipped, tr.Scaler.Scale, scale, tr.Opt.Steps)
		}
		if i := sameBits(before[r], master(tr)); i >= 0 {
			t.Fatalf("rank %d: parameter %d changed on the skipped step", r, i)
		}
	}
	for range 3 {
		ms = stepAll(t, ranks)
		if ms[0].Skipped != 1 || ms[1].Skipped != 1 || ms[0].Loss != ms[1].Loss {
			t.Fatalf("after the skip: %+v / %+v", ms[0], ms[1])
		}
		if i := sameBits(master(ranks[0]), master(ranks[1])); i >= 0 {
			t.Fatalf("ranks' parameters differ at %d", i)
		}
	}
	if i := sameBits(before[0], master(ranks[0])); i < 0 {
		t.Fatal("parameters did not move after the skipped step")
	}
}
