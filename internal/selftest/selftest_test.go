package selftest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/druto/druto/kernels"
	"github.com/druto/druto/pkg/device/devicetest"
	"github.com/druto/druto/pkg/device/gpu"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/train"
)

// h200 is what detection found on an H200, as the key sees it.
func h200() Subject {
	return Subject{
		Device:    gpu.DeviceInfo{Name: "NVIDIA H200", PCIBus: 3, TotalMem: 1 << 37, Major: 9},
		CUDA:      "13.0",
		Kernels:   []*gpu.Built{built(gpu.FromNVRTC)},
		Attention: "flash kernels; flash backend: cudnn 9.8.0",
		Fused:     true,
	}
}

// built is the bf16 layernorm_forward kernel for sm_90, obtained from.
func built(from gpu.From) *gpu.Built {
	return &gpu.Built{Variant: kernels.Variant{Kernel: "layernorm_forward", DType: kernels.BF16}, Arch: "sm_90", From: from}
}

// passing is a whole verdict for key: op tests, a kernel verdict and the
// step checks, all passing.
func passing(key string) Verdict {
	return Verdict{Key: key, Usable: true,
		OpTests: []devicetest.Result{{Case: "fused: LayerNorm bf16 [17 96]", Pass: true, MaxRelErr: 2e-3}},
		Kernels: map[string]*gpu.KernelTest{"layernorm_forward/bf16": {Pass: true, MaxRelErr: 2e-3, Cases: []string{"fused: LayerNorm bf16 [17 96]"}}},
		Checks:  []train.StepCheck{{StepDiff: gpt.StepDiff{Policy: "fp32", GradRelErr: 1e-7}, Pass: true}}}
}

