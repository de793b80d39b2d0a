package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/druto/druto/internal/atomicfile"
	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/data"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/gpu"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/optim"
	"github.com/druto/druto/pkg/record"
	"github.com/druto/druto/pkg/train"
)

// Mode is one way of running the training step.
type Mode struct {
	Fused  bool
	Policy amp.Policy
	Step   train.StepMode // where the step's decisions run (StepHost: the zero value)
}

// String names the mode as records do: "fused+bf16", "decomposed+fp32",
// "fused+bf16+graph", "fused+bf16+device".
func (m Mode) String() string {
	k := "decomposed"
	if m.Fused {
		k = "fused"
	}
	k += "+" + m.Policy.String()
	if m.Step != train.StepHost {
		k += "+" + m.Step.String()
	}
	return k
}

// Baseline is the mode every speed-up is measured against: what plain
// PyTorch runs (decomposed ops, fp32).
var Baseline = Mode{Fused: false, Policy: amp.FP32}

// Case is one model configuration at one batch shape.
type Case struct {
	Name   string // preset name
	Config gpt.Config
	Batch  int
	Seq    int
}

// The records a benchmark writes; their definitions and JSON forms live in
// pkg/record, which readers (plotting, nbui) import without the devices.
type (
	Memory = record.Memory // the bytes of a step by component
	Kernel = record.Kernel // one op micro-benchmark
	Util   = record.Util   // one utilisation sample
	Record = record.Bench  // the result of one (case, mode)
)

// Report is a benchmark run: where and when, and its records (the form of
// record.Report, with the methods that write it).
type Report record.Report

// NewReport starts a report for device name.
func NewReport(deviceName string) *Report {
	return &Report{Device: deviceName, Date: time.Now().UTC().Format(time.RFC3339), Git: GitRevision(),
		GoVersion: runtime.Version(), CPUs: runtime.NumCPU(), CPU: cpuModel()}
}

// cpuModel returns the first "model name" of /proc/cpuinfo with the x86
// vector extensions the CPU kernels choose between, or "" where there is
// no such file.
func cpuModel() string {
	raw, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	var name string
	var flags []string
	for _, line := range strings.Split(string(raw), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "model name":
			if name == "" {
				name = strings.TrimSpace(v)
			}
		case "flags":
			if flags == nil {
				flags = strings.Fields(v)
			}
		}
	}
	var isa []string
	for _, f := range []string{"avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16"} {
		if slices.Contains(flags, f) {
			isa = append(isa, f)
		}
	}
	if len(isa) > 0 {
		name += " (" + strings.Join(isa, " ") + ")"
	}
	return name
}

// GitRevision returns the VCS revision the binary was built from (with
// "+dirty" for uncommitted changes), or "unknown".
func GitRevision() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "unknown", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty {
		rev += "+dirty"
	}
	return rev
}

// Options control the timing, and let Sweep's caller watch and steer it
// (the hooks, each optional; StepTimes and ProfileStep ignore them).
type Options struct {
	Warmup int // untimed steps first (default 3)
	Steps  int // timed steps, of which the median is reported (default 20)
	// Tokens are the tokens the steps train on (e.g. an llm.c shard, the
	// same ones another framework's run reads), each folded into the case's
	// vocabulary; nil: the built-in corpus.
	Tokens []int32
	// FP8 is the recipe of the modes under amp.FP8 (train.Options.FP8);
	// the zero value means amp.DefaultFP8Recipe.
	FP8 amp.FP8Recipe

	// Skip reports whether Sweep leaves mode m out (asked once its device
	// is open; the caller says why).
	Skip func(m Mode) bool
	// Start runs once, on the first device, after its peak is measured.
	Start func(dev device.Device, rep *Report) error
	// Each runs on every record before Sweep adds it to the report.
	Each func(dev device.Device, c Case, m Mode, r *Record) error
}

// StepTimes trains c in mode m on dev for warmup+steps steps on the built-in
// corpus and returns the record with the median step time. open returns a
// device for a mode (fused or not); the caller owns its lifetime.
func StepTimes(dev device.Device, c Case, m Mode, o Options, peak float64) (Record, error) {
	return stepTimes(dev, c, m, o, peak, true)
}

