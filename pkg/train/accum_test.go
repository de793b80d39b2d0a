package train

import (
	"math"
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/tensor"
)

// accumPair returns a trainer of n micro-batches of B sequences and one of
// one batch of n·B sequences, otherwise alike, on dev.
func accumPair(t *testing.T, dev device.Device, p amp.Policy, steps, B, n int) (acc, one *Trainer) {
	t.Helper()
	trT, vaT := testTokens(t)
	o := testOptions(steps, p)
	o.Batch, o.Accum = B, n
	var err error
	if acc, err = New(dev, o, trT, vaT); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(acc.Close)
	o.Batch, o.Accum = n*B, 0
	if one, err = New(dev, o, trT, vaT); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(one.Close)
	return acc, one
}

// gradLog keeps a copy of the (scaled) gradients of every step of tr.
func gradLog(tr *Trainer) *[][]float32 {
	var out [][]float32
	tr.gradHook = func(_ int, g *tensor.Tensor) {
		h := tensor.New(tensor.F32, g.Numel())
		tr.dev.Download(h, g)
		if tr.dev.Sync() == nil {
			out = append(out, h.F32())
		}
	}
	return &out
}

// TestAccumMatchesOneBatch: on the CPU, 4 micro-batches of 2 sequences
// give the training of one batch of 8 (the same sequences in the same
// order): over 6 steps every step's gradients, loss and gradient norm
// agree within the policy's tolerance (the gradients are the same sums in
// another order), and so do the parameters and both moments at the end:
// element by element in fp32, in relative norm in 16 bits (AdamW's step is
// about ±lr whatever the gradient's size, so a gradient near 0 whose sign
// the other order flips moves its parameter by 2·lr), and each step
// reads 8 sequences. The CPU device runs 16 threads whatever the machine
// (the H200 host's count, where fp16's step-2 gradients parted most: the
// threads split the sums, so their number is part of the order), so the
// test is the same computation everywhere.
func TestAccumMatchesOneBatch(t *testing.T) {
	const steps, B, n = 6, 2, 4
	for _, p := range []amp.Policy{amp.FP32, amp.BF16, amp.FP16} {
		t.Run(p.String(), func(t *testing.T) {
			acc, one := accumPair(t, cpu.New(device.Options{Fused: true, Threads: 16}), p, steps, B, n)
			ag, og := gradLog(acc), gradLog(one)
			am, om := runMetrics(t, acc, steps), runMetrics(t, one, steps)
			dt := p.DType(amp.Activation)
			// fp32 sums in another order; in 16 bits, the activations and
			// their gradients rounded from other sums: a few roundings.
			scale := map[bool]float64{true: 4, false: 2}[p == amp.FP32]
			for i := range am {
				for _, q := range [][3]any{{"loss", am[i].Loss, om[i].Loss}, {"gradient norm", am[i].GradNorm, om[i].GradNorm}} {
					if err := tensor.CloseF32([]float32{q[1].(float32)}, []float32{q[2].(float32)}, dt, scale); err != nil {
						t.Errorf("step %d %s: accumulated against one batch: %v", i+1, q[0], err)
					}
				}
				if am[i].LossScale != om[i].LossScale || am[i].Skipped != om[i].Skipped {
					t.Errorf("step %d: scale %g skipped %d, one batch %g %d", i+1, am[i].LossScale, am[i].Skipped, om[i].LossScale, om[i].Skipped)
				}
			}
			if len(*ag) != steps || len(*og) != steps {
				t.Fatalf("%d and %d gradient copies, want %d", len(*ag), len(*og), steps)
			}
			for i := range steps {
				if p != amp.FP32 {
					// In 16 bits an activation gradient is 1/(B·T) of a
					// smaller batch's, so the two runs round (and, in
					// fp16, flush to subnormals) other values: a few
					// elements of a sum over many such terms part by
					// more than the element rule, so the whole gradient
					// is held in relative norm, by the contract's rule
					// (device.NormTol: two ulps for outputs one rounding
					// apart; scale ⌈k/2⌉ for k roundings): the fp32 sums
					// in another order, the activation gradients rounded
					// to 16 bits from other sums, and from step 2 on the
					// 16-bit working weights and the activations rounded
					// from parameters that already differ (AdamW moves a
					// parameter whose near-0 gradient the other order
					// flips by 2·lr): k = 4, scale 2, the same scale as
					// the loss and gradient norm above. Measured with
					// 1-8 threads, at most 6.7e-5 (fp16) and 4.3e-4
					// (bf16); with 16, fp16's step 2 parts by 2.19e-3
					// (step 1, at equal parameters, by 9.6e-6): more
					// than one NormTol (1.95e-3), within two.
					if tol := device.NormTol(dt) * scale; tensor.RelErr((*ag)[i], (*og)[i]) > tol {
						t.Errorf("step %d gradients: accumulated against one batch: relative difference %.3g, more than %.3g (NormTol x %g)",
							i+1, tensor.RelErr((*ag)[i], (*og)[i]), tol, scale)
					}
					continue
				}
				// the gradients are scaled by the loss scale: the absolute
				// tolerance by the scale too
				if err := tensor.CloseSumF32((*ag)[i], (*og)[i], dt, scale, float64(am[i].LossScale)); err != nil {
					t.Errorf("step %d gradients: accumulated against one batch: %v", i+1, err)
				}
			}
			as, os := snapshot(t, acc), snapshot(t, one)
			t.Logf("%s: after %d steps, parameters differ by %.2g in relative norm, losses by %.2g at the last step",
				p, steps, tensor.RelErr(as[0], os[0]), math.Abs(float64(am[steps-1].Loss-om[steps-1].Loss))/float64(om[steps-1].Loss))
			for k, name := range []string{"parameters", "m", "v"} {
				if p == amp.FP32 {
					if err := tensor.CloseSumF32(as[k], os[k], dt, scale, 1); err != nil {
						t.Errorf("%s after %d steps: %v", name, steps, err)
					}
					continue
				}
				var d2, w2 float64
				for i := range as[k] {
					d := float64(as[k][i] - os[k][i])
					d2, w2 = d2+d*d, w2+float64(os[k][i])*float64(os[k][i])
				}
				if _, rtol := tensor.Tolerance(dt); math.Sqrt(d2) > rtol*math.Sqrt(w2) {
					t.Errorf("%s after %d steps: relative difference %.3g, more than %.3g", name, steps, math.Sqrt(d2/w2), rtol)
				}
			}
			if acc.train.Pos() != one.train.Pos() {
				t.Errorf("data position %d, one batch %d: the steps read other data", acc.train.Pos(), one.train.Pos())
			}
		})
	}
}

