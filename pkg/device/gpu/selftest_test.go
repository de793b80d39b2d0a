package gpu

// selftest_test.go: runs on any machine. The conformance cases, in every
// mode of SelfTest, launch every kernel variant of package kernels, each
// launch checked against the kernel's PTX signature (launch_test.go), with
// dtype combinations the GPU implements (no case records an error), so
// that detect's self-test covers every kernel; and every op rejects an
// argument of the wrong length (its contract, device.Ops).

import (
	"errors"
	"strings"
	"testing"

	"github.com/druto/druto/kernels"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/device/devicetest"
	"github.com/druto/druto/pkg/tensor"
)

func TestSelfTestCoversEveryKernel(t *testing.T) {
	vs, err := kernels.Variants()
	if err != nil {
		t.Fatal(err)
	}
	sigs := signatures(t)
	got := map[string]bool{}
	var launches []launch
	launchHook = func(kernel string, dt tensor.DType, args []any) {
		got[kernel+"/"+dt.String()] = true
		launches = append(launches, launch{kernel, dt, append([]any(nil), args...)})
	}
	defer func() { launchHook = nil }()
	// the TMA kernels as on an sm_90 GPU with NVRTC 12+ (tmaOK)
	tma := map[kernelKey]int{}
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16} {
		tma[kernelKey{kernCETMA, dt}] = 227 << 10
		tma[kernelKey{kernLNBackTMA, dt}] = 227 << 10
	}
	d := &Device{fused: true, flashV2: true, tmaSmem: tma}
	cases := devicetest.Cases()
	d.forModes(func(m selfTestMode) {
		for _, c := range cases {
			if !m.has(c.Contract.Op) {
				continue
			}
			ts := make([]*tensor.Tensor, len(c.Contract.Params))
			for i, p := range c.Contract.Params {
				switch {
				case c.Omit[i]:
				case p.Role == device.State:
					s := c.Sizes
					st := d.AttentionState(c.DType, s[0], s[1], s[2], s[3])
					ts[i] = dev(st.DType, st.Shape...)
				default:
					ts[i] = dev(c.DTypeOf(i), c.NumelOf(i))
				}
			}
			d.err, launches = nil, nil
			if _, err := c.Call(d, ts); err != nil {
				t.Errorf("%s: %s: %v", m.name, c.Name, err)
			}
			if d.err != nil {
				t.Errorf("%s: %s: %v", m.name, c.Name, d.err)
			}
			checkSigs(t, m.name+": "+c.Name, sigs, launches)
			// The op checks its contract: any argument one element too
			// long (the sizes of GradNorm and StepUpdate are their
			// tensors'), or a required one nil, is an error.
			if m.name != "fused" {
				continue
			}
			for j, p := range c.Contract.Params {
				for _, long := range []bool{true, false} {
					if ts[j] == nil || (long && (p.Numel == nil || c.Contract == &device.Ops.GradNorm || c.Contract == &device.Ops.StepUpdate)) || (!long && p.Opt) {
						continue
					}
					bad := append([]*tensor.Tensor(nil), ts...)
					bad[j] = nil
					if long {
						bad[j] = dev(ts[j].DType, ts[j].Numel()+1)
					}
					d.err = nil
					_, _ = c.Call(d, bad)
					if !errors.Is(d.err, tensor.ErrShape) {
						t.Errorf("%s with a long (%v) or nil %s: %v", c.Name, long, p.Name, d.err)
					}
				}
			}
		}
	})
	// Every kernel is launched at some dtype; a variant no case launches
	// is one no op launches (its file is built for dtypes the op does not
	// use the kernel at: f32 helpers of 16-bit modules, the _rf32 kernels
	// of the f32 module), which detect reports as unused.
	names := map[string]bool{}
	for k := range got {
		names[k[:strings.IndexByte(k, '/')]] = true
	}
	unused := 0
	for _, v := range vs {
		if notOps[v.Kernel] {
			continue
		}
		if !names[v.Kernel] {
			t.Errorf("no conformance case launches %s at any dtype (%s)", v.Kernel, v.File)
		} else if !got[v.Kernel+"/"+v.DType.String()] {
			unused++
		}
	}
	t.Logf("%d unused variants", unused)
	t.Logf("%d kernel variants, %d launched by %d cases", len(vs), len(got), len(cases))
}

