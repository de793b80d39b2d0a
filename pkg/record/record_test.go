package record

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

// TestMetricSkipped: the metrics line's "skipped" in each form it has had,
// read by both readers (Metric and Point) the same way.
func TestMetricSkipped(t *testing.T) {
	for _, c := range []struct {
		line        string
		stepSkipped bool
		skipped     int // Metric.Skipped and Point.Skipped
	}{
		{`{"step":3,"loss":2,"skipped_steps":1}`, false, 1},
		{`{"step":3,"loss":null,"skipped":true,"skipped_steps":2}`, true, 2},
		{`{"step":3,"loss":2,"skipped":false,"skipped_steps":2}`, false, 2},
		{`{"step":3,"loss":2,"skipped":null}`, false, 0},
		{`{"step":3,"loss":2,"skipped":4}`, false, 4}, // the older form: a count
	} {
		var m Metric
		if err := json.Unmarshal([]byte(c.line), &m); err != nil {
			t.Fatalf("%s: %v", c.line, err)
		}
		if m.StepSkipped != c.stepSkipped || m.Skipped != c.skipped {
			t.Errorf("Metric %s: skipped %v, %d; want %v, %d", c.line, m.StepSkipped, m.Skipped, c.stepSkipped, c.skipped)
		}
		ps, err := ParsePoints(strings.NewReader(c.line))
		if err != nil || len(ps) != 1 {
			t.Fatalf("Point %s: %v, %d points", c.line, err, len(ps))
		}
		if ps[0].Skipped != c.skipped {
			t.Errorf("Point %s: skipped %d, want %d", c.line, ps[0].Skipped, c.skipped)
		}
	}
	for _, bad := range []string{`{"step":1,"loss":2,"skipped":"x"}`, `{"step":1,"loss":2,"skipped":1.5}`} {
		var m Metric
		if err := json.Unmarshal([]byte(bad), &m); err == nil {
			t.Errorf("Metric %s: read", bad)
		}
		if _, err := ParsePoints(strings.NewReader(bad)); err == nil {
			t.Errorf("Point %s: read", bad)
		}
	}
}

// TestMetricRoundTrip: a line written by MarshalJSON reads back the same,
// a value that is not finite as NaN (Metric) and as absent (Point).
func TestMetricRoundTrip(t *testing.T) {
	m := Metric{Step: 7, Loss: float32(math.Inf(1)), LR: 6e-4, GradNorm: 1.5, TokensPerS: 9000, MsPerStep: 110,
		DeviceMs: 3, LossScale: 65536, StepSkipped: true, Skipped: 2, ValLoss: 4.5, Sample: "hi"}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var got Metric
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(float64(got.Loss)) {
		t.Errorf("loss %v, want NaN", got.Loss)
	}
	got.Loss, m.Loss, m.DeviceMs = 0, 0, 0 // DeviceMs is not written
	if got != m {
		t.Errorf("read back %+v, want %+v (line %s)", got, m, b)
	}
	ps, err := ParsePoints(strings.NewReader(string(b)))
	if err != nil || len(ps) != 1 || ps[0].HasLoss || !ps[0].HasValLoss || ps[0].Skipped != 2 {
		t.Errorf("as a point: %+v, %v (line %s)", ps, err, b)
	}
	if step, ok := LineStep(b); !ok || step != 7 {
		t.Errorf("LineStep: %d, %v", step, ok)
	}
}

