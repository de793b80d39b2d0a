package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
)

// Results is a benchmark report read for plotting: where and when it was
// measured, and one Result per (config, mode, batch, seq) measured. Its
// numbers are float64 (memory too), so any JSON number reads.
type Results struct {
	Device  string   `json:"device"`
	Driver  string   `json:"driver"`
	Date    string   `json:"date"`
	Git     string   `json:"git"`
	Records []Result `json:"records"`
}

// Result is one benchmarked configuration of Results. Exactly one result
// per Config with step times has Baseline set; speed-ups are relative to it.
type Result struct {
	Config     string    `json:"config"`       // model preset, e.g. "gpt2-124M"
	Mode       string    `json:"mode"`         // e.g. "fused+bf16"
	Baseline   bool      `json:"baseline"`     // the reference of its Config
	Batch      int       `json:"batch"`        // sequences a step
	Seq        int       `json:"seq"`          // tokens a sequence
	StepMs     float64   `json:"step_ms"`      // median step time (ms)
	TokensPerS float64   `json:"tokens_per_s"` // throughput (tokens/s)
	MFU        float64   `json:"mfu"`          // model FLOPs utilisation, 0..1
	Memory     MemoryUse `json:"memory"`
	Kernels    []Kernel  `json:"kernels"`
	Util       []Util    `json:"util"`
}

// MemoryUse is the device memory of a training step by component, in bytes.
type MemoryUse struct {
	Params      float64 `json:"params"`
	Grads       float64 `json:"grads"`
	Optimizer   float64 `json:"optimizer"`
	Activations float64 `json:"activations"`
}

// Total returns the sum of all components, in bytes.
func (m MemoryUse) Total() float64 { return m.Params + m.Grads + m.Optimizer + m.Activations }

// ErrBaseline is returned (as a *BaselineError) when a config does not
// have exactly one baseline record.
var ErrBaseline = errors.New("record: each config needs exactly one baseline record")

// BaselineError names the config without exactly one baseline record and
// the number it has; it is ErrBaseline.
type BaselineError struct {
	Config string
	Count  int
}

// Error names ErrBaseline, the config and its number of baselines.
func (e *BaselineError) Error() string {
	return fmt.Sprintf("%v: config %q has %d", ErrBaseline, e.Config, e.Count)
}

// Unwrap returns ErrBaseline.
func (e *BaselineError) Unwrap() error { return ErrBaseline }

// KernelsOnly reports whether a record with step time stepMs and kernels
// kernel timings is a kernel micro-benchmark: kernel timings and no step
// time. Such a record needs no baseline and is plotted as bandwidth.
func KernelsOnly(stepMs float64, kernels int) bool { return stepMs == 0 && kernels > 0 }

// ParseResults decodes a benchmark report from r and checks it: at least
// one record, every record with a config and a mode, finite non-negative
// numbers (Check), and exactly one baseline record per config that has
// step times (Baselines; kernel micro-benchmark records carry none and
// need no baseline). Unknown fields are ignored.
func ParseResults(r io.Reader) (Results, error) {
	var b Results
	if err := json.NewDecoder(r).Decode(&b); err != nil {
		return Results{}, fmt.Errorf("decoding bench results: %w", err)
	}
	if len(b.Records) == 0 {
		return Results{}, errors.New("bench results have no records")
	}
	for i, rec := range b.Records {
		if err := rec.Check(); err != nil {
			return Results{}, fmt.Errorf("record %d: %w", i, err)
		}
	}
	if _, err := Baselines(StepResults(b.Records)); err != nil {
		return Results{}, err
	}
	return b, nil
}

// StepResults returns the records of recs that have step times: all but
// the kernel micro-benchmarks (KernelsOnly).
func StepResults(recs []Result) []Result {
	var steps []Result
	for _, r := range recs {
		if !KernelsOnly(r.StepMs, len(r.Kernels)) {
			steps = append(steps, r)
		}
	}
	return steps
}

// Check validates one record's fields: a config and a mode, and finite
// non-negative numbers.
func (r Result) Check() error {
	if r.Config == "" || r.Mode == "" {
		return errors.New("config and mode must be set")
	}
	nums := []float64{r.StepMs, r.TokensPerS, r.MFU, r.Memory.Params, r.Memory.Grads,
		r.Memory.Optimizer, r.Memory.Activations, float64(r.Batch), float64(r.Seq)}
	for _, k := range r.Kernels {
		nums = append(nums, k.Ms, k.GBps, k.CeilingGBps)
	}
	for _, u := range r.Util {
		nums = append(nums, u.TS, u.GPUUtil, u.MemUsedBytes)
	}
	for _, v := range nums {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("%s %s: bad value %v", r.Config, r.Mode, v)
		}
	}
	return nil
}

// Baselines returns the baseline record of each config, or a
// *BaselineError when a config has none or more than one.
func Baselines(recs []Result) (map[string]Result, error) {
	base := make(map[string]Result)
	count := make(map[string]int)
	var order []string
	for _, r := range recs {
		if _, seen := count[r.Config]; !seen {
			order = append(order, r.Config)
		}
		count[r.Config] += 0
		if r.Baseline {
			count[r.Config]++
			base[r.Config] = r
		}
	}
	for _, c := range order {
		if count[c] != 1 {
			return nil, &BaselineError{Config: c, Count: count[c]}
		}
	}
	return base, nil
}

// Kind is what a JSON file under bench/results holds.
type Kind int

// The kinds of results file.
const (
	KindOther   Kind = iota // JSON of another kind
	KindBench               // a training-step benchmark report (records with step times)
	KindKernels             // a kernel micro-benchmark report (every record KernelsOnly)
	KindDetect              // a detect report (druto detect --json: "backend" and "host")
)

// Classify says what kind of results file b holds; it is an error when b
// is not a JSON object (or null). A file with "records" is a kernel
// micro-benchmark report when every record is KernelsOnly (and there is
// one at least), else a benchmark report; one with "backend" and "host" is
// a detect report.
func Classify(b []byte) (Kind, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return KindOther, err
	}
	raw, records := top["records"]
	_, backend := top["backend"]
	_, host := top["host"]
	switch {
	case records && kernelsOnly(raw):
		return KindKernels, nil
	case records:
		return KindBench, nil
	case backend && host:
		return KindDetect, nil
	}
	return KindOther, nil
}

// kernelsOnly reports whether every record of the raw "records" list is
// KernelsOnly; false when it is not a list of records, or an empty one.
func kernelsOnly(raw json.RawMessage) bool {
	var recs []struct {
		StepMs  float64           `json:"step_ms"`
		Kernels []json.RawMessage `json:"kernels"`
	}
	if json.Unmarshal(raw, &recs) != nil || len(recs) == 0 {
		return false
	}
	for _, r := range recs {
		if !KernelsOnly(r.StepMs, len(r.Kernels)) {
			return false
		}
	}
	return true
}
