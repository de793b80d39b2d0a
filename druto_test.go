package druto

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/druto/druto/internal/gputest"
	"github.com/druto/druto/internal/selftest"
	"github.com/druto/druto/kernels"
	"github.com/druto/druto/pkg/device/gpu"
)

// checkKernels asserts that every kernel came the expected way and has a
// passing self-test (or is unused by every op), that every conformance
// case passed, and that the step checks passed; it logs the numbers.
func checkKernels(t *testing.T, r Report, want gpu.From) {
	t.Helper()
	vs, err := kernels.Variants()
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kernels) != len(vs) {
		t.Fatalf("%d kernels reported, %d variants exist", len(r.Kernels), len(vs))
	}
	tested := 0
	for _, k := range r.Kernels {
		if k.Status != want || k.Error != "" {
			t.Fatalf("%s/%s: status %s (want %s), error %q, why not NVRTC %q", k.Name, k.DType, k.Status, want, k.Error, k.Fallback)
		}
		if k.SelfTest == nil || !k.SelfTest.Pass {
			t.Fatalf("%s/%s: self-test %+v", k.Name, k.DType, k.SelfTest)
		}
		if !k.SelfTest.Unused {
			tested++
		}
		t.Logf("%s/%-4s compile %.1f ms, load %.1f ms, self-test max rel err %.3g over %d cases (unused %v)",
			k.Name, k.DType, k.CompileMS, k.LoadMS, k.SelfTest.MaxRelErr, len(k.SelfTest.Cases), k.SelfTest.Unused)
	}
	if tested < len(vs)*3/4 {
		t.Errorf("only %d of %d kernels were self-tested", tested, len(vs))
	}
	for _, c := range r.OpTests {
		if !c.Pass {
			t.Errorf("op test %s: %s", c.Case, c.Error)
		}
	}
	checkSteps(t, r)
}

// checkSteps asserts that the step checks ran for every policy and passed
// (on a GPU without bf16 the bf16 step may instead be unavailable).
func checkSteps(t *testing.T, r Report) {
	t.Helper()
	if len(r.StepChecks) != 3 {
		t.Fatalf("%d step checks, want fp32, bf16 and fp16: %+v", len(r.StepChecks), r.StepChecks)
	}
	for _, s := range r.StepChecks {
		t.Logf("step check %-4s pass %v loss err %.3g grad err %.3g (limit %.3g) %s", s.Policy, s.Pass, s.LossRelErr, s.GradRelErr, s.Limit, s.Error)
		if s.Error != "" && s.Policy != "fp32" && r.Devices[0].Major < 8 {
			continue // no 16-bit GEMM of this kind before sm_80: reported unavailable
		}
		if !s.Pass || s.Error != "" {
			t.Errorf("step check %s failed: %+v", s.Policy, s)
		}
	}
}

// TestDetect checks the report on whatever machine runs it: without a GPU
// the CPU with the reason; with one, the GPU backend, every kernel
// NVRTC-compiled (or from PTX without NVRTC), the self-tests and the step
// checks passing.
func TestDetect(t *testing.T) {
	r := DetectWith(context.Background(), Options{CacheDir: t.TempDir(), Fused: true})
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("report:\n%s", js)
	if r.Reason == "" || r.Time == "" || r.Host.CPUs <= 0 {
		t.Fatalf("backend %q reason %q time %q host %+v", r.Backend, r.Reason, r.Time, r.Host)
	}
	if !r.GPUUsable {
		if gputest.Required() {
			t.Fatalf("DRUTO_REQUIRE_GPU=1 but no usable GPU: %s; errors %q", r.Reason, r.Errors)
		}
		if r.Backend != BackendCPU || !strings.Contains(r.Reason, "using the CPU") {
			t.Fatalf("backend %q, reason %q does not say what is used", r.Backend, r.Reason)
		}
		return
	}
	if r.Backend != BackendGPU || !strings.Contains(r.Reason, "is usable") || len(r.Devices) == 0 || r.Driver == nil || r.Driver.CUDA == "" {
		t.Fatalf("GPU report: backend %q, reason %q, devices %v, driver %v", r.Backend, r.Reason, r.Devices, r.Driver)
	}
	for _, l := range r.Libraries {
		if !l.Found || l.Path == "" || l.Version == "" {
			t.Errorf("library %s: %+v", l.Name, l)
		}
	}
	want := gpu.FromNVRTC
	if !r.Libraries[1].Found {
		want = gpu.FromPTX
	}
	checkKernels(t, r, want)
}