// TestVerdictCache: a verdict kept under one key comes back from this
// process and, after Forget, from the disk, op tests and kernel verdicts
// included; other GPUs, drivers, forms, kernel builds, attention backends,
// NVRTC versions and environments get other keys; Off writes nothing; a
// corrupt, foreign or failing record is ignored and never kept.
func TestVerdictCache(t *testing.T) {
	defer Forget()
	dir := t.TempDir()
	o := Cache{Dir: dir}
	s := h200()
	key := Key(s)
	if key == "" {
		t.Fatal("no key (the test binary's file could not be hashed)")
	}
	if key != Key(s) {
		t.Fatal("the key is not deterministic")
	}
	if _, ok := o.Load(key); ok {
		t.Fatal("a verdict before any was kept")
	}
	v := passing(key)
	if err := o.Keep(v); err != nil {
		t.Fatal(err)
	}
	Forget()
	got, ok := o.Load(key)
	if !ok || !got.Usable || len(got.Checks) != 1 || got.Checks[0].GradRelErr != 1e-7 ||
		len(got.OpTests) != 1 || got.OpTests[0].MaxRelErr != 2e-3 || got.Kernels["layernorm_forward/bf16"] == nil ||
		len(got.Kernels["layernorm_forward/bf16"].Cases) != 1 {
		t.Fatalf("from disk: %v %+v", ok, got)
	}

	// Everything the verdict depends on changes the key.
	cached := s
	cached.Kernels = []*gpu.Built{built(gpu.FromCache)}
	if Key(cached) != key {
		t.Error("a cached cubin (the same NVRTC output) changed the key")
	}
	variants := map[string]func(s *Subject){
		"decomposed": func(s *Subject) { s.Fused = false },
		"other GPU":  func(s *Subject) { s.Device = gpu.DeviceInfo{Name: "NVIDIA T4", Major: 7, Minor: 5} },
		"driver":     func(s *Subject) { s.CUDA = "12.8" },
		"PTX build":  func(s *Subject) { s.Kernels = []*gpu.Built{built(gpu.FromPTX)} },
		"cuDNN off":  func(s *Subject) { s.Attention = "flash kernels; flash backend: own (DRUTO_ATTENTION=own)" },
		"NVRTC":      func(s *Subject) { s.Libraries = []gpu.LibInfo{{}, {Version: "13.0"}} },
	}
	for name, change := range variants {
		c := s
		change(&c)
		if k := Key(c); k == key || k == "" {
			t.Errorf("%s: key %q (same as the original: %v)", name, k, k == key)
		}
	}
	t.Setenv(gpu.GEMMTuneEnv, "off")
	if Key(s) == key {
		t.Errorf("%s changed nothing in the key", gpu.GEMMTuneEnv)
	}

	// Off keeps the verdict in this process only.
	Forget()
	nc := Cache{Dir: t.TempDir(), Off: true}
	if err := nc.Keep(v); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(nc.Dir); len(ents) != 0 {
		t.Errorf("Off wrote %d entries", len(ents))
	}

	// A failing verdict is never kept.
	Forget()
	for name, bad := range map[string]func(v *Verdict){
		"failed op test": func(v *Verdict) { v.OpTests = append(v.OpTests, devicetest.Result{Case: "fused: GELU f32 [4]"}) },
		"no op tests":    func(v *Verdict) { v.OpTests = nil },
		"unusable":       func(v *Verdict) { v.Usable = false },
		"no step checks": func(v *Verdict) { v.Checks = nil },
	} {
		k := Key(Subject{Device: s.Device, CUDA: s.CUDA, Attention: name, Fused: true})
		b := passing(k)
		bad(&b)
		if err := o.Keep(b); err != nil {
			t.Fatal(err)
		}
		if _, ok := o.Load(k); ok {
			t.Errorf("%s: kept", name)
		}
		if _, err := os.Stat(o.File(k)); err == nil {
			t.Errorf("%s: written to disk", name)
		}
	}

	// A corrupt, foreign or failing file is not believed.
	f := o.File(key)
	for _, bad := range []string{"{not json",
		`{"key":"other","usable":true,"op_tests":[{"case":"a","pass":true}],"step_checks":[{"policy":"fp32","pass":true}]}`,
		`{"key":"` + key + `","usable":true,"op_tests":[{"case":"a","pass":true}]}`,
		`{"key":"` + key + `","usable":true,"step_checks":[{"policy":"fp32","pass":true}]}`,
		`{"key":"` + key + `","usable":true,"op_tests":[{"case":"a","pass":false}],"step_checks":[{"policy":"fp32","pass":true}]}`} {
		if err := os.WriteFile(f, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, ok := o.Load(key); ok {
			t.Errorf("believed %q: %+v", bad, got)
		}
	}
	if filepath.Dir(f) != filepath.Join(dir, "selftest") {
		t.Errorf("cache file %s not beside the kernel cache %s", f, dir)
	}
}

// TestOps: Open (not fresh) reuses a cached op-test verdict without
// running the cases; detect (fresh) runs them every time, keeps the cached
// step checks when they pass, and drops the cached record when one fails,
// so that the next Open tests again instead of trusting the older pass.
func TestOps(t *testing.T) {
	defer Forget()
	o := Cache{Dir: t.TempDir()}
	key := Key(h200())
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
		if v, cached := o.Ops(key, fresh, pass); cached || runs != 1 || len(v.OpTests) != 1 || len(v.Checks) != 0 {
			t.Fatalf("empty cache, fresh %v: cached %v, %d runs, %+v", fresh, cached, runs, v)
		}
		runs = 0
	}
	if err := o.Keep(passing(key)); err != nil {
		t.Fatal(err)
	}
	Forget() // only the disk copy is left

	if v, cached := o.Ops(key, false, pass); !cached || runs != 0 || !v.Whole(key) {
		t.Fatalf("Open: cached %v, %d runs, %+v", cached, runs, v)
	}
	if v, cached := o.Ops(key, true, pass); cached || runs != 1 || !v.Whole(key) || len(v.Checks) != 1 {
		t.Fatalf("detect, passing: cached %v, %d runs, %+v (want the cached step checks kept)", cached, runs, v)
	}
	runs = 0
	v, cached := o.Ops(key, true, fail)
	if cached || runs != 1 || OpsPass(v.OpTests) || len(v.Checks) != 0 {
		t.Fatalf("detect, failing: cached %v, %d runs, %+v", cached, runs, v)
	}
	if _, err := os.Stat(o.File(key)); !os.IsNotExist(err) {
		t.Errorf("a failing detect left the cached record on disk: %v", err)
	}
	runs = 0
	if _, cached := o.Ops(key, false, fail); cached || runs != 1 {
		t.Errorf("Open after a failing detect reused a verdict (cached %v, %d runs)", cached, runs)
	}
}