// TestParsePoints: event and blank lines are skipped; a line needs a step
// and a loss (or a validation loss, or a skipped step).
func TestParsePoints(t *testing.T) {
	ps, err := ParsePoints(strings.NewReader("{\"step\":1,\"loss\":5}\n\n{\"event\":\"sample\"}\n{\"step\":2,\"val_loss\":4}\n"))
	if err != nil || len(ps) != 2 || !ps[0].HasLoss || ps[0].HasValLoss || ps[1].HasLoss || ps[1].ValLoss != 4 {
		t.Errorf("%+v, %v", ps, err)
	}
	for _, bad := range []string{`{"loss":1}`, `{"step":1}`, `{"step":1,"loss":null}`, `[1]`} {
		if _, err := ParsePoints(strings.NewReader(bad)); err == nil || !strings.HasPrefix(err.Error(), "metrics line 1: ") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// TestReport: a report written by Marshal reads back the same.
func TestReport(t *testing.T) {
	r := &Report{Device: "cpu", Date: "2026-12-05", Git: "abc", GoVersion: "go1.26", CPUs: 2,
		Records: []Bench{{Config: "tiny", Mode: "fused+fp32", Baseline: true, Batch: 4, Seq: 64, StepMs: 3,
			Memory:  Memory{Params: 1, Grads: 2, Optimizer: 3, Activations: 4},
			Kernels: []Kernel{{Name: "ln", Mode: "fused", Ms: 1, GBps: 2, CeilingSource: "copy"}},
			Profile: &Profile{Config: "tiny", Rows: []ProfileRow{{Class: "gemm", Calls: 3, Ms: 1, Share: 0.5}}}}},
		Sample: []Sample{{Config: "tiny", Mode: "fused+fp32", Batch: 1, DecodeTokS: 100, BoundTokS: 200}},
	}
	b, err := r.Marshal()
	if err != nil || !strings.HasSuffix(string(b), "}\n") {
		t.Fatalf("%v: %q", err, b)
	}
	got, err := ParseReport(b)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := got.Marshal()
	if string(b2) != string(b) {
		t.Errorf("read back\n%s\nwant\n%s", b2, b)
	}
	ss, err := ParseSamples(strings.NewReader(string(b)))
	if err != nil || len(ss) != 1 || ss[0].BoundTokS != 200 {
		t.Errorf("samples %+v, %v", ss, err)
	}
	res, err := ParseResults(strings.NewReader(string(b)))
	if err != nil || len(res.Records) != 1 || res.Records[0].Memory.Total() != 10 {
		t.Errorf("results %+v, %v", res, err)
	}
	if got := r.Records[0].Profile.Table(); !strings.Contains(got, "gemm") {
		t.Errorf("profile table:\n%s", got)
	}
}

// TestParseResults: the checks of the plotted view.
func TestParseResults(t *testing.T) {
	for _, c := range []struct {
		name, json string
		is         error
	}{
		{"ok", `{"records":[{"config":"a","mode":"m","baseline":true,"step_ms":1},{"config":"a","mode":"k","kernels":[{"name":"ln","mode":"fused","ms":1,"gbps":2}]}]}`, nil},
		{"kernels only", `{"records":[{"config":"a","mode":"k","kernels":[{"name":"ln","mode":"fused","ms":1,"gbps":2}]}]}`, nil},
		{"no baseline", `{"records":[{"config":"a","mode":"m","step_ms":1}]}`, ErrBaseline},
		{"two baselines", `{"records":[{"config":"a","mode":"m","baseline":true},{"config":"a","mode":"n","baseline":true}]}`, ErrBaseline},
		{"no mode", `{"records":[{"config":"a","baseline":true}]}`, errors.ErrUnsupported},
		{"negative", `{"records":[{"config":"a","mode":"m","baseline":true,"step_ms":-1}]}`, errors.ErrUnsupported},
		{"empty", `{"records":[]}`, errors.ErrUnsupported},
		{"not json", `{`, errors.ErrUnsupported},
	} {
		_, err := ParseResults(strings.NewReader(c.json))
		switch {
		case c.is == nil && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.is == ErrBaseline && !errors.Is(err, ErrBaseline):
			t.Errorf("%s: %v, want ErrBaseline", c.name, err)
		case c.is == errors.ErrUnsupported && (err == nil || errors.Is(err, ErrBaseline)):
			t.Errorf("%s: %v, want another error", c.name, err)
		}
	}
}

// TestClassify: what each kind of results file reads as.
func TestClassify(t *testing.T) {
	for _, c := range []struct {
		json string
		want Kind
	}{
		{`{"records":[{"step_ms":1}]}`, KindBench},
		{`{"records":[{"step_ms":0,"kernels":[{}]}]}`, KindKernels},
		{`{"records":[{"step_ms":0,"kernels":[{}]},{"step_ms":1,"kernels":[{}]}]}`, KindBench},
		{`{"records":[]}`, KindBench},
		{`{"records":null}`, KindBench},
		{`{"records":5}`, KindBench},
		{`{"backend":"cpu","host":{}}`, KindDetect},
		{`{"backend":"cpu"}`, KindOther},
		{`null`, KindOther},
	} {
		if got, err := Classify([]byte(c.json)); err != nil || got != c.want {
			t.Errorf("%s: %v, %v; want %v", c.json, got, err, c.want)
		}
	}
	if _, err := Classify([]byte(`[1]`)); err == nil {
		t.Error("a JSON list classified")
	}
}
