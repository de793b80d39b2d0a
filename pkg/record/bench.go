package record

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Memory is the bytes of a step by component.
type Memory struct {
	Params      int64 `json:"params"`
	Grads       int64 `json:"grads"`
	Optimizer   int64 `json:"optimizer"`
	Activations int64 `json:"activations"`
}

// Kernel is one op micro-benchmark.
type Kernel struct {
	Name        string  `json:"name"`
	Mode        string  `json:"mode"`
	Ms          float64 `json:"ms"`
	GBps        float64 `json:"gbps"`
	CeilingGBps float64 `json:"ceiling_gbps,omitempty"`
	// CeilingSource is where CeilingGBps comes from ("copy": measured in
	// the same run; "given"; "nominal: ..." naming a figure not measured).
	CeilingSource string  `json:"ceiling_source,omitempty"`
	TFLOPs        float64 `json:"tflops,omitempty"` // compute-bound ops (attention: causal FLOPs)
}

// Util is one utilisation sample.
type Util struct {
	TS           float64 `json:"t_s"`            // seconds since the benchmark started
	GPUUtil      float64 `json:"gpu_util"`       // percent, 0..100
	MemUsedBytes float64 `json:"mem_used_bytes"` // device memory in use (bytes)
}

// Bench is the result of one benchmarked (case, mode).
type Bench struct {
	Config     string  `json:"config"`
	Mode       string  `json:"mode"`
	Baseline   bool    `json:"baseline"`
	Batch      int     `json:"batch"`
	Seq        int     `json:"seq"`
	Steps      int     `json:"steps"`        // timed steps
	StepMs     float64 `json:"step_ms"`      // median
	StepMsMin  float64 `json:"step_ms_min"`  //
	StepMsMax  float64 `json:"step_ms_max"`  //
	TokensPerS float64 `json:"tokens_per_s"` // from the median
	MFU        float64 `json:"mfu,omitempty"`
	Loss       float32 `json:"loss"` // last step's loss, a sanity check that the run trained
	// Launches is the kernels, cuBLAS(Lt) calls and memsets the host queued
	// per timed step (a graph replay counts 1), where the device counts them.
	Launches float64 `json:"launches_per_step,omitempty"`
	// StepPath is how the step ran ("host", "device", "graph", or why a
	// graph was not used).
	StepPath string `json:"step_path,omitempty"`
	// Timing says how each timed step was measured, so that the median,
	// min and max are read rightly (pkg/bench: TimingEvents, TimingHost or
	// TimingSpan).
	Timing string `json:"timing,omitempty"`
	// FP8Recipe is the scaling recipe of a mode under fp8
	// (amp.FP8Recipe.String).
	FP8Recipe string `json:"fp8_recipe,omitempty"`
	Memory    Memory `json:"memory"` // counted from the model's tables (gpt.MemoryOn)
	// PeakBytes is the MEASURED high-water mark of the device memory in
	// use during the case (model, optimizer, activations, the device's
	// scratch and workspace), from the device's allocator, reset before
	// the model is made; 0 where the device does not measure it (the CPU).
	PeakBytes int64    `json:"peak_bytes,omitempty"`
	Kernels   []Kernel `json:"kernels,omitempty"`
	// Util is NVML's utilisation sampled every bench.UtilEvery over a run of
	// at least bench.UtilSeconds after the timed steps (graph modes on a GPU), and GPUUtil their mean after the first half
	// second (NVML averages over its own sample period, up to a second, so
	// the timed steps alone are too short); UtilNote says why there is none.
	Util     []Util   `json:"util,omitempty"`
	GPUUtil  float64  `json:"gpu_util_pct,omitempty"`
	UtilNote string   `json:"util_note,omitempty"`
	Profile  *Profile `json:"profile,omitempty"` // where the step's time goes (bench.ProfileStep)
}

// Sample is one generation benchmark: Batch prompts of PromptTokens
// tokens continued by NewTokens tokens each, greedy, the median of Rounds
// rounds.
type Sample struct {
	Config       string  `json:"config"`
	Mode         string  `json:"mode"` // fused+fp32, fused+bf16, ...
	Batch        int     `json:"batch"`
	PromptTokens int     `json:"prompt_tokens"`
	NewTokens    int     `json:"new_tokens"`
	Rounds       int     `json:"rounds"`
	PrefillMs    float64 `json:"prefill_ms"`          // prompts in, first tokens out (the model already loaded)
	DecodeTokS   float64 `json:"decode_tokens_per_s"` // every sequence's tokens after the first, per second
	DecodeMin    float64 `json:"decode_tokens_per_s_min"`
	DecodeMax    float64 `json:"decode_tokens_per_s_max"`
	Cached       bool    `json:"kv_cache"`
	// Graph is how the decode steps ran where graphs can be captured:
	// "graph" (one CUDA graph launch a step) or "plain: " and why not.
	Graph string `json:"graph,omitempty"`
	// LaunchesPerToken is the device launches a decode step queued
	// (kernels, cuBLAS calls, graph launches), where the device counts them.
	LaunchesPerToken float64 `json:"launches_per_token,omitempty"`
	Weights          string  `json:"weights"` // "checkpoint", or "random" (GPT-2's initialisation, seed 1)
	// WeightBytes is what one decode step reads of the weights: every
	// parameter in the working dtype but the position table (one row).
	WeightBytes int64 `json:"weight_bytes"`
	// BoundTokS is the decode rate if a step cost only reading the weights
	// once at the report's copy bandwidth: Batch × CopyGBps / WeightBytes.
	BoundTokS float64 `json:"bound_tokens_per_s,omitempty"`
}

