package plotting

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseMetrics(t *testing.T) {
	in := `{"step":1,"loss":5.54,"lr":0.0006,"grad_norm":1.2,"tokens_per_s":9000,"ms_per_step":110,"loss_scale":65536,"skipped":0}
{"event":"sample","step":1,"text":"ধাপ"}

{"step":2,"loss":5.2,"lr":0.0006,"future_field":[1,2],"val_loss":5.1}
{"step":3,"val_loss":4.9}
`
	run, err := ParseMetrics(strings.NewReader(in), "r1")
	if err != nil {
		t.Fatal(err)
	}
	want := []Metric{
		{Step: 1, Loss: 5.54, LR: 0.0006, GradNorm: 1.2, TokensPerS: 9000, MsPerStep: 110, LossScale: 65536, HasLoss: true},
		{Step: 2, Loss: 5.2, LR: 0.0006, ValLoss: 5.1, HasLoss: true, HasValLoss: true},
		{Step: 3, ValLoss: 4.9, HasValLoss: true},
	}
	if run.Label != "r1" || len(run.Metrics) != len(want) {
		t.Fatalf("got %+v", run)
	}
	for i := range want {
		if run.Metrics[i] != want[i] {
			t.Errorf("metric %d = %+v, want %+v", i, run.Metrics[i], want[i])
		}
	}

	for _, bad := range []struct{ in, msg string }{
		{`{"loss":1}`, `line 1: no "step"`},
		{"{\"step\":1,\"loss\":1}\n{\"step\":2}", `line 2: neither "loss" nor "val_loss"`},
		{`{"step":1,"loss":`, "line 1"},
	} {
		_, err := ParseMetrics(strings.NewReader(bad.in), "x")
		if err == nil || !strings.Contains(err.Error(), bad.msg) || !strings.HasPrefix(err.Error(), "plotting: ") {
			t.Errorf("ParseMetrics(%q) error %v, want one containing %q", bad.in, err, bad.msg)
		}
	}
}

