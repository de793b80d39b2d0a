package gpu

import (
	"slices"
	"strings"
	"testing"
)

// TestGEMMBenchRows: every GEMM micro-benchmark is in KernelOps, finish
// puts each compute-bound row beside the run's gemm_peak, and the table
// shows it.
func TestGEMMBenchRows(t *testing.T) {
	for _, op := range gemmOps {
		if !slices.Contains(KernelOps, op) {
			t.Errorf("%s missing from KernelOps", op)
		}
	}
	rs := finish([]KernelResult{
		{Name: "gemm_peak", Mode: "fused", TFLOPs: 800},
		{Name: "gemm_attn_proj_fwd", Mode: "fused", TFLOPs: 200, Ms: 2},
		{Name: "gemm_attn_proj_fwd", Mode: "fused-algo2", TFLOPs: 400, Ms: 1},
		{Name: "layernorm_fwd", Mode: "fused", GBps: 100},
	}, 4000, "copy")
	if rs[0].PctOfPeak != 100 || rs[1].PctOfPeak != 25 || rs[2].PctOfPeak != 50 || rs[3].PctOfPeak != 0 {
		t.Errorf("shares of the peak: %+v", rs)
	}
	tab := KernelTable(rs)
	if !strings.Contains(tab, "% peak") || !strings.Contains(tab, "25.0%") || !strings.Contains(tab, "0.50x") {
		t.Errorf("table:\n%s", tab)
	}
	if rs := finish([]KernelResult{{Name: "gemm_qkv_fwd", TFLOPs: 100}}, 0, ""); rs[0].PctOfPeak != 0 {
		t.Errorf("a share of a peak that was not measured: %+v", rs)
	}
	if _, err := newGEMMCase("gemm_nope", &Device{}); err == nil {
		t.Error("an unknown GEMM benchmark was accepted")
	}
}

// TestGPUGEMMBench runs two GEMM rows briefly: the fused and decomposed
// forms and the other heuristic candidates time, each row with TFLOP/s
// and the algorithms it ran named.
func TestGPUGEMMBench(t *testing.T) {
	g, p := gpuDev(t, true), gpuDev(t, false)
	rs, err := BenchKernels(g, p, KernelOptions{Warmup: 1, Repeats: 3, Ops: []string{"gemm_peak", "gemm_attn_proj_fwd", "gemm_mlp_proj_bwd"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", KernelTable(rs))
	modes := map[string][]string{}
	for _, r := range rs {
		if r.Name == "copy" { // the bandwidth reference row: no FLOPs, no GEMM
			if r.GBps <= 0 {
				t.Errorf("copy: %v GB/s", r.GBps)
			}
			continue
		}
		modes[r.Name] = append(modes[r.Name], r.Mode)
		if r.TFLOPs <= 0 || r.Ms <= 0 {
			t.Errorf("%s %s: %v TFLOP/s in %v ms", r.Name, r.Mode, r.TFLOPs, r.Ms)
		}
		if r.Name != "gemm_peak" && r.PctOfPeak <= 0 {
			t.Errorf("%s %s: no share of the peak", r.Name, r.Mode)
		}
		if r.Mode != "decomposed" && !strings.Contains(r.Shape, "cuBLASLt [#") {
			t.Errorf("%s %s: the algorithm is not named: %q", r.Name, r.Mode, r.Shape)
		}
		t.Logf("%s %s: %s", r.Name, r.Mode, r.Shape)
	}
	for _, n := range []string{"gemm_attn_proj_fwd", "gemm_mlp_proj_bwd"} {
		if m := modes[n]; len(m) < 2 || m[0] != "fused" || !slices.Contains(m, "decomposed") {
			t.Errorf("%s: forms %v", n, m)
		}
	}
	if m := modes["gemm_peak"]; len(m) < 1 || m[0] != "fused" {
		t.Errorf("gemm_peak: forms %v", m)
	}
	for _, c := range g.LtChoices() {
		t.Log(c)
	}
}

// TestGEMMTuneEnv: DRUTO_GEMM_TUNE takes 1, 0 or nothing; anything else
// is one clear error.
func TestGEMMTuneEnv(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "1": true} {
		t.Setenv(GEMMTuneEnv, v)
		if on, err := gemmTuneEnv(); err != nil || on != want {
			t.Errorf("%q: %v, %v", v, on, err)
		}
	}
	t.Setenv(GEMMTuneEnv, "yes")
	if _, err := gemmTuneEnv(); err == nil || !strings.Contains(err.Error(), "DRUTO_GEMM_TUNE") {
		t.Errorf("a bad value: %v", err)
	}
}