// Report is a benchmark run: where and when, and its records.
type Report struct {
	Device    string  `json:"device"`
	Driver    string  `json:"driver,omitempty"`
	Date      string  `json:"date"`
	Git       string  `json:"git"`
	GoVersion string  `json:"go"`
	CPUs      int     `json:"cpus"`
	CPU       string  `json:"cpu,omitempty"`        // the processor's model name (/proc/cpuinfo), where known
	PeakFLOPs float64 `json:"peak_flops,omitempty"` // the MFU denominator, measured or quoted
	PeakNote  string  `json:"peak_note,omitempty"`
	CopyGBps  float64 `json:"copy_gbps,omitempty"` // the bandwidth profiles compare with (bench.CopyBandwidth)
	Data      string  `json:"data,omitempty"`      // the tokens trained on: a file or "" for the built-in corpus
	Records   []Bench `json:"records,omitempty"`   // training steps (none in a --sample report)
	// Sample holds the generation benchmark's records (druto bench --sample).
	Sample []Sample `json:"sample,omitempty"`
}

// Marshal returns the report as indented JSON ending in a newline, the
// form a report file holds.
func (r *Report) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ParseReport decodes a report file's bytes as written; unknown fields are
// ignored and nothing is checked (see ParseResults for the checked view).
func ParseReport(b []byte) (*Report, error) {
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// ParseSamples decodes the generation records (the "sample" list) of one
// report read from r; the other fields are ignored.
func ParseSamples(r io.Reader) ([]Sample, error) {
	var rep struct {
		Sample []Sample `json:"sample"`
	}
	if err := json.NewDecoder(r).Decode(&rep); err != nil {
		return nil, err
	}
	return rep.Sample, nil
}

// ProfileRow is one op class of a step.
type ProfileRow struct {
	Class string  `json:"class"`
	Calls int     `json:"calls"`           // op calls per step
	Ms    float64 `json:"ms"`              // device time per step
	Share float64 `json:"share"`           // of the step's time
	FLOPs float64 `json:"flops,omitempty"` // per step, for products
	Bytes float64 `json:"bytes,omitempty"` // per step, for memory-bound ops
	Rate  float64 `json:"rate,omitempty"`  // achieved TFLOP/s or GB/s
	Unit  string  `json:"unit,omitempty"`  // "TFLOP/s" or "GB/s"
	Pct   float64 `json:"pct_of_ceiling,omitempty"`
}

// Profile is where one training step's time goes (bench.ProfileStep): the
// mean over the profiled steps, one row per op class.
type Profile struct {
	Config       string       `json:"config"`
	Mode         string       `json:"mode"`
	Batch        int          `json:"batch"`
	Seq          int          `json:"seq"`
	Steps        int          `json:"steps"`
	StepMs       float64      `json:"step_ms"`          // per step: op timing included (host modes), or the real graph step (graph modes)
	OpsMs        float64      `json:"ops_ms,omitempty"` // graph modes: the sum of the ops' isolated graph replays
	Method       string       `json:"method,omitempty"` // how the op times were taken (graph modes)
	PeakFLOPs    float64      `json:"peak_flops"`
	PeakFP8FLOPs float64      `json:"peak_fp8_flops,omitempty"` // the FP8 products' ceiling (bench.PeakFP8)
	CopyGBps     float64      `json:"copy_gbps"`
	Rows         []ProfileRow `json:"rows"`
}

// Table renders the profile as aligned text.
func (p *Profile) Table() string {
	var b strings.Builder
	fp8 := ""
	if p.PeakFP8FLOPs > 0 {
		fp8 = fmt.Sprintf(", fp8 peak %.1f TFLOP/s", p.PeakFP8FLOPs/1e12)
	}
	fmt.Fprintf(&b, "%s B%d T%d %s: %.3f ms/step over %d profiled steps (peak %.1f TFLOP/s%s, copy %.0f GB/s)\n",
		p.Config, p.Batch, p.Seq, p.Mode, p.StepMs, p.Steps, p.PeakFLOPs/1e12, fp8, p.CopyGBps)
	if p.Method != "" {
		fmt.Fprintf(&b, "  (%s; Σ ops %.3f ms vs graph step %.3f ms)\n", p.Method, p.OpsMs, p.StepMs)
	}
	fmt.Fprintf(&b, "  %-30s %6s %9s %6s %12s %9s\n", "class", "calls", "ms", "share", "rate", "% ceiling")
	for _, r := range p.Rows {
		rate, pct := "", ""
		if r.Unit != "" {
			rate = fmt.Sprintf("%.3g %s", r.Rate, r.Unit)
			pct = "-" // no ceiling measured for the row (an FP8 product without PeakFP8FLOPs)
			if r.Pct > 0 {
				pct = fmt.Sprintf("%.1f", r.Pct)
			}
		}
		fmt.Fprintf(&b, "  %-30s %6d %9.3f %5.1f%% %12s %9s\n", r.Class, r.Calls, r.Ms, 100*r.Share, rate, pct)
	}
	return b.String()
}