// stepTimes is StepTimes; util false leaves out the utilisation run.
func stepTimes(dev device.Device, c Case, m Mode, o Options, peak float64, util bool) (Record, error) {
	if o.Warmup <= 0 {
		o.Warmup = 3
	}
	if o.Steps <= 0 {
		o.Steps = 20
	}
	if dev.Fused() != m.Fused {
		return Record{}, fmt.Errorf("bench: mode %s on a device with fused=%v", m, dev.Fused())
	}
	need := c.Batch*c.Seq*(o.Warmup+o.Steps) + 1
	var toks []int32
	if o.Tokens != nil {
		if len(o.Tokens) < c.Batch*c.Seq+1 {
			return Record{}, fmt.Errorf("bench: %d tokens given, fewer than one batch of %s (%d x %d + 1): give a longer shard", len(o.Tokens), c.Name, c.Batch, c.Seq)
		}
		toks = slices.Clone(o.Tokens)
	} else {
		var err error
		if toks, err = data.Encode(data.Corpus(1, min(need+c.Batch*c.Seq+1, 64<<20))); err != nil {
			return Record{}, err
		}
	}
	for i := range toks {
		toks[i] %= int32(c.Config.Vocab)
	}
	horizon := o.Warmup + o.Steps
	if util && m.Step == train.StepGraph {
		horizon += utilMaxSteps // the utilisation run (sampleUtil) continues the schedule
	}
	oc := optim.Defaults(horizon)
	oc.Warmup = 1
	to := train.Options{Config: c.Config, Policy: m.Policy, Batch: c.Batch, Seq: c.Seq, Optim: oc, Seed: 1, Step: m.Step, FP8: o.FP8}
	var notes []string
	if m.Step != train.StepHost {
		// The timed steps are queued as one span between two host waits;
		// each step is timed on the device between its own timing marks
		// (TimingEvents) where the device has them, else each step's time
		// is the span's over o.Steps (TimingSpan).
		to.LogEvery = o.Steps
		to.Notice = func(s string) { notes = append(notes, s) }
	}
	peaker, measures := dev.(PeakMemory)
	if measures {
		peaker.ResetMemoryPeak()
	}
	tr, err := train.New(dev, to, toks, nil)
	if err != nil {
		return Record{}, err
	}
	defer tr.Close()
	counter, counts := dev.(interface{ Launches() int64 })
	var times []float64
	var last train.Metric
	var launches0 int64
	timing := TimingHost
	if m.Step == train.StepHost {
		for i := 0; i < o.Warmup+o.Steps; i++ {
			if i == o.Warmup && counts {
				launches0 = counter.Launches()
			}
			start := time.Now()
			met, err := tr.Step()
			if err != nil {
				return Record{}, err
			}
			if i >= o.Warmup {
				times = append(times, float64(time.Since(start).Nanoseconds())/1e6)
			}
			last = met
		}
	} else {
		if err := tr.Run(context.Background(), max(1, o.Warmup), nil); err != nil {
			return Record{}, err
		}
		if counts {
			launches0 = counter.Launches()
		}
		timing = TimingEvents
		if err := tr.Run(context.Background(), max(1, o.Warmup)+o.Steps, func(met train.Metric) {
			if met.DeviceMs > 0 {
				times = append(times, met.DeviceMs)
			} else {
				times = append(times, met.MsPerStep)
				timing = TimingSpan
			}
			last = met
		}); err != nil {
			return Record{}, err
		}
	}
	var launches float64
	if counts {
		launches = float64(counter.Launches()-launches0) / float64(len(times))
	}
	var samples []Util
	var utilPct float64
	var utilNote string
	if util && m.Step == train.StepGraph {
		if _, ok := dev.(*gpu.Device); ok {
			samples, utilPct, err = sampleUtil(tr, median(times))
			if err != nil {
				utilNote = err.Error()
			}
		}
	}
	path := tr.GraphStatus()
	for _, n := range notes {
		fmt.Fprintf(os.Stderr, "bench: %s %s: %s\n", c.Name, m, n)
	}
	sort.Float64s(times)
	med := median(times)
	tokens := float64(c.Batch * c.Seq)
	r := Record{
		Config: c.Name, Mode: m.String(), Baseline: m == Baseline, Batch: c.Batch, Seq: c.Seq, Steps: o.Steps,
		StepMs: med, StepMsMin: times[0], StepMsMax: times[len(times)-1], TokensPerS: tokens / (med / 1e3), Loss: last.Loss,
		Launches: launches, StepPath: path, Timing: timing, Util: samples, GPUUtil: utilPct, UtilNote: utilNote,
	}
	if m.Policy == amp.FP8 {
		fr := o.FP8
		if fr == (amp.FP8Recipe{}) {
			fr = amp.DefaultFP8Recipe()
		}
		r.FP8Recipe = fr.String()
	}
	if peak > 0 {
		r.MFU = c.Config.FLOPsPerToken(c.Seq) * r.TokensPerS / peak
	}
	mem := gpt.MemoryOn(dev, c.Config, c.Batch, c.Seq, m.Policy) // the attention state dev saves
	if m.Policy == amp.FP8 && o.FP8.Head {
		mem = mem.WithFP8Head(c.Config, c.Batch, c.Seq, gpt.HeadRows(c.Config.Vocab, c.Batch*c.Seq, m.Policy.DType(amp.Activation), dev.Fused()))
	}
	r.Memory = Memory{Params: mem.Params, Grads: mem.Grads, Optimizer: mem.Optimizer, Activations: mem.Activations}
	if measures {
		r.PeakBytes = peaker.MemoryPeak()
	}
	return r, nil
}

