package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/druto/druto"
	"github.com/druto/druto/internal/hostmem"
	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/bench"
	"github.com/druto/druto/pkg/data"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/device/gpu"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/train"
)

func init() {
	register("bench", "time training steps of fused+AMP modes against the plain baseline", runBench)
}

// parseModes reads "decomposed+fp32,fused+bf16,fused+bf16+graph" (or
// "all"): a third part, graph or device, runs the step's decisions on the
// device, as one CUDA graph or with plain launches.
func parseModes(s string) ([]bench.Mode, error) {
	if s == "all" {
		var out []bench.Mode
		for _, f := range []bool{false, true} {
			for _, p := range []amp.Policy{amp.FP32, amp.BF16, amp.FP16} {
				out = append(out, bench.Mode{Fused: f, Policy: p})
			}
		}
		return out, nil
	}
	var out []bench.Mode
	for _, m := range strings.Split(s, ",") {
		kind, prec, ok := strings.Cut(strings.TrimSpace(m), "+")
		if !ok || (kind != "fused" && kind != "decomposed") {
			return nil, fmt.Errorf("--modes: %q is not fused+PREC or decomposed+PREC (optionally +graph or +device)", m)
		}
		prec, stepName, _ := strings.Cut(prec, "+")
		p, err := amp.ParsePolicy(prec)
		if err != nil {
			return nil, fmt.Errorf("--modes: %w", err)
		}
		if p == amp.FP8 && kind != "fused" {
			return nil, fmt.Errorf("--modes %s: fp8 runs with the fused kernels only (its casts are fused into the ops that produce the operands); use fused+fp8", strings.TrimSpace(m))
		}
		step := train.StepHost
		switch stepName {
		case "":
		case "graph":
			step = train.StepGraph
		case "device":
			step = train.StepDevice
		default:
			return nil, fmt.Errorf("--modes: %q: the third part must be graph or device, not %q", m, stepName)
		}
		out = append(out, bench.Mode{Fused: kind == "fused", Policy: p, Step: step})
	}
	return out, nil
}

// parseCases reads "tiny:8x128,small:32x256" (preset[:BxT]).
func parseCases(s string) ([]bench.Case, error) {
	var out []bench.Case
	for _, c := range strings.Split(s, ",") {
		name, shape, _ := strings.Cut(strings.TrimSpace(c), ":")
		cfg, err := gpt.Preset(name)
		if err != nil {
			return nil, fmt.Errorf("--configs: %w", err)
		}
		b, t := 8, cfg.MaxSeq
		if shape != "" {
			if _, err := fmt.Sscanf(shape, "%dx%d", &b, &t); err != nil || b < 1 || t < 1 || t > cfg.MaxSeq {
				return nil, fmt.Errorf("--configs: %q: want %s:BxT with T <= %d", c, name, cfg.MaxSeq)
			}
			if b > maxStepTokens/t {
				return nil, fmt.Errorf("--configs: %q: %d x %d is more than %d tokens a step (2^31: a step's token offsets are int32)", c, b, t, maxStepTokens)
			}
		}
		out = append(out, bench.Case{Name: name, Config: cfg, Batch: b, Seq: t})
	}
	return out, nil
}

