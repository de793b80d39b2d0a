package train

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"github.com/druto/druto/internal/boundedread"
)

// ReadMetricsFile reads a metrics.jsonl log written by Run. A value written
// as null (not finite when logged) reads back as NaN.
func ReadMetricsFile(path string) ([]Metric, error) {
	b, err := readMetrics(path)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	var out []Metric
	for i, line := range splitLines(b) {
		var m Metric
		if err := json.Unmarshal(line, &m); err != nil {
			return nil, fmt.Errorf("train: %s line %d: %w", path, i+1, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// maxMetricsBytes bounds the metrics log read back (on resume, too).
const maxMetricsBytes = 4 << 30

// readMetrics reads a metrics log: a regular file, its size checked first.
func readMetrics(path string) ([]byte, error) { return boundedread.ReadFile(path, maxMetricsBytes) }

// f32 and f64 are metric values in JSON: a value that is not finite (NaN or
// ±Inf, which JSON cannot hold) is written as null and read back as NaN.
type (
	f32 float32
	f64 float64
)

func (v f32) MarshalJSON() ([]byte, error) {
	if x := float64(v); math.IsNaN(x) || math.IsInf(x, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(float32(v))
}

func (v f64) MarshalJSON() ([]byte, error) {
	if x := float64(v); math.IsNaN(x) || math.IsInf(x, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(v))
}

func (v *f32) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*v = f32(math.NaN())
		return nil
	}
	var x float32
	err := json.Unmarshal(b, &x)
	*v = f32(x)
	return err
}

func (v *f64) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*v = f64(math.NaN())
		return nil
	}
	var x float64
	err := json.Unmarshal(b, &x)
	*v = f64(x)
	return err
}

// metricJSON is one metrics line as written: "skipped" is true on a step
// whose update was skipped (non-finite gradients) and "skipped_steps" counts
// such steps so far.
type metricJSON struct {
	Step         int             `json:"step"`
	Loss         f32             `json:"loss"`
	LR           f32             `json:"lr"`
	GradNorm     f32             `json:"grad_norm"`
	TokensPerS   f64             `json:"tokens_per_s"`
	MsPerStep    f64             `json:"ms_per_step"`
	LossScale    f32             `json:"loss_scale"`
	Skipped      json.RawMessage `json:"skipped,omitempty"`
	SkippedSteps int             `json:"skipped_steps"`
	ValLoss      f32             `json:"val_loss,omitempty"`
	Sample       string          `json:"sample,omitempty"`
}

// MarshalJSON writes m as one metrics line; values that are not finite
// become null, so the line is always valid JSON.
func (m Metric) MarshalJSON() ([]byte, error) {
	w := metricJSON{
		Step: m.Step, Loss: f32(m.Loss), LR: f32(m.LR), GradNorm: f32(m.GradNorm),
		TokensPerS: f64(m.TokensPerS), MsPerStep: f64(m.MsPerStep), LossScale: f32(m.LossScale),
		SkippedSteps: m.Skipped, ValLoss: f32(m.ValLoss), Sample: m.Sample,
	}
	if m.StepSkipped {
		w.Skipped = json.RawMessage("true")
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads a metrics line, including the older form in which
// "skipped" was the count of skipped steps.
func (m *Metric) UnmarshalJSON(b []byte) error {
	var w metricJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*m = Metric{
		Step: w.Step, Loss: float32(w.Loss), LR: float32(w.LR), GradNorm: float32(w.GradNorm),
		TokensPerS: float64(w.TokensPerS), MsPerStep: float64(w.MsPerStep), LossScale: float32(w.LossScale),
		Skipped: w.SkippedSteps, ValLoss: float32(w.ValLoss), Sample: w.Sample,
	}
	switch s := bytes.TrimSpace(w.Skipped); {
	case len(s) == 0, string(s) == "null", string(s) == "false":
	case string(s) == "true":
		m.StepSkipped = true
	default: // the older form: a count
		if err := json.Unmarshal(s, &m.Skipped); err != nil {
			return fmt.Errorf("\"skipped\" is neither true/false nor a count: %s", s)
		}
	}
	return nil
}
