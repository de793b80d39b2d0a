package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
)

// Metric is one line of the metrics log that pkg/train writes (JSON lines,
// one per step; eval and sample results ride on the step they happened
// at):
//
//	{"step":1,"loss":5.54,"lr":0.0006,"grad_norm":1.2,"tokens_per_s":9000,
//	 "ms_per_step":110,"loss_scale":65536,"skipped_steps":0,"val_loss":5.1}
//
// Its JSON form (MarshalJSON) writes a value that is not finite as null;
// UnmarshalJSON reads null back as NaN and reads the older logs too.
type Metric struct {
	Step       int
	Loss       float32
	LR         float32
	GradNorm   float32
	TokensPerS float64
	MsPerStep  float64
	// DeviceMs is the step's own time on the device, between two timing
	// marks queued before its uploads and after its state snapshot
	// (device.Marker: CUDA events), in the device-resident step modes on a
	// device that has them; 0 otherwise (MsPerStep is then the span of the
	// collected steps over their number). Not written to metrics files.
	DeviceMs    float64
	LossScale   float32
	StepSkipped bool    // this step's update was skipped (non-finite gradients); JSON "skipped"
	Skipped     int     // steps skipped so far; JSON "skipped_steps"
	ValLoss     float32 // on eval steps
	Sample      string  // on sample steps
	// FP8Overflows counts, on eval steps under amp.FP8, the non-finite
	// amaxes the FP8 casts have met so far (each left its scale as it
	// was); JSON "fp8_overflows", absent otherwise.
	FP8Overflows int64
	// FP8Underflows counts, on eval steps under amp.FP8, the nonzero
	// values the last step's FP8 casts flushed to zero (too small for
	// their scale), and FP8UnderflowShare their share of the values cast;
	// JSON "fp8_underflows" and "fp8_underflow_share", absent otherwise.
	FP8Underflows     int64
	FP8UnderflowShare float64
	// FP8LogitGradUnderflows and FP8LogitGradUnderflowShare are the same
	// for the logits' gradient, cast to FP8 with the LM head's dx in FP8
	// (--fp8-head) and counted apart: most of it flushes by design (the
	// unlikely tokens' probabilities; gpt.Model.FP8LogitGradUnderflows);
	// JSON "fp8_logit_grad_underflows" and "fp8_logit_grad_underflow_share".
	FP8LogitGradUnderflows     int64
	FP8LogitGradUnderflowShare float64
}

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
	Step                       int             `json:"step"`
	Loss                       f32             `json:"loss"`
	LR                         f32             `json:"lr"`
	GradNorm                   f32             `json:"grad_norm"`
	TokensPerS                 f64             `json:"tokens_per_s"`
	MsPerStep                  f64             `json:"ms_per_step"`
	LossScale                  f32             `json:"loss_scale"`
	Skipped                    json.RawMessage `json:"skipped,omitempty"`
	SkippedSteps               int             `json:"skipped_steps"`
	ValLoss                    f32             `json:"val_loss,omitempty"`
	Sample                     string          `json:"sample,omitempty"`
	FP8Overflows               int64           `json:"fp8_overflows,omitempty"`
	FP8Underflows              int64           `json:"fp8_underflows,omitempty"`
	FP8UnderflowShare          f64             `json:"fp8_underflow_share,omitempty"`
	FP8LogitGradUnderflows     int64           `json:"fp8_logit_grad_underflows,omitempty"`
	FP8LogitGradUnderflowShare f64             `json:"fp8_logit_grad_underflow_share,omitempty"`
}

// MarshalJSON writes m as one metrics line; values that are not finite
// become null, so the line is always valid JSON.
func (m Metric) MarshalJSON() ([]byte, error) {
	w := metricJSON{
		Step: m.Step, Loss: f32(m.Loss), LR: f32(m.LR), GradNorm: f32(m.GradNorm),
		TokensPerS: f64(m.TokensPerS), MsPerStep: f64(m.MsPerStep), LossScale: f32(m.LossScale),
		SkippedSteps: m.Skipped, ValLoss: f32(m.ValLoss), Sample: m.Sample, FP8Overflows: m.FP8Overflows,
		FP8Underflows: m.FP8Underflows, FP8UnderflowShare: f64(m.FP8UnderflowShare),
		FP8LogitGradUnderflows: m.FP8LogitGradUnderflows, FP8LogitGradUnderflowShare: f64(m.FP8LogitGradUnderflowShare),
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
		Skipped: w.SkippedSteps, ValLoss: float32(w.ValLoss), Sample: w.Sample, FP8Overflows: w.FP8Overflows,
		FP8Underflows: w.FP8Underflows, FP8UnderflowShare: float64(w.FP8UnderflowShare),
		FP8LogitGradUnderflows: w.FP8LogitGradUnderflows, FP8LogitGradUnderflowShare: float64(w.FP8LogitGradUnderflowShare),
	}
	stepSkipped, count, err := skippedField(w.Skipped)
	if err != nil {
		return err
	}
	m.StepSkipped = stepSkipped
	if count != nil { // the older form
		m.Skipped = *count
	}
	return nil
}