// TestDetectCacheAndPTX: a second detection with the same cache loads the
// cached cubins and the cached step-check verdict but runs the op tests
// again; Open then reuses the whole verdict; with NVRTC hidden every
// kernel is JIT-compiled from the embedded PTX and still passes (a new
// build kind, so the step checks run again).
func TestDetectCacheAndPTX(t *testing.T) {
	dir := t.TempDir()
	selftest.Forget() // TestDetect's verdict, kept in this process, has the same key
	first := DetectWith(context.Background(), Options{CacheDir: dir, Fused: true})
	if !first.GPUUsable {
		if gputest.Required() {
			t.Fatalf("no usable GPU: %s", first.Reason)
		}
		t.Skipf("no usable GPU: %s", first.Reason) // require: DRUTO_REQUIRE_GPU
	}
	if first.StepChecksCached {
		t.Fatalf("first detection in a fresh cache reports cached step checks")
	}
	selftest.Forget() // only the disk copy is left
	second := DetectWith(context.Background(), Options{CacheDir: dir, Fused: true})
	checkKernels(t, second, gpu.FromCache)
	if !second.StepChecksCached {
		t.Errorf("second detection ran the step checks again (not cached)")
	}
	if first.OpTestsCached || second.OpTestsCached {
		t.Errorf("detect reused the op tests (first %v, second %v): it must run them afresh", first.OpTestsCached, second.OpTestsCached)
	}
	t.Logf("detect: first %.1f ms (NVRTC, step checks), second %.1f ms (cache)", first.Millis, second.Millis)

	// Open (train, each bench mode) reuses the whole verdict from disk: no
	// conformance case and no step check runs.
	selftest.Forget()
	dev, open, err := Open(Options{Backend: BackendGPU, CacheDir: dir, Fused: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.(*gpu.Device).Close(); err != nil {
		t.Error(err)
	}
	checkKernels(t, open, gpu.FromCache)
	if !open.OpTestsCached || !open.StepChecksCached {
		t.Errorf("Open ran the self-test again: op tests cached %v, step checks cached %v", open.OpTestsCached, open.StepChecksCached)
	}
	t.Logf("Open with the cached verdict: %.1f ms (detect: %.1f ms)", open.Millis, second.Millis)

	ptx := DetectWith(context.Background(), Options{CacheDir: dir, Fused: true, Load: gpu.LoadOptions{NoNVRTC: true}})
	checkKernels(t, ptx, gpu.FromPTX)
	if ptx.StepChecksCached {
		t.Errorf("PTX-built kernels reused the NVRTC build's step-check verdict")
	}
	t.Logf("detect with NVRTC hidden: %.1f ms (PTX JIT)", ptx.Millis)
}

// TestDetectNoDriver: with the library search pointed at an empty
// directory, detection reports the CPU and why.
func TestDetectNoDriver(t *testing.T) {
	r := DetectWith(context.Background(), Options{Load: gpu.LoadOptions{LibDir: t.TempDir(), OnlyLibDir: true}})
	if r.Backend != BackendCPU || r.GPUUsable || r.Driver != nil {
		t.Fatalf("report %+v", r)
	}
	if r.GPUSupport {
		if !strings.Contains(r.Reason, "no CUDA driver") || len(r.Errors) == 0 || !strings.Contains(r.Errors[0], "libcuda.so.1") {
			t.Fatalf("reason %q, errors %q", r.Reason, r.Errors)
		}
		if len(r.Libraries) != 5 || r.Libraries[0].Found {
			t.Fatalf("libraries %+v", r.Libraries)
		}
	} else if !strings.Contains(r.Reason, "CGO_ENABLED=0") {
		t.Fatalf("reason %q", r.Reason)
	}
}

// TestOpen: the cpu backend, auto (the CPU today, with detection's reason),
// gpu (an error saying why) and an unknown name.
func TestOpen(t *testing.T) {
	d, r, err := Open(Options{Backend: BackendCPU, Threads: 2, Fused: true})
	if err != nil || !strings.HasPrefix(d.Name(), "cpu") || !d.Fused() || r.Backend != BackendCPU {
		t.Fatalf("cpu: %v %v %+v", d, err, r)
	}
	none := gpu.LoadOptions{LibDir: t.TempDir(), OnlyLibDir: true}
	d, r, err = Open(Options{Backend: BackendAuto, Load: none})
	if err != nil || d == nil || r.Backend != BackendCPU || r.Reason == "" {
		t.Fatalf("auto: %v %v %+v", d, err, r)
	}
	if _, _, err := Open(Options{Backend: BackendGPU, Load: none}); err == nil || !strings.Contains(err.Error(), "no usable GPU") {
		t.Fatalf("gpu without a GPU: %v", err)
	}
	if _, _, err := Open(Options{Backend: "tpu"}); err == nil || !strings.Contains(err.Error(), "unknown backend") {
		t.Fatalf("unknown backend: %v", err)
	}
}

// TestOpenHonoursDRUTOFUSED: DRUTO_FUSED=0 turns fusion off in Open, as in
// the CLI, whatever Options.Fused says.
func TestOpenHonoursDRUTOFUSED(t *testing.T) {
	t.Setenv("DRUTO_FUSED", "0")
	d, _, err := Open(Options{Backend: BackendCPU, Fused: true, Threads: 1})
	if err != nil || d.Fused() {
		t.Fatalf("DRUTO_FUSED=0: fused %v, err %v", d != nil && d.Fused(), err)
	}
	t.Setenv("DRUTO_FUSED", "1")
	if d, _, err = Open(Options{Backend: BackendCPU, Fused: true, Threads: 1}); err != nil || !d.Fused() {
		t.Fatalf("DRUTO_FUSED=1: fused %v, err %v", d != nil && d.Fused(), err)
	}
}
