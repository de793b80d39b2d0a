package druto

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/druto/druto/pkg/device/gpu"
	"github.com/druto/druto/pkg/gpt"
)

// TestStepCache: a verdict kept under one key comes back from this process
// and, after forget, from the disk; other GPUs, drivers, forms and kernel
// builds get other keys; NoCache writes nothing; a corrupt or foreign file
// is ignored.
func TestStepCache(t *testing.T) {
	defer forget()
	dir := t.TempDir()
	o := Options{CacheDir: dir}
	r := &Report{
		Driver:  &Driver{CUDA: "13.0"},
		Devices: []Device{{DeviceInfo: gpu.DeviceInfo{Name: "NVIDIA H200", PCIBus: 3, TotalMem: 1 << 37}, Arch: "sm_90"}},
		Kernels: []Kernel{{Name: "layernorm_forward", DType: "bf16", Arch: "sm_90", Status: gpu.FromNVRTC}},
	}
	key := stepKey(r, true)
	if key == "" {
		t.Fatal("no key (the test binary's file could not be hashed)")
	}
	if key != stepKey(r, true) {
		t.Fatal("the key is not deterministic")
	}
	if _, ok := cachedSteps(o, key); ok {
		t.Fatal("a verdict before any was kept")
	}
	v := stepVerdict{Key: key, Usable: true, Checks: []StepCheck{{StepDiff: gpt.StepDiff{Policy: "fp32", GradRelErr: 1e-7}, Pass: true}}}
	if err := keepSteps(o, v); err != nil {
		t.Fatal(err)
	}
	forget()
	got, ok := cachedSteps(o, key)
	if !ok || !got.Usable || len(got.Checks) != 1 || got.Checks[0].GradRelErr != 1e-7 {
		t.Fatalf("from disk: %v %+v", ok, got)
	}

	// Everything the verdict depends on changes the key.
	cached := *r
	cached.Kernels = []Kernel{{Name: "layernorm_forward", DType: "bf16", Arch: "sm_90", Status: gpu.FromCache}}
	if stepKey(&cached, true) != key {
		t.Error("a cached cubin (the same NVRTC output) changed the key")
	}
	variants := map[string]func(r *Report){
		"decomposed": nil,
		"other GPU":  func(r *Report) { r.Devices = []Device{{DeviceInfo: gpu.DeviceInfo{Name: "NVIDIA T4"}, Arch: "sm_75"}} },
		"driver":     func(r *Report) { r.Driver = &Driver{CUDA: "12.8"} },
		"PTX build": func(r *Report) {
			r.Kernels = []Kernel{{Name: "layernorm_forward", DType: "bf16", Arch: "sm_90", Status: gpu.FromPTX}}
		},
	}
	for name, change := range variants {
		c := *r
		fused := true
		if change == nil {
			fused = false
		} else {
			change(&c)
		}
		if k := stepKey(&c, fused); k == key || k == "" {
			t.Errorf("%s: key %q (same as the original: %v)", name, k, k == key)
		}
	}

	// NoCache keeps the verdict in this process only.
	forget()
	nc := Options{CacheDir: t.TempDir(), NoCache: true}
	if err := keepSteps(nc, v); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(nc.CacheDir); len(ents) != 0 {
		t.Errorf("NoCache wrote %d entries", len(ents))
	}

	// A corrupt or foreign file is not believed.
	forget()
	f := stepCacheFile(o, key)
	for _, bad := range []string{"{not json", `{"key":"other","usable":true,"step_checks":[{"policy":"fp32","pass":true}]}`, `{"key":"` + key + `","usable":true}`} {
		if err := os.WriteFile(f, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, ok := cachedSteps(o, key); ok {
			t.Errorf("believed %q: %+v", bad, got)
		}
	}
	if filepath.Dir(f) != filepath.Join(dir, "stepchecks") {
		t.Errorf("cache file %s not beside the kernel cache %s", f, dir)
	}
}
