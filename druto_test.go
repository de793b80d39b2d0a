package druto

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/druto/druto/kernels"
	"github.com/druto/druto/pkg/cuda"
)

// requireGPU reports whether this run must find a usable GPU
// (DRUTO_REQUIRE_GPU=1, set on the GPU machine).
func requireGPU() bool { return os.Getenv("DRUTO_REQUIRE_GPU") == "1" }

// checkKernels asserts that every kernel came the expected way and passed
// every self-test case, and logs the numbers.
func checkKernels(t *testing.T, r Report, want kernels.From) {
	t.Helper()
	vs, err := kernels.Variants()
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kernels) != len(vs) {
		t.Fatalf("%d kernels reported, %d variants exist", len(r.Kernels), len(vs))
	}
	for _, k := range r.Kernels {
		if k.Status != want || k.Error != "" || k.SelfTest == nil {
			t.Fatalf("%s/%s: status %s (want %s), error %q, why not NVRTC %q", k.Name, k.DType, k.Status, want, k.Error, k.Fallback)
		}
		if !k.SelfTest.Pass || len(k.SelfTest.Cases) != len(SelfTestShapes) {
			t.Errorf("%s/%s: self-test %+v", k.Name, k.DType, *k.SelfTest)
		}
		for _, c := range k.SelfTest.Cases {
			t.Logf("%s/%-4s %-14s (%3d,%4d) rel err out %.3g mean %.3g rstd %.3g pass %v %s", k.Name, k.DType, k.Status,
				c.N, c.C, c.RelErrOut, c.RelErrMean, c.RelErrRstd, c.Pass, c.Mismatch)
		}
		t.Logf("%s/%-4s compile %.1f ms, load %.1f ms, attributes %+v", k.Name, k.DType, k.CompileMS, k.LoadMS, *k.Attr)
	}
}

// TestDetect checks the report on whatever machine runs it: without a GPU
// the CPU with the reason; with one, every kernel NVRTC-compiled (or from
// PTX without NVRTC) and passing its self-test, and the honest reason that
// the GPU backend is not built yet.
func TestDetect(t *testing.T) {
	r := DetectWith(context.Background(), Options{CacheDir: t.TempDir()})
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("report:\n%s", js)
	if r.Backend != BackendCPU || r.Reason == "" || r.Time == "" || r.Host.CPUs <= 0 {
		t.Fatalf("backend %q reason %q", r.Backend, r.Reason)
	}
	if !r.GPUUsable {
		if requireGPU() {
			t.Fatalf("DRUTO_REQUIRE_GPU=1 but no usable GPU: %s; errors %q", r.Reason, r.Errors)
		}
		if !strings.Contains(r.Reason, "using the CPU") {
			t.Fatalf("reason %q does not say what is used", r.Reason)
		}
		return
	}
	if !strings.Contains(r.Reason, "not built yet") || len(r.Devices) == 0 || r.Driver == nil || r.Driver.CUDA == "" {
		t.Fatalf("GPU report: reason %q, devices %v, driver %v", r.Reason, r.Devices, r.Driver)
	}
	for _, l := range r.Libraries {
		if !l.Found || l.Path == "" || l.Version == "" {
			t.Errorf("library %s: %+v", l.Name, l)
		}
	}
	want := kernels.FromNVRTC
	if !r.Libraries[1].Found {
		want = kernels.FromPTX
	}
	checkKernels(t, r, want)
}

// TestDetectCacheAndPTX: a second detection with the same cache loads the
// cached cubins; with NVRTC hidden every kernel is JIT-compiled from the
// embedded PTX and still passes.
func TestDetectCacheAndPTX(t *testing.T) {
	dir := t.TempDir()
	first := DetectWith(context.Background(), Options{CacheDir: dir})
	if !first.GPUUsable {
		if requireGPU() {
			t.Fatalf("no usable GPU: %s", first.Reason)
		}
		t.Skipf("no usable GPU: %s", first.Reason)
	}
	second := DetectWith(context.Background(), Options{CacheDir: dir})
	checkKernels(t, second, kernels.FromCache)
	t.Logf("detect: first %.1f ms (NVRTC), second %.1f ms (cache)", first.Millis, second.Millis)

	ptx := DetectWith(context.Background(), Options{CacheDir: dir, Load: cuda.LoadOptions{NoNVRTC: true}})
	checkKernels(t, ptx, kernels.FromPTX)
	t.Logf("detect with NVRTC hidden: %.1f ms (PTX JIT)", ptx.Millis)
}

// TestDetectNoDriver: with the library search pointed at an empty
// directory, detection reports the CPU and why.
func TestDetectNoDriver(t *testing.T) {
	r := DetectWith(context.Background(), Options{Load: cuda.LoadOptions{LibDir: t.TempDir(), OnlyLibDir: true}})
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
	none := cuda.LoadOptions{LibDir: t.TempDir(), OnlyLibDir: true}
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