func TestReadMetricsLabel(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "fused-bf16.jsonl")
	if err := os.WriteFile(path, []byte(`{"step":1,"loss":3}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run, err := ReadMetrics(path)
	if err != nil {
		t.Fatal(err)
	}
	if run.Label != "fused-bf16" || len(run.Metrics) != 1 || run.Metrics[0].Loss != 3 {
		t.Errorf("ReadMetrics = %+v", run)
	}
	run, err = ReadMetrics(path, RunLabel("ফিউজড"))
	if err != nil || run.Label != "ফিউজড" {
		t.Errorf("ReadMetrics with RunLabel = %+v, %v", run, err)
	}
	if _, err := ReadMetrics(filepath.Join(dir, "missing.jsonl")); err == nil {
		t.Error("no error for a missing file")
	}
}

func TestReadBench(t *testing.T) {
	b := fixtureBench()
	raw, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bench.json")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadBench(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Device != b.Device || len(got.Records) != len(b.Records) || got.Records[5].StepMs != b.Records[5].StepMs ||
		len(got.Records[12].Kernels) != 6 || len(got.Records[12].Util) != 20 || got.Records[12].Kernels[2] != b.Records[12].Kernels[2] {
		t.Errorf("round trip lost data: %+v", got.Records[12])
	}

	// The example record of the pkg/bench format, with an unknown field.
	ex := `{"device":"H200","driver":"570","date":"2026-12-02","git":"abc","extra":1,
	  "records":[{"config":"gpt2-124M","mode":"fused+bf16","baseline":true,"batch":16,"seq":1024,"step_ms":47.1,
	  "tokens_per_s":347000,"mfu":0.38,"memory":{"params":497e6,"grads":497e6,"optimizer":995e6,"activations":7.1e9},
	  "kernels":[{"name":"layernorm_fwd","mode":"fused","ms":0.02,"gbps":3100,"ceiling_gbps":4270}],
	  "util":[{"t_s":0.5,"gpu_util":97,"mem_used_bytes":1.2e10}]}]}`
	eb, err := ParseBench(strings.NewReader(ex))
	if err != nil {
		t.Fatal(err)
	}
	r := eb.Records[0]
	if r.Memory.Activations != 7.1e9 || r.Kernels[0].CeilingGBps != 4270 || r.Util[0].MemUsedBytes != 1.2e10 || !r.Baseline {
		t.Errorf("decoded %+v", r)
	}

	for _, bad := range []struct {
		name string
		recs []BenchRecord
		is   error
	}{
		{"no baseline", []BenchRecord{{Config: "a", Mode: "m", StepMs: 1}}, ErrBaseline},
		{"two baselines", []BenchRecord{{Config: "a", Mode: "m", Baseline: true, StepMs: 1}, {Config: "a", Mode: "n", Baseline: true, StepMs: 1}}, ErrBaseline},
		{"no mode", []BenchRecord{{Config: "a", Baseline: true}}, nil},
		{"negative", []BenchRecord{{Config: "a", Mode: "m", Baseline: true, StepMs: -1}}, nil},
		{"empty", nil, nil},
	} {
		raw, _ := json.Marshal(Bench{Records: bad.recs})
		_, err := ParseBench(strings.NewReader(string(raw)))
		if err == nil || !strings.HasPrefix(err.Error(), "plotting: ") || (bad.is != nil && !errors.Is(err, bad.is)) {
			t.Errorf("%s: error %v", bad.name, err)
		}
	}
}

// TestSpeedUpValues checks the speed-up arithmetic and the labels on the
// bars.
func TestSpeedUpValues(t *testing.T) {
	recs := []BenchRecord{
		{Config: "c", Mode: "base", Baseline: true, Batch: 8, Seq: 64, StepMs: 62},
		{Config: "c", Mode: "fast", Batch: 8, Seq: 64, StepMs: 20},
		{Config: "c", Mode: "fast", Batch: 16, Seq: 64, StepMs: 35}, // other batch: not compared
		{Config: "d", Mode: "base", Baseline: true, Batch: 4, Seq: 64, StepMs: 10},
	}
	cfgs, modes, _, su, err := speedUps(recs)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfgs, ",") != "c,d" || strings.Join(modes, ",") != "base,fast" {
		t.Fatalf("configs %v modes %v", cfgs, modes)
	}
	if su["c"][0] != 1 || su["c"][1] != 3.1 || su["d"][0] != 1 || su["d"][1] == su["d"][1] {
		t.Errorf("speed-ups %v (want c: 1, 3.1; d: 1, NaN)", su)
	}
	if got := formatTimes(3.1); got != "3.1×" {
		t.Errorf("formatTimes(3.1) = %q", got)
	}
	if got := ToBanglaDigits(formatTimes(12.4)); got != "১২×" {
		t.Errorf("Bangla 12.4× = %q", got)
	}
	dup := append(recs, BenchRecord{Config: "c", Mode: "fast", Batch: 8, Seq: 64, StepMs: 21})
	if _, _, _, _, err := speedUps(dup); err == nil {
		t.Error("no error for a mode measured twice at the baseline's batch")
	}
}

func TestHelperErrors(t *testing.T) {
	if _, err := LossCurves(nil); err == nil {
		t.Error("LossCurves(nil): no error")
	}
	if _, err := LossCurves([]Run{{Label: "empty"}}); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("LossCurves of an empty run: %v", err)
	}
	if _, err := LossCurves(fixtureRuns(), Smooth(0)); err == nil {
		t.Error("Smooth(0): no error")
	}
	if _, err := LossCurves(fixtureRuns(), Lang("fr")); err == nil || !strings.Contains(err.Error(), `"fr"`) {
		t.Errorf("Lang(fr): %v", err)
	}
	for name, f := range map[string]func([]BenchRecord, ...Option) error{
		"SpeedUp":     func(r []BenchRecord, o ...Option) error { _, err := SpeedUp(r, o...); return err },
		"Throughput":  func(r []BenchRecord, o ...Option) error { _, err := Throughput(r, o...); return err },
		"Memory":      func(r []BenchRecord, o ...Option) error { _, err := Memory(r, o...); return err },
		"Utilisation": func(r []BenchRecord, o ...Option) error { _, err := Utilisation(r, o...); return err },
		"Bandwidth":   func(r []BenchRecord, o ...Option) error { _, err := Bandwidth(r, o...); return err },
	} {
		if err := f(nil); err == nil || !strings.HasPrefix(err.Error(), "plotting: ") {
			t.Errorf("%s(nil): %v", name, err)
		}
	}
	recs := fixtureBench().Records
	var withKernels BenchRecord
	for _, r := range recs {
		if len(r.Kernels) > 0 {
			withKernels = r
		}
	}
	twice := append(append([]BenchRecord(nil), recs...), withKernels)
	if _, err := Bandwidth(twice); err == nil {
		t.Error("Bandwidth with a kernel twice: no error")
	}
}

// TestTicks checks the tick labellers.
func TestTicks(t *testing.T) {
	var labels []string
	for _, tk := range (linearTicks{}).Ticks(0, 5000) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if strings.Join(labels, ",") != "0,2500,5000" {
		t.Errorf("linear ticks 0..5000: %v", labels)
	}
	for _, c := range []struct {
		min, max float64
		want     string
	}{{1.3, 5.6, "2,3,4,5"}, {2.1, 4.5, "3,4"}, {0.5, 60, "0.5,1,2,5,10,20,50"}} {
		labels = nil
		for _, tk := range (logTicks{}).Ticks(c.min, c.max) {
			if tk.Label != "" {
				labels = append(labels, tk.Label)
			}
		}
		if got := strings.Join(labels, ","); got != c.want {
			t.Errorf("log ticks %v..%v: %s, want %s", c.min, c.max, got, c.want)
		}
	}
	lt := localTicks{Inner: linearTicks{}, loc: locale{bn: true, digits: true}}
	if got := lt.Ticks(0, 5000)[2].Label; got != "৫০০০" {
		t.Errorf("Bangla tick %q", got)
	}
}

// TestReadBenchKernelsOnly: a micro-benchmark report (kernel timings, no
// step times) needs no baseline and feeds Bandwidth.
func TestReadBenchKernelsOnly(t *testing.T) {
	js := `{"device":"d","records":[{"config":"kernel-microbench","mode":"bf16",
	  "kernels":[{"name":"layernorm_fwd","mode":"fused","ms":0.03,"gbps":2800,"ceiling_gbps":4270},
	             {"name":"layernorm_fwd","mode":"decomposed","ms":0.11,"gbps":660,"ceiling_gbps":4270}]}]}`
	b, err := ParseBench(strings.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Bandwidth(b.Records); err != nil {
		t.Fatal(err)
	}
	bad := `{"records":[{"config":"tiny","mode":"fused+fp32","step_ms":5}]}`
	if _, err := ParseBench(strings.NewReader(bad)); !errors.Is(err, ErrBaseline) {
		t.Errorf("step records without a baseline: %v, want ErrBaseline", err)
	}
}

// TestParseMetricsSkipped: lines pkg/train writes for skipped steps
// ("skipped": true, null where a value was not finite) parse, and the count
// comes from "skipped_steps" (or from the older integer "skipped").
func TestParseMetricsSkipped(t *testing.T) {
	in := `{"step":1,"loss":5.5,"grad_norm":1,"loss_scale":65536,"skipped_steps":0}
{"step":2,"loss":5.4,"grad_norm":null,"loss_scale":65536,"skipped":true,"skipped_steps":1}
{"step":3,"loss":null,"grad_norm":null,"loss_scale":32768,"skipped":true,"skipped_steps":2}
{"step":4,"loss":5.3,"skipped":7}
`
	run, err := ParseMetrics(strings.NewReader(in), "r")
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Metrics) != 4 {
		t.Fatalf("%d metrics, want 4", len(run.Metrics))
	}
	m := run.Metrics
	if m[1].Skipped != 1 || !m[1].HasLoss || m[2].HasLoss || m[2].Skipped != 2 || m[3].Skipped != 7 {
		t.Errorf("got %+v", m)
	}
}
