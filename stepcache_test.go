package druto

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/druto/druto/pkg/device/devicetest"
	"github.com/druto/druto/pkg/device/gpu"
	"github.com/druto/druto/pkg/gpt"
)

// cacheReport is a detection report of an H200, as the key sees it.
func cacheReport() *Report {
	return &Report{
		Driver:    &Driver{CUDA: "13.0"},
		Devices:   []Device{{DeviceInfo: gpu.DeviceInfo{Name: "NVIDIA H200", PCIBus: 3, TotalMem: 1 << 37}, Arch: "sm_90"}},
		Kernels:   []Kernel{{Name: "layernorm_forward", DType: "bf16", Arch: "sm_90", Status: gpu.FromNVRTC}},
		Attention: "flash kernels; flash backend: cudnn 9.8.0",
	}
}

// passing is a whole verdict for key: op tests, a kernel verdict and the
// step checks, all passing.
func passing(key string) verdict {
	return verdict{Key: key, Usable: true,
		OpTests: []devicetest.Result{{Case: "fused: LayerNorm bf16 [17 96]", Pass: true, MaxRelErr: 2e-3}},
		Kernels: map[string]*gpu.KernelTest{"layernorm_forward/bf16": {Pass: true, MaxRelErr: 2e-3, Cases: []string{"fused: LayerNorm bf16 [17 96]"}}},
		Checks:  []StepCheck{{StepDiff: gpt.StepDiff{Policy: "fp32", GradRelErr: 1e-7}, Pass: true}}}
}

