package train

import (
	"math"
	"sync"
	"testing"

	"github.com/druto/druto/internal/gputest"
	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/gpu"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/tensor"
)

var gpuOnce struct {
	sync.Once
	dev *gpu.Device
	err error
}

// fusedGPU returns a fused GPU device for this test binary, or skips (with
// DRUTO_REQUIRE_GPU=1, fails) where none is usable, saying why.
func fusedGPU(t *testing.T) *gpu.Device {
	t.Helper()
	gpuOnce.Do(func() {
		libs := cuda.Load(cuda.LoadOptions{})
		if gpuOnce.err = libs.Err; gpuOnce.err != nil {
			return
		}
		n, err := libs.Driver.DeviceCount()
		if err == nil && n == 0 {
			err = cuda.ErrNoDevice
		}
		if gpuOnce.err = err; err != nil {
			return
		}
		ctx, err := libs.Driver.NewContext(0)
		if gpuOnce.err = err; err != nil {
			return
		}
		gpuOnce.dev, gpuOnce.err = gpu.NewWith(ctx, gpu.Config{Options: device.Options{Fused: true}, Libs: libs})
	})
	if gpuOnce.err != nil {
		gputest.Skip(t, gpuOnce.err)
	}
	return gpuOnce.dev
}

// TestGPUAccumMatchesOneBatch is TestAccumMatchesOneBatch on the GPU, in
// the graph step (a micro graph replayed 4 times a step, then the update
// graph) with layer recomputation: 4 micro-batches of 2 sequences against
// one batch of 8, the losses and gradient norms within the policy's
// tolerance, the parameters in relative norm.
func TestGPUAccumMatchesOneBatch(t *testing.T) {
	dev := fusedGPU(t)
	const steps, B, n = 6, 2, 4
	for _, p := range []amp.Policy{amp.FP32, amp.BF16} {
		t.Run(p.String(), func(t *testing.T) {
			trT, vaT := testTokens(t)
			o := testOptions(steps, p)
			o.Step, o.Recompute = StepGraph, gpt.RecomputeLayer
			o.Batch, o.Accum = B, n
			acc, err := New(dev, o, trT, vaT)
			if err != nil {
				t.Fatal(err)
			}
			defer acc.Close()
			o.Batch, o.Accum, o.Recompute = n*B, 0, gpt.RecomputeNone
			one, err := New(dev, o, trT, vaT)
			if err != nil {
				t.Fatal(err)
			}
			defer one.Close()
			am, om := runMetrics(t, acc, steps), runMetrics(t, one, steps)
			if acc.GraphStatus() != "graph" || acc.GraphBuilds() != 2 {
				t.Errorf("accumulated step: %q, %d graphs; want graph, 2 (micro and update)", acc.GraphStatus(), acc.GraphBuilds())
			}
			dt := p.DType(amp.Activation)
			for i := range am {
				if err := closeRel(am[i].Loss, om[i].Loss, dt); err != nil {
					t.Errorf("step %d loss: %v", i+1, err)
				}
				if err := closeRel(am[i].GradNorm, om[i].GradNorm, dt); err != nil {
					t.Errorf("step %d gradient norm: %v", i+1, err)
				}
			}
			as, os := snapshot(t, acc), snapshot(t, one)
			var d2, w2 float64
			for i := range as[0] {
				d := float64(as[0][i] - os[0][i])
				d2, w2 = d2+d*d, w2+float64(os[0][i])*float64(os[0][i])
			}
			if _, rtol := tensor.Tolerance(dt); math.Sqrt(d2) > rtol*math.Sqrt(w2) {
				t.Errorf("parameters after %d steps: relative difference %.3g, more than %.3g", steps, math.Sqrt(d2/w2), rtol)
			}
		})
	}
}
