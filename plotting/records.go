package plotting

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"

	"github.com/druto/druto/internal/boundedread"
)

// Metric is one training step as logged by pkg/train, one JSON object a line:
//
//	{"step":1,"loss":5.54,"lr":0.0006,"grad_norm":1.2,"tokens_per_s":9000,
//	 "ms_per_step":110,"loss_scale":65536,"skipped_steps":0,"val_loss":5.1}
//
// val_loss is present on evaluation steps only. A step whose update was
// skipped carries "skipped":true, and null for a value that was not finite
// (a null loss reads as no loss). Older logs wrote the count of skipped
// steps as "skipped"; it is read too.
type Metric struct {
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

// Run is the metrics of one training run, in file order, with the label that
// names the run in legends.
type Run struct {
	Label   string
	Metrics []Metric
}

// metricLine mirrors one metrics line; pointers tell absent fields from zeros.
type metricLine struct {
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

// ReadMetrics reads a pkg/train metrics file (JSON lines) into a Run. Lines
// with an "event" field (samples, checkpoints, ...) and blank lines are
// skipped, unknown fields are ignored; every other line must carry "step" and
// at least one of "loss" and "val_loss". The run's label is the file name
// without its extension unless the RunLabel option gives one.
func ReadMetrics(path string, opts ...Option) (Run, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return Run{}, err
	}
	f, _, err := boundedread.Open(path, maxMetricsBytes)
	if err != nil {
		return Run{}, fmt.Errorf("plotting: %w", err)
	}
	defer f.Close()
	label := cfg.runLabel
	if label == "" {
		base := filepath.Base(path)
		label = strings.TrimSuffix(base, filepath.Ext(base))
	}
	run, err := ParseMetrics(f, label)
	if err != nil {
		return Run{}, fmt.Errorf("%w (in %s)", err, path)
	}
	return run, nil
}

// ParseMetrics reads metrics JSON lines from r (see ReadMetrics) into a Run
// named label.
func ParseMetrics(r io.Reader, label string) (Run, error) {
	run := Run{Label: label}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var ml metricLine
		if err := json.Unmarshal(line, &ml); err != nil {
			return Run{}, fmt.Errorf("plotting: metrics line %d: %w", n, err)
		}
		if ml.Event != nil {
			continue
		}
		if ml.Step == nil {
			return Run{}, fmt.Errorf("plotting: metrics line %d: no \"step\" field", n)
		}
		stepSkipped := string(bytes.TrimSpace(ml.Skipped)) == "true"
		if ml.Loss == nil && ml.ValLoss == nil && !stepSkipped {
			return Run{}, fmt.Errorf("plotting: metrics line %d: neither \"loss\" nor \"val_loss\"", n)
		}
		m := Metric{
			Step: *ml.Step, LR: ml.LR, GradNorm: ml.GradNorm, TokensPerS: ml.TokensPerS,
			MsPerStep: ml.MsPerStep, LossScale: ml.LossScale,
		}
		switch {
		case ml.SkippedN != nil:
			m.Skipped = *ml.SkippedN
		case len(ml.Skipped) > 0 && !stepSkipped && string(ml.Skipped) != "false" && string(ml.Skipped) != "null":
			if err := json.Unmarshal(ml.Skipped, &m.Skipped); err != nil {
				return Run{}, fmt.Errorf("plotting: metrics line %d: \"skipped\": %w", n, err)
			}
		}
		if ml.Loss != nil {
			m.Loss, m.HasLoss = *ml.Loss, true
		}
		if ml.ValLoss != nil {
			m.ValLoss, m.HasValLoss = *ml.ValLoss, true
		}
		run.Metrics = append(run.Metrics, m)
	}
	if err := sc.Err(); err != nil {
		return Run{}, fmt.Errorf("plotting: reading metrics: %w", err)
	}
	return run, nil
}

// Bench is a benchmark results file written by pkg/bench: where and when it
// was measured, and one record per (config, mode, batch, seq) measured.
type Bench struct {
	Device  string        `json:"device"`
	Driver  string        `json:"driver"`
	Date    string        `json:"date"`
	Git     string        `json:"git"`
	Records []BenchRecord `json:"records"`
}