// TestVerdictCache: a verdict kept under one key comes back from this
// process and, after forget, from the disk, op tests and kernel verdicts
// included; other GPUs, drivers, forms, kernel builds, attention backends
// and environments get other keys; NoCache writes nothing; a corrupt,
// foreign or failing record is ignored and never kept.
func TestVerdictCache(t *testing.T) {
	defer forget()
	dir := t.TempDir()
	o := Options{CacheDir: dir}
	r := cacheReport()
	key := verdictKey(r, true)
	if key == "" {
		t.Fatal("no key (the test binary's file could not be hashed)")
	}
	if key != verdictKey(r, true) {
		t.Fatal("the key is not deterministic")
	}
	if _, ok := cachedVerdict(o, key); ok {
		t.Fatal("a verdict before any was kept")
	}
	v := passing(key)
	if err := keepVerdict(o, v); err != nil {
		t.Fatal(err)
	}
	forget()
	got, ok := cachedVerdict(o, key)
	if !ok || !got.Usable || len(got.Checks) != 1 || got.Checks[0].GradRelErr != 1e-7 ||
		len(got.OpTests) != 1 || got.OpTests[0].MaxRelErr != 2e-3 || got.Kernels["layernorm_forward/bf16"] == nil ||
		len(got.Kernels["layernorm_forward/bf16"].Cases) != 1 {
		t.Fatalf("from disk: %v %+v", ok, got)
	}

	// Everything the verdict depends on changes the key.
	cached := *r
	cached.Kernels = []Kernel{{Name: "layernorm_forward", DType: "bf16", Arch: "sm_90", Status: gpu.FromCache}}
	if verdictKey(&cached, true) != key {
		t.Error("a cached cubin (the same NVRTC output) changed the key")
	}
	variants := map[string]func(r *Report){
		"decomposed": nil,
		"other GPU":  func(r *Report) { r.Devices = []Device{{DeviceInfo: gpu.DeviceInfo{Name: "NVIDIA T4"}, Arch: "sm_75"}} },
		"driver":     func(r *Report) { r.Driver = &Driver{CUDA: "12.8"} },
		"PTX build": func(r *Report) {
			r.Kernels = []Kernel{{Name: "layernorm_forward", DType: "bf16", Arch: "sm_90", Status: gpu.FromPTX}}
		},
		"cuDNN off": func(r *Report) { r.Attention = "flash kernels; flash backend: own (DRUTO_ATTENTION=own)" },
	}
	for name, change := range variants {
		c := *r
		fused := true
		if change == nil {
			fused = false
		} else {
			change(&c)
		}
		if k := verdictKey(&c, fused); k == key || k == "" {
			t.Errorf("%s: key %q (same as the original: %v)", name, k, k == key)
		}
	}
	t.Setenv(gpu.GEMMTuneEnv, "off")
	if verdictKey(r, true) == key {
		t.Errorf("%s changed nothing in the key", gpu.GEMMTuneEnv)
	}

	// NoCache keeps the verdict in this process only.
	forget()
	nc := Options{CacheDir: t.TempDir(), NoCache: true}
	if err := keepVerdict(nc, v); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(nc.CacheDir); len(ents) != 0 {
		t.Errorf("NoCache wrote %d entries", len(ents))
	}

	// A failing verdict is never kept.
	forget()
	for name, bad := range map[string]func(v *verdict){
		"failed op test": func(v *verdict) { v.OpTests = append(v.OpTests, devicetest.Result{Case: "fused: GELU f32 [4]"}) },
		"no op tests":    func(v *verdict) { v.OpTests = nil },
		"unusable":       func(v *verdict) { v.Usable = false },
		"no step checks": func(v *verdict) { v.Checks = nil },
	} {
		k := verdictKey(&Report{Driver: r.Driver, Devices: r.Devices, Attention: name}, true)
		b := passing(k)
		bad(&b)
		if err := keepVerdict(o, b); err != nil {
			t.Fatal(err)
		}
		if _, ok := cachedVerdict(o, k); ok {
			t.Errorf("%s: kept", name)
		}
		if _, err := os.Stat(verdictFile(o, k)); err == nil {
			t.Errorf("%s: written to disk", name)
		}
	}

	// A corrupt, foreign or failing file is not believed.
	f := verdictFile(o, key)
	for _, bad := range []string{"{not json",
		`{"key":"other","usable":true,"op_tests":[{"case":"a","pass":true}],"step_checks":[{"policy":"fp32","pass":true}]}`,
		`{"key":"` + key + `","usable":true,"op_tests":[{"case":"a","pass":true}]}`,
		`{"key":"` + key + `","usable":true,"step_checks":[{"policy":"fp32","pass":true}]}`,
		`{"key":"` + key + `","usable":true,"op_tests":[{"case":"a","pass":false}],"step_checks":[{"policy":"fp32","pass":true}]}`} {
		if err := os.WriteFile(f, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, ok := cachedVerdict(o, key); ok {
			t.Errorf("believed %q: %+v", bad, got)
		}
	}
	if filepath.Dir(f) != filepath.Join(dir, "selftest") {
		t.Errorf("cache file %s not beside the kernel cache %s", f, dir)
	}
}

// TestOpVerdict: Open (not fresh) reuses a cached op-test verdict without
// running the cases; detect (fresh) runs them every time, keeps the cached
// step checks when they pass, and drops the cached record when one fails,
// so that the next Open tests again instead of trusting the older pass.
func TestOpVerdict(t *testing.T) {
	defer forget()
	o := Options{CacheDir: t.TempDir()}
	key := verdictKey(cacheReport(), true)
	runs := 0
	pass := func() ([]devicetest.Result, map[string]*gpu.KernelTest) {
		runs++
		p := passing(key)
		return p.OpTests, p.Kernels
	}
	fail := func() ([]devicetest.Result, map[string]*gpu.KernelTest) {
		runs++
		return []devicetest.Result{{Case: "fused: LayerNorm bf16 [17 96]", Error: "max rel err 0.5"}}, nil
	}

	// Nothing cached: both run the cases.
	for _, fresh := range []bool{false, true} {
		if v, cached := opVerdict(o, key, fresh, pass); cached || runs != 1 || len(v.OpTests) != 1 || len(v.Checks) != 0 {
			t.Fatalf("empty cache, fresh %v: cached %v, %d runs, %+v", fresh, cached, runs, v)
		}
		runs = 0
	}
	if err := keepVerdict(o, passing(key)); err != nil {
		t.Fatal(err)
	}
	forget() // only the disk copy is left

	if v, cached := opVerdict(o, key, false, pass); !cached || runs != 0 || !v.whole(key) {
		t.Fatalf("Open: cached %v, %d runs, %+v", cached, runs, v)
	}
	if v, cached := opVerdict(o, key, true, pass); cached || runs != 1 || !v.whole(key) || len(v.Checks) != 1 {
		t.Fatalf("detect, passing: cached %v, %d runs, %+v (want the cached step checks kept)", cached, runs, v)
	}
	runs = 0
	v, cached := opVerdict(o, key, true, fail)
	if cached || runs != 1 || opsPass(v.OpTests) || len(v.Checks) != 0 {
		t.Fatalf("detect, failing: cached %v, %d runs, %+v", cached, runs, v)
	}
	if _, err := os.Stat(verdictFile(o, key)); !os.IsNotExist(err) {
		t.Errorf("a failing detect left the cached record on disk: %v", err)
	}
	runs = 0
	if _, cached := opVerdict(o, key, false, fail); cached || runs != 1 {
		t.Errorf("Open after a failing detect reused a verdict (cached %v, %d runs)", cached, runs)
	}
}
