package gpu

import (
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/druto/druto/kernels"
	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// TestLaunchBlocks runs the hooked launch tests (every op of the backend in
// both forms, the flash paths and the step's kernels) and checks that each
// launch's block is the one its kernel's source defines (its
// `// druto:block MACRO kernel` line and `#define MACRO N`), and that every
// kernel of the sources was launched at least once on the way.
func TestLaunchBlocks(t *testing.T) {
	want, err := kernels.KernelBlocks()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	blockHook = func(kernel string, block cuda.Dim3) {
		mu.Lock()
		defer mu.Unlock()
		seen[kernel] = true
		n, ok := want[kernel]
		switch {
		case !ok:
			t.Errorf("%s: launched, but no source defines its block", kernel)
		case block.Y != 1 || block.Z != 1 || int(block.X) != n:
			t.Errorf("%s: launched with block (%d,%d,%d); its source defines %d threads", kernel, block.X, block.Y, block.Z, n)
		}
	}
	defer func() { blockHook = nil }()
	for name, fn := range map[string]func(*testing.T){
		"selftest": TestSelfTestCoversEveryKernel, "sequences": TestLaunchSequences, "ops": TestLaunchSignaturesOps,
		"flash": TestLaunchFlash, "step": TestLaunchSignaturesStep, "vec": TestVecAndGrids,
	} {
		t.Run(name, fn)
	}
	// The paths the tests above leave out: the residual layernorm, a
	// misaligned row (the scalar path) and the half-to-half casts.
	const N, C = 9, 96
	bf, h, f32 := tensor.BF16, tensor.F16, tensor.F32
	layout := &tensor.Layout{}
	layout.Add("w", true, 3000)
	_, err = hooked(t, true, func(d *Device) {
		d.ResidualLayerNorm(dev(f32, N, C), dev(bf, N, C), dev(f32, N), dev(f32, N), dev(f32, N, C), dev(bf, N, C), dev(bf, C), dev(bf, C), N, C)
		d.ResidualLayerNorm(dev(bf, N, C), dev(bf, N, C), dev(f32, N), dev(f32, N), dev(bf, N, C), dev(bf, N, C), dev(bf, C), dev(bf, C), N, C)
		d.LayerNormBackward(dev(f32, N, C), dev(f32, C), dev(f32, C), dev(bf, N, C), dev(f32, N, C), dev(bf, C), dev(f32, N), dev(f32, N), N, C)
		d.LayerNormBackward(dev(bf, N, C), dev(f32, C), dev(f32, C), dev(bf, N, C), dev(bf, N, C), dev(bf, C), dev(f32, N), dev(f32, N), N, C)
		d.Cast(dev(h, 99), dev(bf, 99))
		d.Cast(dev(bf, 99), dev(h, 99))
		d.GradNorm(dev(f32, 5000), 1)
		d.AdamWState(dev(f32, 3000), dev(bf, 3000), dev(f32, 3000), dev(f32, 3000), dev(f32, 3000), layout, device.AdamW{Beta1: 0.9, Beta2: 0.95}, dev(f32, device.StateLen))
		// FP8 cast-transpose and producers: methods of *Device, no ops of device.Device yet
		q, qt := cuda.DevicePtr(dev(f32, N*C).Dev), cuda.DevicePtr(dev(f32, N*C).Dev)
		for _, f := range []tensor.FP8Format{tensor.E4M3, tensor.E5M2} {
			_ = d.castTransposeFP8P(q, qt, dev(f32, 2), dev(bf, N, C), dev(f32, 1), f, N, C)
		}
		_ = d.layerNormFP8P(q, qt, dev(f32, 2), dev(f32, N), dev(f32, N), dev(f32, N, C), dev(bf, C), dev(bf, C), dev(f32, 1), N, C)
		_ = d.residualLayerNormFP8P(dev(f32, N, C), q, qt, dev(f32, 2), dev(f32, N), dev(f32, N), dev(f32, N, C), dev(bf, N, C), dev(bf, C), dev(bf, C), dev(f32, 1), N, C)
		_ = d.geluCastTransposeFP8P(cuda.DevicePtr(dev(f32, N*C).Dev), cuda.DevicePtr(dev(f32, N*C).Dev), dev(f32, 2), dev(bf, N, C), dev(f32, 1), N, C)
		_ = d.castTransposeDBiasFP8P(cuda.DevicePtr(dev(f32, N*C).Dev), cuda.DevicePtr(dev(f32, N*C).Dev), dev(f32, 2), dev(f32, C), dev(bf, N, C), dev(f32, 1), N, C)
		_ = d.dgeluCastTransposeDBiasFP8P(cuda.DevicePtr(dev(f32, N*C).Dev), cuda.DevicePtr(dev(f32, N*C).Dev), dev(f32, 2), dev(f32, C), dev(bf, N, C), dev(bf, N, C), dev(f32, 1), N, C)
		_ = d.fp8ScaleUpdateP(dev(f32, amp.FP8StLen(2, 4)), dev(tensor.I32, 2*amp.FP8MetaLen), nil, 2, 4, 0)
		_ = d.layerNormBackwardCastFP8P(dev(f32, N, C), dev(f32, C), dev(f32, C), cuda.DevicePtr(dev(f32, N*C).Dev), cuda.DevicePtr(dev(f32, N*C).Dev), dev(f32, 2), dev(f32, C),
			dev(bf, N, C), dev(f32, N, C), dev(bf, C), dev(f32, N), dev(f32, N), dev(f32, 1), N, C)
		// the FP8 classifier's two forms (TestLaunchCrossEntropyFP8)
		for _, smem := range []int{0, 227 << 10} {
			d.tmaSmem = map[kernelKey]int{{kernCEF8TMA, bf}: smem}
			d.CrossEntropyFP8(dev(f32, N), dev(bf, N, C), dev(tensor.F8E5M2, N, C), dev(f32, 2), dev(tensor.I32, N), dev(f32, 1), nil, N, C, 1, true)
		}
		d.tmaSmem = nil
		// the FP8 byte transpose (TestLaunchTransposeFP8)
		d.TransposeFP8(dev(tensor.F8E5M2, C, N), dev(tensor.F8E5M2, N, C), N, C)
		// AdamW writing an FP8 weight's copies (TestLaunchAdamWStateFP8)
		w := []device.FP8Weight{{Offset: 0, Rows: 30, Cols: 100, Q: dev(tensor.F8E4M3, 30, 100), QT: dev(tensor.F8E4M3, 100, 30), Amax: dev(f32, 2), Scale: dev(f32, 1)}}
		d.AdamWStateFP8(dev(f32, 3000), dev(bf, 3000), dev(f32, 3000), dev(f32, 3000), dev(f32, 3000), layout, device.AdamW{Beta1: 0.9, Beta2: 0.95}, dev(f32, device.StateLen), w)
	})
	if err != nil {
		t.Error(err)
	}
	var missed []string
	for k := range want {
		if !seen[k] {
			missed = append(missed, k)
		}
	}
	sort.Strings(missed)
	// Kernels the hooked tests do not reach (each launched from a path that
	// needs a device): none may be missing without a reason here.
	if len(missed) > 0 {
		t.Errorf("kernels never launched by the hooked tests, so their block is unchecked: %s", strings.Join(missed, " "))
	}
}
