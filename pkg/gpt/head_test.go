package gpt

import (
	"math"
	"strings"
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/tensor"
)

// headPair is one model whose LM head runs in chunks of rows rows and one
// that runs it whole, from the same parameters.
func headPair(t *testing.T, dev device.Device, cfg Config, p amp.Policy, rows int, seed uint64) (chunked, whole *Model) {
	t.Helper()
	var ms [2]*Model
	for k, r := range []int{rows, 1 << 30} {
		m, err := New(dev, cfg, p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		m.headRows = r
		if err := m.Init(seed); err != nil {
			t.Fatal(err)
		}
		ms[k] = m
	}
	return ms[0], ms[1]
}

// poisonWork fills m's work buffer at (B, T) with NaN: the LM head's chunk,
// the backward scratch and the projections' output must each be written
// before they are read.
func poisonWork(t *testing.T, m *Model, B, T int) {
	t.Helper()
	if err := m.ensure(B, T); err != nil {
		t.Fatal(err)
	}
	poison(m, m.acts.work)
}

// poison fills x, a tensor on m's device, with NaN.
func poison(m *Model, x *tensor.Tensor) {
	nan := make([]float32, x.Numel())
	for i := range nan {
		nan[i] = float32(math.NaN())
	}
	h, _ := tensor.FromF32(nan, x.Numel())
	if x.DType != tensor.F32 {
		c := tensor.New(x.DType, x.Numel())
		cpu.New(device.Options{}).Cast(c, h)
		h = c
	}
	m.dev.Upload(x, h)
}

// eachForm runs fn on the fused and the decomposed form under every
// policy, with a name for messages ("bf16", "bf16/decomposed").
func eachForm(fn func(fused bool, p amp.Policy, name string)) {
	for _, fused := range []bool{true, false} {
		for _, p := range []amp.Policy{amp.FP32, amp.BF16, amp.FP16} {
			name := p.String()
			if !fused {
				name += "/decomposed"
			}
			fn(fused, p, name)
		}
	}
}

// TestHeadChunked: a step whose LM head runs in chunks (16 rows of 60,
// the last chunk 12) gives the loss, the gradients, the evaluation loss
// and the logits of the step that runs it whole, on the fused and the
// decomposed CPU device under every policy, from a NaN-poisoned work
// buffer. Chunking changes only the order in which wte's gradient sums
// the rows, so the results agree to a few fp32 roundings, far inside the
// tolerance rule (gpt.StepLimit).
func TestHeadChunked(t *testing.T) {
	cfg := CheckConfig.Config
	const B, T, rows = 3, 20, 16
	inputs, targets := randomTokens(tensor.NewRNG(11), B*T, cfg.Vocab)
	eachForm(func(fused bool, p amp.Policy, name string) {
		dev := cpu.New(device.Options{Fused: fused, Threads: 2})
		chunked, whole := headPair(t, dev, cfg, p, rows, 5)
		scale := checkScale(p)
		var loss [2]float32
		var grads [2][]float32
		for k, m := range []*Model{chunked, whole} {
			poisonWork(t, m, B, T)
			m.ZeroGrad()
			var err error
			if loss[k], err = m.Gradients(inputs, targets, B, T, scale); err != nil {
				t.Fatal(err)
			}
			if grads[k], err = m.GradValues(); err != nil {
				t.Fatal(err)
			}
		}
		if chunked.acts.rows != rows || whole.acts.rows != B*T {
			t.Fatalf("%s: head rows %d and %d, want %d and %d", name, chunked.acts.rows, whole.acts.rows, rows, B*T)
		}
		for _, g := range grads[0] {
			if math.IsNaN(float64(g)) || math.IsInf(float64(g), 0) {
				t.Fatalf("%s: a chunked gradient is %v: a poisoned buffer was read", name, g)
			}
		}
		if loss[0] != loss[1] {
			t.Errorf("%s: loss chunked %v, whole %v: a row's loss does not depend on its chunk", name, loss[0], loss[1])
		}
		if e := tensor.RelErr(grads[0], grads[1]); e > 1e-6 || e > StepLimit(p) {
			t.Errorf("%s: gradients rel err %.3g between the chunked and the whole head", name, e)
		}
		wte := cfg.Layout().Segments[0]
		if wte.Name != "wte" {
			t.Fatalf("the layout starts with %s, not wte", wte.Name)
		}
		if e := tensor.RelErr(grads[0][:wte.Numel()], grads[1][:wte.Numel()]); e > 1e-6 {
			t.Errorf("%s: wte gradient rel err %.3g", name, e)
		}
		// Forward only: the evaluation loss, then the logits on demand.
		var eval [2]float32
		var logits [2][]float32
		for k, m := range []*Model{chunked, whole} {
			var err error
			if eval[k], err = m.Forward(inputs, targets, B, T); err != nil {
				t.Fatal(err)
			}
			if logits[k], err = m.Logits(); err != nil {
				t.Fatal(err)
			}
		}
		if eval[0] != eval[1] || eval[0] != loss[0] {
			t.Errorf("%s: evaluation loss chunked %v, whole %v, step %v", name, eval[0], eval[1], loss[0])
		}
		if len(logits[0]) != B*T*cfg.Vocab {
			t.Fatalf("%s: %d logits, want %d", name, len(logits[0]), B*T*cfg.Vocab)
		}
		if err := tensor.CloseF32(logits[0], logits[1], p.Half(), 1); err != nil {
			t.Errorf("%s: logits chunked vs whole: %v", name, err)
		}
		// The loss from the downloaded logits (fp32 log-softmax).
		ce := meanCrossEntropy(logits[0], targets, cfg.Vocab)
		if err := tensor.Close([]float64{ce}, []float64{float64(eval[0])}, tensor.F32, 1); err != nil {
			t.Errorf("%s: the loss of the logits %.6f, Forward's %v: %v", name, ce, eval[0], err)
		}
		// LogitsAt: the rows asked for, in their order, across chunks
		// (a one-row GEMM sums in another order than the chunk's).
		at := []int{59, 0, 17, 16, 59}
		got, err := chunked.LogitsAt(at...)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range at {
			if err := tensor.CloseF32(got[i*cfg.Vocab:(i+1)*cfg.Vocab], logits[0][r*cfg.Vocab:(r+1)*cfg.Vocab], p.Half(), 1); err != nil {
				t.Errorf("%s: LogitsAt(%d): %v", name, r, err)
			}
		}
	})
}

// TestHeadErrors: logits are refused where no Forward's output is at hand
// (after Gradients, or after a SetBatch of another size), LogitsAt refuses
// rows outside the batch, and Gradients refuses a zero loss scale.
func TestHeadErrors(t *testing.T) {
	cfg := CheckConfig.Config
	dev := cpu.New(device.Options{Fused: true, Threads: 2})
	m, err := New(dev, cfg, amp.FP32)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Init(1); err != nil {
		t.Fatal(err)
	}
	in := make([]int32, 2*8)
	if _, err := m.Logits(); err == nil {
		t.Fatal("Logits before any Forward did not fail")
	}
	if _, err := m.Forward(in, nil, 2, 8); err != nil {
		t.Fatal(err)
	}
	if _, err := m.LogitsAt(16); err == nil || !strings.Contains(err.Error(), "row 16") {
		t.Fatalf("LogitsAt(16) of 16 rows: %v", err)
	}
	if _, err := m.LogitsAt(-1); err == nil {
		t.Fatal("LogitsAt(-1) did not fail")
	}
	if l, err := m.LogitsAt(15); err != nil || len(l) != cfg.Vocab {
		t.Fatalf("LogitsAt(15): %d values, %v", len(l), err)
	}
	if err := m.SetBatch(make([]int32, 4), nil, 1, 4); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Logits(); err == nil {
		t.Fatal("Logits after a SetBatch of another size did not fail")
	}
	if _, err := m.Forward(in, nil, 2, 8); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Gradients(in, in, 2, 8, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Logits(); err == nil {
		t.Fatal("Logits after Gradients did not fail")
	}
	if _, err := m.Gradients(in, in, 2, 8, 0); err == nil || !strings.Contains(err.Error(), "loss scale") {
		t.Fatalf("Gradients with loss scale 0: %v", err)
	}
}