func runBench(args []string) error {
	fs := newFlags("bench")
	configs := fs.String("configs", "tiny:8x128", "presets with batch x sequence, comma-separated (e.g. tiny:8x128,gpt2-124M:16x1024)")
	modes := fs.String("modes", "decomposed+fp32,fused+fp32,fused+bf16", "modes, comma-separated, or all")
	steps := fs.Int("steps", 20, "timed steps per mode (the median is reported)")
	warmup := fs.Int("warmup", 3, "untimed warm-up steps")
	out := fs.String("json", "", "write the report here (JSON)")
	kernelsOnly := fs.Bool("kernels", false, "GPU kernel micro-benchmarks (L2 flushed, CUDA events) instead of training steps")
	ops := fs.String("ops", "", "with --kernels: the micro-benchmarks to run, comma-separated (default all: "+strings.Join(gpu.KernelOps, ",")+")")
	fp8Head := fs.Bool("fp8-head", false, "fp8 modes: the LM head's forward product (the logits), input gradient and weight gradient in FP8 as well (amp.FP8Recipe.Head; DRUTO_FP8_HEAD_DW=bf16 keeps its weight gradient in bf16)")
	profile := fs.Bool("profile", false, "also profile each step: time, work and % of the measured ceiling per op class")
	cpuProfile := fs.String("cpuprofile", "", "write a Go CPU profile (pprof) of the run (the timed steps, or --sample's generation) to this file")
	sample := fs.Bool("sample", false, "benchmark generation instead of training: --configs preset:BxP is B prompts of P tokens, each continued by --tokens tokens over the key/value cache (greedy); --steps rounds, median")
	newTokens := fs.Int("tokens", 128, "with --sample: tokens generated per prompt")
	sampleCk := fs.String("checkpoint", "", "with --sample: the configs of this checkpoint's shape generate with its weights (the others with a random model)")
	dataPath := fs.String("data", "", "train the timed steps on this llm.c token shard (.bin, e.g. from druto tokenizer shard), each id folded into the preset's vocabulary (default: the built-in corpus)")
	be := backendFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dataPath != "" && (*sample || *kernelsOnly) {
		return fmt.Errorf("--data is for training benchmarks, not --sample or --kernels")
	}
	// A median of more steps is no better, and a bound keeps a run finite.
	const maxBenchSteps, why = 10000, "the median of 10000 steps is as good as of more, and the benchmark must end"
	if err := inRange("steps", *steps, 1, maxBenchSteps, why); err != nil {
		return err
	}
	if err := inRange("warmup", *warmup, 0, maxBenchSteps, why); err != nil {
		return err
	}
	if *sample {
		rounds := 3
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "steps" {
				rounds = *steps
			}
		})
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
		return benchSample(be, *configs, *modes, *newTokens, rounds, *out, *sampleCk)
	}
	if *sampleCk != "" {
		return fmt.Errorf("--checkpoint is for --sample (training benchmarks start from a random model)")
	}
	if *steps < 1 || *warmup < 0 {
		return fmt.Errorf("--steps %d must be >= 1 and --warmup %d >= 0", *steps, *warmup)
	}
	if *ops != "" && !*kernelsOnly {
		return fmt.Errorf("--ops %s needs --kernels (it picks kernel micro-benchmarks)", *ops)
	}
	if *kernelsOnly {
		names, err := kernelOps(*ops)
		if err != nil {
			return err
		}
		return benchKernels(be, *out, names)
	}
	if r, err := gpt.HeadRowsOverride(); err != nil {
		return err
	} else if r > 0 {
		fmt.Fprintf(os.Stderr, "druto bench: %s=%d: the fused LM head runs in chunks of %d rows\n", gpt.HeadRowsEnv, r, r)
	}
	if _, err := gpt.HeadDWFromEnv(); err != nil {
		return err
	}
	stop, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	ms, err := parseModes(*modes)
	if err != nil {
		return err
	}
	for _, m := range ms {
		if m.Policy != amp.FP8 {
			continue
		}
		if err := druto.FP8Error(*be.name, gpu.LoadOptions{}); err != nil {
			return fmt.Errorf("--modes %s: %w", m, err)
		}
		break
	}
	cs, err := parseCases(*configs)
	if err != nil {
		return err
	}
	open := func(fused bool) (device.Device, error) {
		*be.fused = fused
		dev, _, err := be.open()
		if r := be.report; err == nil && r.Backend == druto.BackendGPU { // each mode opens the device: the self-test's verdict is cached
			fmt.Fprintf(os.Stderr, "druto bench: GPU opened in %.0f ms (op tests cached %v, step checks cached %v)\n", r.Millis, r.OpTestsCached, r.StepChecksCached)
		}
		return dev, err
	}
	o := bench.Options{Warmup: *warmup, Steps: *steps}
	if *fp8Head {
		o.FP8 = amp.DefaultFP8Recipe()
		o.FP8.Head = true
	}
	if *dataPath != "" {
		if !strings.EqualFold(filepath.Ext(*dataPath), ".bin") {
			return fmt.Errorf("--data %s: give an llm.c token shard (.bin); druto tokenizer shard --out FILE.bin writes one", *dataPath)
		}
		if o.Tokens, err = data.Load(*dataPath); err != nil {
			return err
		}
	}
	o.Skip = func(m bench.Mode) bool { // e.g. bf16 on a T4: the other modes still run
		err := be.report.PolicyError(m.Policy)
		if err != nil {
			fmt.Fprintf(os.Stderr, "druto bench: skipping %s: %v\n", m, err)
		}
		return err != nil
	}
	var cur *bench.Report // the report Sweep fills (its peak so far: the profiles' ceiling)
	var fp8Peak float64   // FLOP/s of FP8 products (bench.PeakFP8), once an fp8 mode is profiled
	o.Start = func(dev device.Device, rep *bench.Report) (err error) {
		cur = rep
		stamp(rep, be)
		rep.Data = *dataPath
		for _, c := range cs { // on the CPU, every case must fit the host before the first allocates
			for _, m := range ms {
				mem := gpt.MemoryFor(c.Config, c.Batch, c.Seq, m.Policy)
				if !m.Fused {
					mem = gpt.MemoryDecomposed(c.Config, c.Batch, c.Seq, m.Policy)
				}
				if err := hostFits(dev, mem.Total(), c); err != nil {
					return err
				}
			}
		}
		fmt.Fprintf(os.Stderr, "druto bench on %s; MFU against %.2f TFLOP/s (%s; measured again before each mode, the highest is the MFU denominator)\n", dev.Name(), rep.PeakFLOPs/1e12, rep.PeakNote)
		if *profile {
			if rep.CopyGBps, err = bench.CopyBandwidth(dev); err != nil {
				return fmt.Errorf("copy bandwidth: %w", err)
			}
		}
		return nil
	}
	o.Each = func(dev device.Device, c bench.Case, m bench.Mode, r *bench.Record) (err error) {
		fmt.Fprintf(os.Stderr, "  %-10s %-24s %9.2f ms/step (%.2f..%.2f, %s) %12.0f tok/s %8.1f launches/step  %s step  peak %s GiB%s\n",
			c.Name, m, r.StepMs, r.StepMsMin, r.StepMsMax, r.Timing, r.TokensPerS, r.Launches, r.StepPath, gibOrDash(r.PeakBytes), utilText(*r))
		if !*profile {
			return nil
		}
		if m.Policy == amp.FP8 && fp8Peak == 0 { // the FP8 products' ceiling, measured once
			var note string
			fp8Peak, note = bench.PeakFP8(dev)
			fmt.Fprintf(os.Stderr, "druto bench: FP8 products against %.2f TFLOP/s (%s)\n", fp8Peak/1e12, note)
		}
		ceil := bench.Ceilings{PeakFLOPs: cur.PeakFLOPs, PeakFP8FLOPs: fp8Peak, CopyGBps: cur.CopyGBps}
		if r.Profile, err = bench.ProfileStep(dev, c, m, bench.Options{Warmup: 2, Steps: 3, FP8: o.FP8}, ceil); err != nil {
			return fmt.Errorf("%s %s: profile: %w", c.Name, m, err)
		}
		fmt.Print(r.Profile.Table())
		if g, ok := dev.(*gpu.Device); ok { // the algorithm each GEMM of the step ran
			for _, c := range g.LtChoices() {
				fmt.Fprintf(os.Stderr, "  cuBLASLt: %s\n", c)
			}
			for _, f := range g.LtFallbacks() {
				fmt.Fprintf(os.Stderr, "  cuBLASLt fallback: %s\n", f)
			}
		}
		return nil
	}
	rep, err := bench.Sweep(open, cs, ms, o)
	if errors.Is(err, bench.ErrNoMode) {
		return fmt.Errorf("no mode of --modes %s can run on this device (see the lines above)", *modes)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "MFU against %.2f TFLOP/s, the highest of the peaks measured in this run\n", rep.PeakFLOPs/1e12)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "config\tB\tT\tmode\tstep ms\ttokens/s\tMFU\tspeed-up\tlaunches/step\tact GiB\tpeak GiB\tstep\tGPU util\t")
	ups := rep.SpeedUps()
	for _, r := range rep.Records {
		up := "-"
		if v, ok := ups[r.Config][r.Mode]; ok {
			up = fmt.Sprintf("%.2fx", v)
		}
		util := "-"
		if r.GPUUtil > 0 {
			util = fmt.Sprintf("%.1f%%", r.GPUUtil)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%.2f\t%.0f\t%.4f\t%s\t%.1f\t%s\t%s\t%s\t%s\t\n", r.Config, r.Batch, r.Seq, r.Mode, r.StepMs, r.TokensPerS, r.MFU, up, r.Launches,
			gibOrDash(r.Memory.Activations), gibOrDash(r.PeakBytes), r.StepPath, util)
	}
	tw.Flush()
	if *out != "" {
		return rep.Save(*out)
	}
	return nil
}

