package plotting

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/druto/druto/internal/boundedread"
	"github.com/druto/druto/pkg/record"
)

// Metric is one training step as logged by pkg/train, one JSON object a line:
//
//	{"step":1,"loss":5.54,"lr":0.0006,"grad_norm":1.2,"tokens_per_s":9000,
//	 "ms_per_step":110,"loss_scale":65536,"skipped_steps":0,"val_loss":5.1}
//
// val_loss is present on evaluation steps only. A step whose update was
// skipped carries "skipped":true, and null for a value that was not finite
// (a null loss reads as no loss). Older logs wrote the count of skipped
// steps as "skipped"; it is read too (record.ParsePoints).
type Metric = record.Point

// Run is the metrics of one training run, in file order, with the label that
// names the run in legends.
type Run struct {
	Label   string
	Metrics []Metric
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
	ms, err := record.ParsePoints(r)
	if err != nil {
		return Run{}, fmt.Errorf("plotting: %w", err)
	}
	return Run{Label: label, Metrics: ms}, nil
}

// The benchmark results that pkg/bench writes, as plotted (record.Results:
// float64 numbers, checked by ParseBench).
type (
	// Bench is a benchmark results file: where and when it was measured,
	// and one record per (config, mode, batch, seq) measured.
	Bench = record.Results
	// BenchRecord is one benchmarked configuration. Exactly one record per
	// Config with step times has Baseline set; speed-ups are relative to it.
	BenchRecord = record.Result
	// MemoryUse is the device memory of a training step by component, in
	// bytes.
	MemoryUse = record.MemoryUse
	// Kernel is one kernel micro-benchmark: achieved memory bandwidth
	// against the measured ceiling (device copy bandwidth).
	Kernel = record.Kernel
	// UtilSample is one sample of GPU utilisation during a benchmark.
	UtilSample = record.Util
)

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
	b, err := record.ParseResults(r)
	if err != nil {
		return Bench{}, plottingErr(err)
	}
	return b, nil
}

// baselines returns the baseline record of each config, or ErrBaseline.
func baselines(recs []BenchRecord) (map[string]BenchRecord, error) {
	base, err := record.Baselines(recs)
	if err != nil {
		return nil, plottingErr(err)
	}
	return base, nil
}

// plottingErr returns a record error as plotting's: a *record.BaselineError
// as ErrBaseline, any other prefixed with "plotting: ".
func plottingErr(err error) error {
	if be, ok := errors.AsType[*record.BaselineError](err); ok {
		return fmt.Errorf("%w: config %q has %d", ErrBaseline, be.Config, be.Count)
	}
	return fmt.Errorf("plotting: %w", err)
}