// TestAccumDeviceStepMatchesHost: with accumulation, the device-resident
// step (plain, and as graphs replayed on the CPU by replayGrapher) makes
// the host step's decisions bit for bit, an Inf added after the first
// micro-batch of steps 3 and 7 skipping those steps (fp16: the scale
// halved), and the graphs are one micro graph replayed 3 times a step and
// one update graph, each captured once.
func TestAccumDeviceStepMatchesHost(t *testing.T) {
	const n = 9
	for _, pol := range []amp.Policy{amp.FP16, amp.FP32} {
		t.Run(pol.String(), func(t *testing.T) {
			trT, vaT := testTokens(t)
			rg := &replayGrapher{Device: cpu.New(device.Options{Fused: true})}
			mk := func(mode StepMode, dev device.Device) *Trainer {
				o := testOptions(n, pol)
				o.Batch, o.Accum, o.Recompute = 1, 3, gpt.RecomputeGELU
				o.Optim.ClipNorm = 0.5
				o.Step, o.LogEvery, o.InjectGrad = mode, 4, infAt(3, 7)
				tr, err := New(dev, o, trT, vaT)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(tr.Close)
				return tr
			}
			host := mk(StepHost, cpu.New(device.Options{Fused: true}))
			plain := mk(StepDevice, cpu.New(device.Options{Fused: true}))
			graph := mk(StepGraph, rg)
			hm := spanMetrics(t, host, n)
			for _, dev := range []*Trainer{plain, graph} {
				dm := spanMetrics(t, dev, n)
				sameMetrics(t, hm, dm)
				hs, ds := snapshot(t, host), snapshot(t, dev)
				for k, name := range []string{"parameters", "m", "v"} {
					for i := range hs[k] {
						if math.Float32bits(hs[k][i]) != math.Float32bits(ds[k][i]) {
							t.Fatalf("%s step: %s[%d]: host %v, device %v", dev.GraphStatus(), name, i, hs[k][i], ds[k][i])
						}
					}
				}
			}
			if hm[n-1].Skipped != 2 || !hm[2].StepSkipped || !hm[6].StepSkipped {
				t.Errorf("skipped %d steps (step 3 %v, step 7 %v), want steps 3 and 7", hm[n-1].Skipped, hm[2].StepSkipped, hm[6].StepSkipped)
			}
			if graph.GraphStatus() != "graph" || rg.captures != 2 || graph.GraphBuilds() != 2 {
				t.Errorf("graph step: status %q, %d captures, %d builds; want graph, 2 (micro and update), 2", graph.GraphStatus(), rg.captures, graph.GraphBuilds())
			}
		})
	}
}