// gibOrDash formats bytes in GiB (torch's memory unit), "-" for 0 (not measured).
func gibOrDash(b int64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", float64(b)/(1<<30))
}

// utilText is a record's NVML utilisation for the progress line ("" where
// none was sampled and none was tried).
func utilText(r bench.Record) string {
	switch {
	case r.GPUUtil > 0:
		return fmt.Sprintf("  GPU util %.1f%% (NVML, %d samples over %.1f s)", r.GPUUtil, len(r.Util), r.Util[len(r.Util)-1].TS)
	case r.UtilNote != "":
		return "  GPU util: " + r.UtilNote
	}
	return ""
}

// kernelOps parses --ops: kernel micro-benchmark names, comma-separated
// (nil for all), each one of gpu.KernelOps.
func kernelOps(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var out []string
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(gpu.KernelOps, n) {
			return nil, fmt.Errorf("--ops: no kernel micro-benchmark %q; the names are %s", n, strings.Join(gpu.KernelOps, ", "))
		}
		out = append(out, n)
	}
	return out, nil
}

// benchKernels times each fused op against its decomposed form on the GPU
// (shapes of gpt2-124M at B16 T1024 under bf16) and reports GB/s against
// the copy-bandwidth ceiling.
func benchKernels(be *backend, out string, ops []string) error {
	open := func(fused bool) (*gpu.Device, error) {
		*be.fused = fused
		dev, why, err := be.open()
		if err != nil {
			return nil, err
		}
		g, ok := dev.(*gpu.Device)
		if !ok {
			return nil, fmt.Errorf("--kernels needs the GPU backend; %s", why)
		}
		return g, nil
	}
	fused, err := open(true)
	if err != nil {
		return err
	}
	defer fused.Close()
	plain, err := open(false)
	if err != nil {
		return err
	}
	defer plain.Close()
	cfg, _ := gpt.Preset("gpt2-124M")
	rs, err := gpu.BenchKernels(fused, plain, gpu.KernelOptions{Layout: cfg.Layout(), Ops: ops})
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "op\tform\tms\tGB/s\t% of ceiling\tTFLOP/s\t% of gemm_peak\t")
	for _, r := range rs {
		tf, pk := "-", "-"
		if r.TFLOPs > 0 {
			tf = fmt.Sprintf("%.1f", r.TFLOPs)
		}
		if r.PctOfPeak > 0 {
			pk = fmt.Sprintf("%.1f", r.PctOfPeak)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.4f\t%.0f\t%.1f\t%s\t%s\t\n", r.Name, r.Mode, r.Ms, r.GBps, r.PctOfCeil, tf, pk)
	}
	tw.Flush()
	// The GEMM rows' algorithms (tile, split-K, stages) and how each
	// configured cuBLASLt matmul's was chosen.
	for _, r := range rs {
		if strings.HasPrefix(r.Name, "gemm_") {
			fmt.Fprintf(os.Stderr, "%s %s: %s\n", r.Name, r.Mode, r.Shape)
		}
	}
	for _, c := range fused.LtChoices() {
		fmt.Fprintf(os.Stderr, "cuBLASLt: %s\n", c)
	}
	if out == "" {
		return nil
	}
	rep := bench.NewReport(fused.Name())
	stamp(rep, be)
	rep.Records = []bench.Record{bench.KernelRecord(rs)}
	return rep.Save(out)
}