// BenchRecord is one benchmarked configuration. Exactly one record per
// Config has Baseline set; speed-ups are relative to it.
type BenchRecord struct {
	Config     string       `json:"config"`       // model preset, e.g. "gpt2-124M"
	Mode       string       `json:"mode"`         // e.g. "fused+bf16"
	Baseline   bool         `json:"baseline"`     // the reference of its Config
	Batch      int          `json:"batch"`        // sequences a step
	Seq        int          `json:"seq"`          // tokens a sequence
	StepMs     float64      `json:"step_ms"`      // median step time (ms)
	TokensPerS float64      `json:"tokens_per_s"` // throughput (tokens/s)
	MFU        float64      `json:"mfu"`          // model FLOPs utilisation, 0..1
	Memory     MemoryUse    `json:"memory"`
	Kernels    []Kernel     `json:"kernels"`
	Util       []UtilSample `json:"util"`
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

// Kernel is one kernel micro-benchmark: achieved memory bandwidth against
// the measured ceiling (device copy bandwidth).
type Kernel struct {
	Name        string  `json:"name"`         // e.g. "layernorm_fwd"
	Mode        string  `json:"mode"`         // "fused" or "decomposed"
	Ms          float64 `json:"ms"`           // median time (ms)
	GBps        float64 `json:"gbps"`         // achieved bandwidth (GB/s)
	CeilingGBps float64 `json:"ceiling_gbps"` // measured ceiling (GB/s), 0 if unknown
}

// UtilSample is one sample of GPU utilisation during a benchmark.
type UtilSample struct {
	TS           float64 `json:"t_s"`            // seconds since the benchmark started
	GPUUtil      float64 `json:"gpu_util"`       // percent, 0..100
	MemUsedBytes float64 `json:"mem_used_bytes"` // device memory in use (bytes)
}

// ErrBaseline is returned when a config does not have exactly one baseline
// record.
var ErrBaseline = errors.New("plotting: each config needs exactly one baseline record")

// Input files larger than these are refused before reading; only regular
// files are opened (a device or a FIFO is refused without blocking).
const (
	maxMetricsBytes = 4 << 30
	maxBenchBytes   = 256 << 20
)

// ReadBench reads a pkg/bench results file and checks its records (see
// ParseBench).
func ReadBench(path string) (Bench, error) {
	f, _, err := boundedread.Open(path, maxBenchBytes)
	if err != nil {
		return Bench{}, fmt.Errorf("plotting: %w", err)
	}
	defer f.Close()
	b, err := ParseBench(f)
	if err != nil {
		return Bench{}, fmt.Errorf("%w (in %s)", err, path)
	}
	return b, nil
}

// ParseBench decodes benchmark results from r and checks them: at least one
// record, every record with a config and a mode, finite non-negative
// numbers, and exactly one baseline record per config that has step times
// (kernel micro-benchmark records carry none and need no baseline). Unknown
// fields are ignored.
func ParseBench(r io.Reader) (Bench, error) {
	var b Bench
	if err := json.NewDecoder(r).Decode(&b); err != nil {
		return Bench{}, fmt.Errorf("plotting: decoding bench results: %w", err)
	}
	if len(b.Records) == 0 {
		return Bench{}, errors.New("plotting: bench results have no records")
	}
	for i, rec := range b.Records {
		if err := rec.check(); err != nil {
			return Bench{}, fmt.Errorf("plotting: record %d: %w", i, err)
		}
	}
	// Kernel micro-benchmark records (kernel timings, no step time) have
	// no baseline; every config with step times needs exactly one.
	var steps []BenchRecord
	for _, r := range b.Records {
		if !(r.StepMs == 0 && len(r.Kernels) > 0) {
			steps = append(steps, r)
		}
	}
	if _, err := baselines(steps); err != nil {
		return Bench{}, err
	}
	return b, nil
}

// check validates one record's fields.
func (r BenchRecord) check() error {
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

// baselines returns the baseline record of each config, or ErrBaseline.
func baselines(recs []BenchRecord) (map[string]BenchRecord, error) {
	base := make(map[string]BenchRecord)
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
			return nil, fmt.Errorf("%w: config %q has %d", ErrBaseline, c, count[c])
		}
	}
	return base, nil
}