// TestAccumMicroOverflowSkipsStep: an Inf in the gradients after the
// second of four micro-batches (fp16) skips the whole step: parameters and
// moments unchanged, the scale halved, one step skipped; the next step
// trains.
func TestAccumMicroOverflowSkipsStep(t *testing.T) {
	o := testOptions(10, amp.FP16)
	o.Batch, o.Accum = 1, 4
	tr := newTrainer(t, o)
	defer tr.Close()
	tr.microHook = func(step, micro int, g *tensor.Tensor) {
		if step == 3 && micro == 1 {
			setInf(tr, g, 77)
		}
	}
	runSteps(t, tr, 2)
	scale := tr.Scaler.Scale
	m, _ := skippedStep(t, tr)
	if !m.StepSkipped || m.Skipped != 1 || tr.Scaler.Scale != scale/2 || tr.Opt.Steps != 2 {
		t.Fatalf("step 3: skipped %v (%d), scale %g (was %g), optimizer steps %d", m.StepSkipped, m.Skipped, tr.Scaler.Scale, scale, tr.Opt.Steps)
	}
	if m, err := tr.Step(); err != nil || m.StepSkipped || tr.Opt.Steps != 3 {
		t.Fatalf("the step after the skip: %+v %v", m, err)
	}
}

// TestAccumOptions: a negative Accum, an unknown recompute level and the
// fp8 policy with recomputation or a recipe it does not run (delayed
// scaling with no history, a margin past 64) are refused; a resume needs
// the same accumulation.
func TestAccumOptions(t *testing.T) {
	for _, f := range []func(*Options){
		func(o *Options) { o.Accum = -1 },
		func(o *Options) { o.Recompute = gpt.Recompute(9) },
		func(o *Options) { o.Policy, o.Recompute = amp.FP8, gpt.RecomputeLayer },
		func(o *Options) { o.Policy, o.FP8 = amp.FP8, amp.FP8Recipe{History: -1} },
		func(o *Options) { o.Policy, o.FP8 = amp.FP8, amp.FP8Recipe{History: 16, Margin: 65} },
	} {
		o := testOptions(4, amp.FP32)
		f(&o)
		if err := o.Validate(); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
	o := testOptions(4, amp.FP32)
	o.Accum = 1
	a := testOptions(4, amp.FP32)
	tr, tr1 := newTrainer(t, a), newTrainer(t, o)
	defer tr.Close()
	defer tr1.Close()
	if tr.optionsKey() != tr1.optionsKey() {
		t.Error("Accum 1 and Accum 0 make different resume keys")
	}
	o.Accum = 2
	tr2 := newTrainer(t, o)
	defer tr2.Close()
	if tr.optionsKey() == tr2.optionsKey() {
		t.Error("Accum 2 makes the resume key of no accumulation")
	}
}

// closeRel reports got and want further apart than the tolerance of dt
// (scale 4: sums of roundings in another order).
func closeRel(got, want float32, dt tensor.DType) error {
	return tensor.CloseF32([]float32{got}, []float32{want}, dt, 4)
}