// stamp marks a benchmark report with the binary's revision and the driver
// detection found.
func stamp(rep *bench.Report, be *backend) {
	if druto.Revision != "" {
		rep.Git = druto.Revision
	}
	if d := be.report.Driver; d != nil && d.Version != "" {
		rep.Driver = d.Version + " (CUDA " + d.CUDA + ")"
	}
}

// benchSample is druto bench --sample: generation's prefill time and decode
// rate per config and mode, beside the bound of reading the weights once a
// step at the copy bandwidth measured in the same run.
func benchSample(be *backend, configs, modes string, newTokens, rounds int, out, ckpt string) error {
	switch {
	case newTokens < 2 || newTokens > maxSampleTokens:
		return fmt.Errorf("--tokens %d must be in [2, %d] for --sample", newTokens, maxSampleTokens)
	case rounds < 1 || rounds > 1000:
		return fmt.Errorf("--steps %d must be in [1, 1000] for --sample (rounds of generation)", rounds)
	}
	if configs == "tiny:8x128" { // the training default: one prompt of 16 tokens instead
		configs = "tiny:1x16"
	}
	if modes == "decomposed+fp32,fused+fp32,fused+bf16" {
		modes = "fused+fp32,fused+bf16"
	}
	ms, err := parseModes(modes)
	if err != nil {
		return err
	}
	cs, err := parseCases(configs)
	if err != nil {
		return err
	}
	var params []float32 // the checkpoint's, for the configs of its shape
	var ckCfg gpt.Config
	if ckpt != "" {
		ck, _, err := readCheckpoint(ckpt, "")
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(cs, func(c bench.Case) bool { return c.Config == ck.Config }) {
			return fmt.Errorf("--checkpoint %s is %s, which no preset of --configs %s is: name the preset of its shape", ckpt, ck.Config, configs)
		}
		params, ckCfg = ck.Params, ck.Config
	}
	dev, _, err := be.open()
	if err != nil {
		return err
	}
	threads := 1
	if c, ok := dev.(*cpu.Device); ok {
		threads = c.Threads()
	}
	bw, err := bench.SampleCopyBandwidth(dev, threads)
	if err != nil {
		return fmt.Errorf("copy bandwidth: %w", err)
	}
	rep := bench.NewReport(dev.Name())
	stamp(rep, be)
	rep.CopyGBps = bw
	fmt.Fprintf(os.Stderr, "druto bench --sample on %s; copy bandwidth %.1f GB/s (%d threads, measured now)\n", dev.Name(), bw, threads)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "config\tB\tprompt\tnew\tmode\tprefill ms\tdecode tok/s\tbound tok/s\tof bound\tlaunches/token\t")
	for _, c := range cs {
		for _, m := range ms {
			if m.Step != 0 || !m.Fused {
				return fmt.Errorf("--modes %s: generation runs the fused ops on the host-driven path; use fused+fp32, fused+bf16 or fused+fp16", m)
			}
			if err := be.report.PolicyError(m.Policy); err != nil {
				fmt.Fprintf(os.Stderr, "druto bench: skipping %s: %v\n", m, err)
				continue
			}
			if err := hostFits(dev, gpt.DecodeBytes(c.Config, c.Batch, m.Policy)+int64(c.Config.NumParams())*4, c); err != nil {
				return err
			}
			var p []float32
			if c.Config == ckCfg {
				p = params
			}
			r, err := bench.Sample(dev, c, m, newTokens, rounds, bw, p)
			if err != nil {
				return fmt.Errorf("%s %s: %w", c.Name, m, err)
			}
			rep.Sample = append(rep.Sample, r)
			launches := "-"
			if r.LaunchesPerToken > 0 {
				launches = fmt.Sprintf("%.1f", r.LaunchesPerToken)
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%.1f\t%.1f\t%.1f\t%.0f%%\t%s\t\n", r.Config, r.Batch, r.PromptTokens, r.NewTokens, r.Mode,
				r.PrefillMs, r.DecodeTokS, r.BoundTokS, 100*r.DecodeTokS/r.BoundTokS, launches)
			if strings.HasPrefix(r.Graph, "plain") {
				fmt.Fprintf(os.Stderr, "druto bench: %s %s decoded without a CUDA graph: %s\n", c.Name, m, strings.TrimPrefix(r.Graph, "plain: "))
			}
		}
	}
	tw.Flush()
	if out != "" {
		return rep.Save(out)
	}
	return nil
}

// hostFits refuses a case whose memory does not fit the host, on the CPU.
func hostFits(dev device.Device, need int64, c bench.Case) error {
	if _, ok := dev.(*cpu.Device); !ok {
		return nil
	}
	if err := hostmem.Check(fmt.Sprintf("%s at batch %d", c.Name, c.Batch), need); err != nil {
		return fmt.Errorf("%w; lower the batch in --configs", err)
	}
	return nil
}

// startCPUProfile starts a Go CPU profile into path (--cpuprofile) once the
// flags are checked, and returns what stops it; with path "" it does
// nothing.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