// notOps are kernels that no op of device.Device launches yet, so no
// conformance case can: each is checked by its own tests instead.
var notOps = map[string]bool{
	"cast_transpose_e4m3":       true, // fp8.go: TestLaunchCastTransposeFP8, TestGPUCastTransposeFP8, TestFP8EmulatorMatchesCPU
	"cast_transpose_e5m2":       true,
	"gelu_cast_transpose_e4m3":  true, // fp8_producers_test.go
	"cast_transpose_dbias_e5m2": true, // fp8_producers_test.go
	// fp8_dgelu_test.go
	"dgelu_cast_transpose_dbias_e5m2": true,
	"fp8_scale_update":                true, // fp8scale.go: TestLaunchFP8ScaleUpdate, TestGPUFP8ScaleUpdate, TestFP8ScaleEmulatorMatchesAmp
	// fp8.go: TestLaunchLayerNormFP8, TestGPULayerNormFP8, TestLayerNormFP8EmulatorMatchesCPU
	"layernorm_fp8_e4m3":          true,
	"residual_layernorm_fp8_e4m3": true,
	// fp8_lnbwd_test.go: TestLaunchLayerNormBackwardCastFP8, TestGPULayerNormBackwardCastFP8,
	// TestLayerNormBackwardCastFP8EmulatorMatchesCPU
	"layernorm_backward_cast_e5m2": true,
	// crossentropy_fp8.go: TestLaunchCrossEntropyFP8, TestGPUCrossEntropyFP8
	kernCEF8:    true,
	kernCEF8TMA: true,
	// fp8transpose.go: TestLaunchTransposeFP8, TestGPUTransposeFP8
	kernTransposeFP8: true,
	// adamw_fp8.go: TestLaunchAdamWStateFP8, TestGPUAdamWStateFP8, TestAdamWFP8EmulatorMatchesCPU
	"adamw_fp8_e4m3": true,
}

// TestGPUConformance runs every conformance case in every mode of the
// device against the CPU reference of the same form (what druto detect
// runs), and the Large cases but under -test.short (the compute-sanitizer
// runs), and checks that every case passes and every kernel variant that
// an op launches was launched and passed. Needs a GPU. The ops' GPU tests
// are these cases (package devicetest): their shapes, dtypes, in-place
// and unaligned calls and tolerances.
func TestGPUConformance(t *testing.T) {
	g := gpuDev(t, true)
	ref := cpu.New(device.Options{Fused: true})
	plain := cpu.New(device.Options{Fused: false})
	cases := devicetest.Cases()
	if !testing.Short() {
		cases = append(cases, devicetest.Large()...)
	}
	results, verdicts := g.SelfTest(ref, plain, cases, uint64(testRNG(t).Uint64()))
	failed, unsupported := 0, 0
	for _, r := range results {
		t.Logf("RESULT conformance %s pass %v relerr %.3g %s", r.Case, r.Pass, r.MaxRelErr, r.Error)
		switch {
		case !r.Pass:
			failed++
			t.Errorf("%s: %s", r.Case, r.Error)
		case r.Unsupported:
			unsupported++
		}
	}
	tested := 0
	for _, k := range g.Kernels() {
		v := verdicts[k.Kernel+"/"+k.DType.String()]
		if k.Err != nil || v == nil {
			continue
		}
		tested++
		if !v.Pass {
			t.Errorf("%s/%s: %s", k.Kernel, k.DType, v.Error)
		}
	}
	t.Logf("%d cases (%d failed, %d unsupported), %d of %d kernel variants launched", len(results), failed, unsupported, tested, len(g.Kernels()))
	if tested < len(g.Kernels())*3/4 {
		t.Errorf("only %d of %d kernel variants were launched", tested, len(g.Kernels()))
	}
	if g.Fused() != true || !g.flashV2 || g.noFlash {
		t.Errorf("SelfTest left the device switched: fused %v flashV2 %v noFlash %v", g.Fused(), g.flashV2, g.noFlash)
	}
}