// skippedField reads a metrics line's "skipped": absent, null or false;
// true on a skipped step; or, in older logs, the count of skipped steps
// so far (returned in count).
func skippedField(raw json.RawMessage) (stepSkipped bool, count *int, err error) {
	switch s := bytes.TrimSpace(raw); {
	case len(s) == 0, string(s) == "null", string(s) == "false":
		return false, nil, nil
	case string(s) == "true":
		return true, nil, nil
	default: // the older form: a count
		var n int
		if err := json.Unmarshal(s, &n); err != nil {
			return false, nil, fmt.Errorf("\"skipped\" is neither true/false nor a count: %s", s)
		}
		return false, &n, nil
	}
}

// ParseMetricLines reads metrics lines (b holds them, one a line, as a
// metrics file does) into Metrics; an empty line is skipped. The error
// names the line.
func ParseMetricLines(b []byte) ([]Metric, error) {
	var out []Metric
	for i, line := range Lines(b) {
		var m Metric
		if err := json.Unmarshal(line, &m); err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// Lines splits a JSON-lines file at '\n' into its non-empty lines.
func Lines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != '\n' {
			i++
		}
		if i > 0 {
			out = append(out, b[:i])
		}
		if i == len(b) {
			break
		}
		b = b[i+1:]
	}
	return out
}

// LineStep returns the "step" of one metrics line, and false when the
// line is not a JSON object whose "step" is a whole number.
func LineStep(line []byte) (int, bool) {
	var m struct{ Step int }
	if json.Unmarshal(line, &m) != nil {
		return 0, false
	}
	return m.Step, true
}

// Point is one training step of a metrics log as plotted: float64 values,
// and whether the line carried a loss and a validation loss.
type Point struct {
	Step       int     // optimizer step, from 1
	Loss       float64 // training loss of the step (nats/token); valid when HasLoss
	LR         float64 // learning rate used by the step
	GradNorm   float64 // global gradient norm before clipping
	TokensPerS float64 // throughput of the step (tokens/s)
	MsPerStep  float64 // wall time of the step (ms)
	LossScale  float64 // GradScaler scale (0 when no scaler)
	Skipped    int     // steps skipped so far by the scaler (inf/NaN gradients)
	ValLoss    float64 // validation loss (nats/token); valid when HasValLoss
	HasLoss    bool    // the line carried "loss"
	HasValLoss bool    // the line carried "val_loss"
}

// pointLine mirrors one metrics line; pointers tell absent fields from zeros.
type pointLine struct {
	Event      *json.RawMessage `json:"event"`
	Step       *int             `json:"step"`
	Loss       *float64         `json:"loss"`
	LR         float64          `json:"lr"`
	GradNorm   float64          `json:"grad_norm"`
	TokensPerS float64          `json:"tokens_per_s"`
	MsPerStep  float64          `json:"ms_per_step"`
	LossScale  float64          `json:"loss_scale"`
	Skipped    json.RawMessage  `json:"skipped"`       // true on a skipped step; a count in older logs
	SkippedN   *int             `json:"skipped_steps"` // steps skipped so far
	ValLoss    *float64         `json:"val_loss"`
}

// ParsePoints reads metrics JSON lines from r as Points. Lines with an
// "event" field (samples, checkpoints, ...) and blank lines are skipped,
// unknown fields are ignored; every other line must carry "step" and at
// least one of "loss" and "val_loss", or be a skipped step. A null loss
// reads as no loss. "skipped_steps" gives Skipped; without it, an older
// log's count in "skipped" does.
func ParsePoints(r io.Reader) ([]Point, error) {
	var out []Point
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var ml pointLine
		if err := json.Unmarshal(line, &ml); err != nil {
			return nil, fmt.Errorf("metrics line %d: %w", n, err)
		}
		if ml.Event != nil {
			continue
		}
		if ml.Step == nil {
			return nil, fmt.Errorf("metrics line %d: no \"step\" field", n)
		}
		stepSkipped, count, err := skippedField(ml.Skipped)
		if ml.Loss == nil && ml.ValLoss == nil && !stepSkipped {
			return nil, fmt.Errorf("metrics line %d: neither \"loss\" nor \"val_loss\"", n)
		}
		if err != nil && ml.SkippedN == nil {
			return nil, fmt.Errorf("metrics line %d: %w", n, err)
		}
		m := Point{
			Step: *ml.Step, LR: ml.LR, GradNorm: ml.GradNorm, TokensPerS: ml.TokensPerS,
			MsPerStep: ml.MsPerStep, LossScale: ml.LossScale,
		}
		switch {
		case ml.SkippedN != nil:
			m.Skipped = *ml.SkippedN
		case count != nil:
			m.Skipped = *count
		}
		if ml.Loss != nil {
			m.Loss, m.HasLoss = *ml.Loss, true
		}
		if ml.ValLoss != nil {
			m.ValLoss, m.HasValLoss = *ml.ValLoss, true
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading metrics: %w", err)
	}
	return out, nil
}