// How a record's step times were measured (Record.Timing).
const (
	// TimingEvents: device timing marks (CUDA events) queued before each
	// step's uploads and after its state snapshot; every step its own time
	// (device-resident and graph modes on a GPU).
	TimingEvents = "events per step"
	// TimingHost: the host's clock around each step, which ends with the
	// host reading the step's results back (host mode).
	TimingHost = "host clock per step"
	// TimingSpan: one span of all timed steps between two host waits, over
	// their number; min and max equal the median (device-resident modes on a
	// device without timing marks).
	TimingSpan = "one span over the steps"
)

// PeakMemory is implemented by devices that measure the high-water mark of
// their memory in use (the GPU: its caching allocator's bytes handed out).
type PeakMemory interface {
	ResetMemoryPeak()
	MemoryPeak() int64
}

// median returns the median of ts (sorted in place).
func median(ts []float64) float64 {
	sort.Float64s(ts)
	n := len(ts)
	if n == 0 {
		return 0
	}
	if n%2 == 0 {
		return (ts[n/2-1] + ts[n/2]) / 2
	}
	return ts[n/2]
}

// The utilisation run of graph modes (Record.Util).
const (
	UtilSeconds  = 2.0                   // at least this long
	UtilEvery    = 50 * time.Millisecond // one NVML sample each
	utilMaxSteps = 20000                 // at most this many steps
	utilSkip     = 0.5                   // seconds of samples left out of the mean
)

var (
	nvmlOnce sync.Once
	nvmlLib  *cuda.NVML
	nvmlErr  error
)

// sampleUtil runs tr for at least UtilSeconds more steps (from a step time
// of stepMs) while a goroutine reads NVML's utilisation of device 0 every
// UtilEvery; it returns the samples and the mean GPU utilisation of those
// after utilSkip seconds.
func sampleUtil(tr *train.Trainer, stepMs float64) ([]Util, float64, error) {
	nvmlOnce.Do(func() { nvmlLib, nvmlErr = cuda.LoadNVML(cuda.LoadOptions{}) })
	if nvmlErr != nil {
		return nil, 0, fmt.Errorf("no NVML: %w", nvmlErr)
	}
	if _, _, _, err := nvmlLib.Utilization(0); err != nil {
		return nil, 0, err
	}
	steps := min(utilMaxSteps, max(20, int(math.Ceil(UtilSeconds*1000/max(stepMs, 1e-3)))))
	var samples []Util
	var serr error
	done, finished := make(chan struct{}), make(chan struct{})
	t0 := time.Now()
	go func() {
		defer close(finished)
		tick := time.NewTicker(UtilEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				g, _, used, err := nvmlLib.Utilization(0)
				if err != nil {
					serr = err
					return
				}
				samples = append(samples, Util{TS: time.Since(t0).Seconds(), GPUUtil: float64(g), MemUsedBytes: float64(used)})
			}
		}
	}()
	err := tr.Run(context.Background(), tr.StepsDone()+steps, nil)
	close(done)
	<-finished
	if err = errors.Join(err, serr); err != nil {
		return samples, 0, err
	}
	var sum float64
	var n int
	for _, u := range samples {
		if u.TS >= utilSkip {
			sum += u.GPUUtil
			n++
		}
	}
	if n == 0 {
		return samples, 0, fmt.Errorf("no NVML sample after %.1f s of a %d-step run", utilSkip, steps)
	}
	return samples, sum / float64(n), nil
}

// SpeedUps returns, per config, each mode's speed-up over the baseline
// record of that config (baseline step_ms / mode step_ms).
func (r *Report) SpeedUps() map[string]map[string]float64 {
	base := map[string]float64{}
	for _, x := range r.Records {
		if x.Baseline {
			base[x.Config] = x.StepMs
		}
	}
	out := map[string]map[string]float64{}
	for _, x := range r.Records {
		if b, ok := base[x.Config]; ok {
			if out[x.Config] == nil {
				out[x.Config] = map[string]float64{}
			}
			out[x.Config][x.Mode] = b / x.StepMs
		}
	}
	return out
}

// Save writes the report as indented JSON, atomically.
func (r *Report) Save(path string) error {
	b, err := (*record.Report)(r).Marshal()
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, b); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

// Load reads a report written by Save.
func Load(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	r, err := record.ParseReport(b)
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w", path, err)
	}
	return (*Report)(r), nil
}
