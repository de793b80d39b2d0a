package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/druto/druto"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/bench"
	"github.com/druto/druto/pkg/data"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/gpu"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/optim"
	"github.com/druto/druto/pkg/tensor"
	"github.com/druto/druto/pkg/train"
)

func init() { register("train", "train a GPT on the built-in corpus or a data file", runTrain) }

// maxStepTokens bounds --batch x --seq, so that every size derived from
// them (the dry run's memory too) is far from overflowing.
const maxStepTokens = 1 << 31

// maxSteps bounds --steps, --until and --warmup: the device-resident step
// counts optimizer steps in a float32 slot (device.SlotOptSteps), exact up
// to 2^24.
const (
	maxSteps    = 1 << 24
	maxStepsWhy = "the step on the device counts optimizer steps in float32, exact up to 2^24"
)

func runTrain(args []string) error {
	fs := newFlags("train")
	preset := fs.String("preset", "tiny", "model preset: "+fmt.Sprint(gpt.Presets()))
	steps := fs.Int("steps", 300, "training steps (the learning-rate schedule's length)")
	until := fs.Int("until", 0, "stop after this step (0: at --steps); resume later with --resume")
	dataPath := fs.String("data", "", "UTF-8 text or llm.c .bin token shard (default: the built-in corpus)")
	out := fs.String("out", "out", "folder for checkpoints and metrics.jsonl")
	seed := fs.Uint64("seed", 1337, "seed for initialisation, corpus and sampling")
	prec := fs.String("amp", "fp32", "precision policy: fp32, bf16, fp16, or fp8 on sm_90+ (the blocks' linear layers in FP8; refused elsewhere, with the reason)")
	batch := fs.Int("batch", 8, "sequences per micro-batch (B; per step without --accum); without it, --fit picks it")
	accum := fs.Int("accum", 0, "micro-batches per step (gradient accumulation; 0: 1, or --total-batch / (--batch x --seq))")
	totalBatch := fs.Int("total-batch", 0, "tokens per step (llm.c's total batch size): --accum is derived from it; with --fit, the batch the plan reaches (0: 8 sequences)")
	recompute := fs.String("recompute", "none", "activation recomputation: none, gelu (the MLP's GELU) or layer (each block's forward); with --fit, given: only this level")
	fit := fs.Bool("fit", false, "plan --batch, --accum and --recompute for the memory free (DRUTO_GPU_MEMORY caps it); the default when neither --batch nor --accum is given")
	seq := fs.Int("seq", 0, "tokens per sequence (T; 0: the preset's maximum)")
	lr := fs.Float64("lr", 2e-3, "peak learning rate")
	warmup := fs.Int("warmup", 20, "linear warm-up steps")
	evalEvery := fs.Int("eval-every", 50, "validation loss every N steps (0: never)")
	evalBatches := fs.Int("eval-batches", 8, "batches per validation")
	sampleEvery := fs.Int("sample-every", 0, "print a sample every N steps (0: only at the end)")
	sampleTokens := fs.Int("sample-tokens", -1, fmt.Sprintf("tokens per sample (-1: %d for models up to %.0f M parameters, none above: without a KV cache a big model's sample takes longer than a short run)", defaultSampleTokens, sampleParamsLimit/1e6))
	prompt := fs.String("prompt", "\n", "text the samples continue")
	ckptEvery := fs.Int("checkpoint-every", 0, "also checkpoint every N steps")
	resume := fs.Bool("resume", false, "continue the run saved in --out")
	overwrite := fs.Bool("overwrite", false, "start a new run in an --out that holds another run's files: its model, state and metrics are replaced at the new run's first checkpoint (a run that fails before it leaves them as they were)")
	dataChanged := fs.Bool("data-changed", false, "with --resume: continue on other data than the checkpoint's, on purpose")
	dryRun := fs.Bool("dry-run", false, "print the memory a step needs under --amp and exit")
	graph := fs.Bool("graph", true, "on a GPU, run the step on the device as one CUDA graph (false: the host-driven step)")
	logEvery := fs.Int("log-every", 10, "with --graph, read the metrics back every N steps")
	spec := tokenizerFlag(fs, "default: bytes, gpt2 for gpt2-124M, the checkpoint's with --init")
	initPath := fs.String("init", "", "start from this checkpoint's weights (druto's, a transformers GPT-2, or a Hub name: gpt2, gpt2-medium, ORG/NAME[@REV]): fine-tuning; the model shape comes from it")
	saveDType := fs.String("save-dtype", "f32", "dtype of the saved model file: f32, or bf16 or f16 for half the size (the optimizer state keeps --adam-state)")
	fp8History := fs.Int("fp8-history", 1024, "--amp fp8: the amax history of delayed scaling, in steps (each FP8 tensor's scale follows the largest amax of its last N steps)")
	fp8Head := fs.Bool("fp8-head", false, "--amp fp8: the LM head's forward product (the logits), input gradient and weight gradient in FP8 as well (DRUTO_FP8_HEAD_DW=bf16 keeps its weight gradient in bf16)")
	fp8Margin := fs.Int("fp8-margin", 0, "--amp fp8: headroom of the FP8 scales, as a power of two (amax maps to the format's max / 2^margin)")
	fp8Scaling := fs.String("fp8-scaling", "delayed", "--amp fp8: how each FP8 tensor's scale is chosen: delayed (from its amax history, --fp8-history; the casts happen in the kernels that make the tensors) or current (from the tensor's own amax: every FP8 cast runs twice)")
	adamState := fs.String("adam-state", "fp32", "dtype of AdamW's moments: fp32, or bf16 (half the optimizer state, stochastic rounding; --resume converts a checkpoint's moments)")
	be := backendFlags(fs)
	dp := distFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *prec == amp.FP8.String() {
		// Checked before anything is read, downloaded or written: on the
		// CPU and below sm_89 for want of FP8 tensor cores, on sm_89 for
		// want of the instructions of druto's FP8 kernels.
		if err := druto.FP8Error(*be.name, gpu.LoadOptions{}); err != nil {
			return err
		}
	}
	if *out == "" {
		return fmt.Errorf("--out is empty: give the folder for the checkpoints and metrics.jsonl (e.g. --out out)")
	}
	if *overwrite && *resume {
		return fmt.Errorf("--overwrite replaces the run in --out and --resume continues it: give one of them")
	}
	if _, err := os.Stat(filepath.Join(*out, train.StateFile)); *resume && err != nil {
		return fmt.Errorf("--resume: %s holds no checkpoint to continue (no %s); leave out --resume to start a run there", *out, train.StateFile)
	}
	if _, _, err := dp.count(); err != nil {
		return err
	}
	cfg, err := gpt.Preset(*preset)
	if err != nil {
		return err
	}
	saveDT, err := tensor.ParseDType(*saveDType)
	if err != nil || saveDT == tensor.I32 {
		return fmt.Errorf("--save-dtype %q: give f32, bf16 or f16", *saveDType)
	}
	momentDT, err := parseAdamState(*adamState)
	if err != nil {
		return err
	}
	if *fp8Scaling != "delayed" && *fp8Scaling != "current" {
		return fmt.Errorf("--fp8-scaling %q: choose delayed or current", *fp8Scaling)
	}
	initName := *initPath
	if *initPath, err = resolveCheckpoint(*initPath); err != nil { // pull.go: a Hub name becomes its cached file
		return err
	}
	var tok data.Tokenizer
	var initCk *train.Checkpoint
	if *dryRun && *initPath != "" {
		// The shape is all a dry run needs: read from the header, so that a
		// 6 GB gpt2-xl is measured without loading it.
		if cfg, err = train.ReadModelConfig(*initPath); err != nil {
			return err
		}
		*preset = initName
	} else if tok, initCk, err = runTokenizerAndInit(fs, &cfg, *spec, *initPath, *resume, *out); err != nil {
		return err
	}
	policy, err := amp.ParsePolicy(*prec)
	if err != nil {
		return err
	}
	if *seq == 0 {
		*seq = cfg.MaxSeq
	}
	if err := inRange("steps", *steps, 1, maxSteps, maxStepsWhy); err != nil {
		return err
	}
	if err := inRange("warmup", *warmup, 0, maxSteps, maxStepsWhy); err != nil {
		return err
	}
	if err := inRange("until", *until, 0, *steps, fmt.Sprintf("the run ends at --steps %d, where its learning-rate schedule ends (0: at --steps)", *steps)); err != nil {
		return err
	}
	if *seq < 1 || *seq > cfg.MaxSeq {
		return fmt.Errorf("--seq %d must be between 1 and %d, the %s preset's maximum", *seq, cfg.MaxSeq, *preset)
	}
	if *batch < 1 {
		return fmt.Errorf("--batch %d must be at least 1", *batch)
	}
	if *batch > maxStepTokens / *seq {
		return fmt.Errorf("--batch %d x --seq %d is more than %d tokens a step (2^31: a step's token offsets are int32); use a smaller --batch", *batch, *seq, maxStepTokens)
	}
	sp, err := stepPlanFlags(fs, *batch, *seq, *accum, *totalBatch, *recompute, *fit)
	if err != nil {
		return err
	}
	*batch = sp.batch
	memCap, err := device.MemoryCap()
	if err != nil {
		return err
	}
	if !utf8.ValidString(*prompt) {
		return fmt.Errorf("--prompt is not valid UTF-8; pass UTF-8 text")
	}
	if *sampleTokens < -1 {
		return fmt.Errorf("--sample-tokens %d must be 0 or more (or -1: sized to the model)", *sampleTokens)
	}
	if *sampleTokens == -1 {
		*sampleTokens = autoSampleTokens(cfg)
		if *sampleTokens == 0 && *sampleEvery == 0 && !*dryRun {
			fmt.Fprintf(os.Stderr, "druto: no end-of-run sample for a model of %d parameters; --sample-tokens N asks for one\n", cfg.NumParams())
		}
	}
	if *sampleTokens > maxSampleTokens {
		return fmt.Errorf("--sample-tokens %d is more than %d", *sampleTokens, maxSampleTokens)
	}
	if *dataChanged && !*resume {
		return fmt.Errorf("--data-changed goes with --resume")
	}
	if *logEvery < 1 {
		return fmt.Errorf("--log-every %d must be at least 1", *logEvery)
	}
	if _, err := gpt.HeadRowsOverride(); err != nil {
		return err
	}
	if _, err := gpt.HeadDWFromEnv(); err != nil {
		return err
	}
	if *dryRun {
		// The GPU's flash kernels save a log-sum-exp per row instead of the
		// T×T probabilities (fused 16-bit, hs 32/64/128; bf16 on sm_80+,
		// fp16 on sm_75+).
		flash := *be.fused && *be.name != "cpu" && gpu.FlashSupports(policy.DType(amp.Activation), cfg.Channels/cfg.Heads)
		if sp.plan {
			q := sp.request(cfg, policy, *seq, *be.fused)
			q.AdamState = momentDT
			q.Budget = memCap
			if memCap > 0 {
				q.BudgetFrom = device.MemoryCapEnv
				if *be.name != "cpu" {
					q.Reserve = train.GPUReserve
				}
			}
			if flash {
				q.AttState = func(B int) device.AttnState { return device.LSEState(B, *seq, cfg.Heads) }
			}
			p, err := train.PlanFor(q)
			if err != nil {
				return err
			}
			fmt.Print(p.Table())
			c := p.Chosen()
			*batch, sp.accum, sp.recompute = c.Batch, c.Accum, c.Recompute
		}
		rc := sp.recompute
		mem := gpt.MemoryFor(cfg, *batch, *seq, policy, rc)
		head := fmt.Sprintf("LM head in chunks of %d rows", gpt.HeadRows(cfg.Vocab, *batch**seq, policy.DType(amp.Activation), true))
		if !*be.fused {
			mem, head = gpt.MemoryDecomposed(cfg, *batch, *seq, policy, rc), "decomposed: all logits kept"
		}
		fp32Opt := mem.Optimizer
		mem = mem.WithMoments(cfg, momentDT)
		if policy == amp.FP8 && *fp8Head {
			mem = mem.WithFP8Head(cfg, *batch, *seq, gpt.HeadRows(cfg.Vocab, *batch**seq, policy.DType(amp.Activation), *be.fused))
		}
		fmt.Printf("%s (%d parameters), B %d T %d, %s (%s), recompute %s, AdamW moments %s:\n", *preset, cfg.NumParams(), *batch, *seq, policy, head, rc, *adamState)
		fmt.Printf("  parameters  %12d bytes\n  gradients   %12d bytes\n  optimizer   %12d bytes\n  activations %12d bytes\n  total       %12d bytes (%.1f MiB)\n",
			mem.Params, mem.Grads, mem.Optimizer, mem.Activations, mem.Total(), float64(mem.Total())/(1<<20))
		if saved := fp32Opt - mem.Optimizer; saved > 0 {
			fmt.Printf("  bf16 moments save %d bytes (%.1f MiB) of optimizer state against fp32\n", saved, float64(saved)/(1<<20))
		}
		if rc != gpt.RecomputeNone {
			none := gpt.MemoryFor(cfg, *batch, *seq, policy)
			if !*be.fused {
				none = gpt.MemoryDecomposed(cfg, *batch, *seq, policy)
			}
			fmt.Printf("  recompute %s saves %d bytes of activations (%.1f MiB) against none, for %.3g more FLOPs a token (%.1f%%)\n", rc,
				none.Activations-mem.Activations, float64(none.Activations-mem.Activations)/(1<<20),
				cfg.RecomputeFLOPsPerToken(*seq, rc), 100*cfg.RecomputeFLOPsPerToken(*seq, rc)/cfg.FLOPsPerToken(*seq))
		}
		if sp.accum > 1 {
			fmt.Printf("  accumulation: %d micro-batches of %d x %d, %d tokens a step (the loss sum adds %d bytes)\n",
				sp.accum, *batch, *seq, sp.accum**batch**seq, 4**batch**seq)
		}
		att := device.ProbState(policy.DType(amp.Activation), *batch, *seq, cfg.Heads)
		if flash {
			att = device.LSEState(*batch, *seq, cfg.Heads)
			fm := gpt.MemoryWith(cfg, *batch, *seq, policy, att, rc).WithMoments(cfg, momentDT)
			fmt.Printf("  with flash attention (GPU; bf16 sm_80+, fp16 sm_75+): activations %d bytes, total %d bytes (%.1f MiB)\n",
				fm.Activations, fm.Total(), float64(fm.Total())/(1<<20))
		}
		fmt.Println("  activations by buffer (MB, the largest first):", breakdown(gpt.ActivationBreakdown(cfg, *batch, *seq, policy, att, *be.fused, rc)))
		return nil
	}
	oc := optim.Defaults(*steps)
	oc.LR, oc.Warmup = float32(*lr), *warmup
	opts := train.Options{
		Config: cfg, Policy: policy, Batch: *batch, Seq: *seq, Optim: oc, Seed: *seed, Accum: sp.accum, Recompute: sp.recompute, AdamState: momentDT,
		FP8:       amp.FP8Recipe{Current: *fp8Scaling == "current", History: *fp8History, Margin: *fp8Margin, Head: *fp8Head},
		EvalEvery: *evalEvery, EvalBatches: *evalBatches,
		SampleEvery: *sampleEvery, SampleTokens: *sampleTokens, SamplePrompt: *prompt,
		OutDir: *out, CheckpointEvery: *ckptEvery, DataChanged: *dataChanged, Tokenizer: tok, SaveDType: saveDT,
	}
	if err := opts.Validate(); err != nil {
		return err
	}
	if done, err := dp.setup(be, &opts, args); done || err != nil {
		return err
	}
	// The device first: a step that cannot fit is refused before anything
	// (the token cache included) is written.
	dev, why, err := be.open()
	if err != nil {
		return err
	}
	if err := be.report.PolicyError(policy); err != nil {
		return err
	}
	// One request for the plan and the check: its budget is read once,
	// before the planner's probes leave the device's scratch allocated.
	q := sp.request(cfg, policy, *seq, dev.Fused())
	q.AdamState = momentDT
	if sp.plan {
		// Ranks of data-parallel training plan alike: by FLOPs, not by a
		// timed probe whose noise could differ between them.
		p, err := train.PlanOn(dev, q, *dp.ranks <= 1 && *dp.gpus <= 1)
		if err != nil {
			return err
		}
		fmt.Fprint(os.Stderr, p.Table())
		c := p.Chosen()
		*batch, opts.Batch, opts.Accum, opts.Recompute = c.Batch, c.Batch, c.Accum, c.Recompute
		q = p.Req
	} else if q, err = train.RequestOn(dev, q); err != nil {
		return err
	}
	if err := fitCheck(dev, q, opts.Batch, opts.Accum, opts.Recompute, dp.local,
		fmt.Sprintf("%s at B %d T %d under %s, recompute %s, %s moments", modelLabel(cfg, *preset, initCk != nil), *batch, *seq, policy, opts.Recompute, *adamState)); err != nil {
		return err
	}
	name := *dataPath
	if name == "" {
		name = "the built-in corpus"
	}
	update, finish := encodeProgress(name, tok, *out != "")
	recipe := train.Recipe{Options: opts, Data: *dataPath, Tokenized: update, Resume: *resume, Fresh: *overwrite && opts.OutDir != "", Init: initCk, Graph: *graph}
	if *graph {
		recipe.LogEvery = *logEvery
		recipe.Notice = func(msg string) { fmt.Fprintln(os.Stderr, "druto: "+msg) }
	}
	run, err := train.Start(dev, recipe)
	if errors.Is(err, train.ErrRunExists) {
		held, _ := train.RunFiles(*out)
		return fmt.Errorf("%s already holds a run's files (%s); pass --resume to continue that run, --overwrite to replace it, or choose another --out", *out, strings.Join(held, ", "))
	}
	if err != nil {
		return err
	}
	defer run.Close()
	finish(run.Tokens, run.Cache)
	tr, source, trainN := run.Trainer, run.Source, run.Train
	if at := tr.StepsDone(); *resume && at >= *steps {
		// Not an error (a script may resume until done), but no "done, step 0".
		fmt.Fprintf(os.Stderr, "druto: the run in %s has done all its %d steps: nothing to train; its model is %s\n", *out, *steps, filepath.Join(*out, train.ModelFile))
		return nil
	} else if *resume && *until > 0 && *until <= at {
		return fmt.Errorf("--until %d: the run in %s is already at step %d; give an --until between %d and %d (--steps)", *until, *out, at, at+1, *steps)
	}
	model := *preset
	if initCk != nil {
		model = fmt.Sprintf("%s from %s (%s)", cfg, initName, initCk.From)
	}
	stepping := ""
	if opts.Accum > 1 || opts.Recompute != gpt.RecomputeNone {
		stepping = fmt.Sprintf(" x %d micro-batches, recompute %s", max(1, opts.Accum), opts.Recompute)
	}
	fmt.Fprintf(os.Stderr, "druto: %s, %d parameters, %s, B %d T %d%s, %d steps on %s (%s), %s step; data: %s (%d %s tokens)\n",
		model, cfg.NumParams(), policy, *batch, *seq, stepping, *steps, dev.Name(), why, tr.GraphStatus(), source, trainN, tok.Name())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	last := *steps
	if *until > 0 && *until < last {
		last = *until
	}
	prog := newProgress(tr.StepsDone(), last)
	start := time.Now()
	var final train.Metric
	// The peak is printed when the last step is reported, before the final
	// checkpoint is written: a big model's write takes minutes, and a run
	// stopped during it still says what memory its steps used.
	var peaked sync.Once
	peak := func() {
		if pm, ok := dev.(bench.PeakMemory); ok { // the GPU: its allocator's high-water mark
			limit := ""
			if memCap > 0 {
				limit = fmt.Sprintf(" (%s caps it at %s)", device.MemoryCapEnv, train.GiB(memCap))
			}
			prog.note(fmt.Sprintf("druto: peak device memory %s%s", train.GiB(pm.MemoryPeak()), limit))
		}
	}
	err = tr.Run(ctx, *until, func(m train.Metric) {
		final = m
		prog.update(m)
		if m.Sample != "" {
			prog.note("sample @" + fmt.Sprint(m.Step) + ":\n" + m.Sample)
		}
		if m.Step == last {
			peaked.Do(peak)
		}
	})
	prog.finish()
	if err == nil {
		peaked.Do(peak)
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("interrupted at step %d; checkpoint saved in %s, continue with --resume", tr.StepsDone(), *out)
	}
	if err != nil {
		return err
	}
	where := "no checkpoint (rank > 0: rank 0 writes)"
	if opts.OutDir != "" {
		where = "checkpoint " + filepath.Join(opts.OutDir, train.ModelFile)
	}
	val := "" // no evaluation (--eval-every 0): no validation loss to print
	if final.ValLoss != 0 {
		val = fmt.Sprintf(" val %.4f", final.ValLoss)
	}
	fmt.Fprintf(os.Stderr, "druto: done, step %d loss %.4f%s in %s; %s\n",
		final.Step, final.Loss, val, time.Since(start).Round(time.Millisecond), where)
	return nil
}

// The end-of-run sample of --sample-tokens -1: defaultSampleTokens tokens
// for models of up to sampleParamsLimit parameters (the tiny and small
// presets), none for bigger ones.
const (
	defaultSampleTokens = 160
	sampleParamsLimit   = 10e6
)

// autoSampleTokens is the sample length --sample-tokens -1 stands for.
func autoSampleTokens(cfg gpt.Config) int {
	if cfg.NumParams() > sampleParamsLimit {
		return 0
	}
	return defaultSampleTokens
}

// breakdown formats the activation buffers of at least 1 MB, the largest
// first, as "qkv 906, fch 1208, ...".
func breakdown(bs []gpt.ActivationBytes) string {
	bs = slices.Clone(bs)
	slices.SortStableFunc(bs, func(a, b gpt.ActivationBytes) int { return cmp.Compare(b.Bytes, a.Bytes) })
	var parts []string
	for _, b := range bs {
		if b.Bytes >= 1e6 {
			parts = append(parts, fmt.Sprintf("%s %.0f", b.Name, float64(b.Bytes)/1e6))
		}
	}
	return strings.Join(parts, ", ")
}

// stepPlan is how a step is laid out: given by --batch, --accum and
// --total-batch, or planned (--fit) for a total batch.
type stepPlan struct {
	plan      bool
	batch     int // B (planned: replaced by the plan's)
	accum     int
	total     int // tokens a step
	recompute gpt.Recompute
	levels    []gpt.Recompute // with plan: the levels to consider (nil: all)
}

// stepPlanFlags checks --batch, --accum, --total-batch, --recompute and
// --fit together. Planning is --fit, or the default when neither --batch
// nor --accum is given.
func stepPlanFlags(fs *flag.FlagSet, batch, seq, accum, total int, recompute string, fit bool) (stepPlan, error) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	rc, err := gpt.ParseRecompute(recompute)
	if err != nil {
		return stepPlan{}, fmt.Errorf("--recompute %q is not a level; choose none, gelu or layer", recompute)
	}
	switch {
	case accum < 0:
		return stepPlan{}, fmt.Errorf("--accum %d must not be negative", accum)
	case total < 0:
		return stepPlan{}, fmt.Errorf("--total-batch %d must not be negative", total)
	case total > maxStepTokens:
		return stepPlan{}, fmt.Errorf("--total-batch %d is more than %d tokens a step", total, maxStepTokens)
	case fit && (set["batch"] || set["accum"]):
		return stepPlan{}, fmt.Errorf("--fit picks --batch and --accum; give --fit with --total-batch, or --batch (and --accum) without --fit")
	}
	sp := stepPlan{batch: batch, accum: max(1, accum), recompute: rc, plan: fit || !set["batch"] && !set["accum"]}
	if sp.plan {
		sp.total = total
		if total == 0 {
			sp.total = batch * seq // the default batch
		}
		if sp.total%seq != 0 {
			return stepPlan{}, fmt.Errorf("--total-batch %d is not a multiple of --seq %d; use a multiple of %d tokens", total, seq, seq)
		}
		if set["recompute"] {
			sp.levels = []gpt.Recompute{rc}
		}
		return sp, nil
	}
	if total > 0 {
		if total%(batch*seq) != 0 {
			return stepPlan{}, fmt.Errorf("--total-batch %d is not divisible by --batch %d x --seq %d = %d tokens; use a multiple of %d (or --fit to plan the batch)",
				total, batch, seq, batch*seq, batch*seq)
		}
		if set["accum"] && accum != total/(batch*seq) {
			return stepPlan{}, fmt.Errorf("--accum %d and --total-batch %d disagree (--total-batch / (--batch x --seq) = %d); give one of them", accum, total, total/(batch*seq))
		}
		sp.accum = total / (batch * seq)
	}
	if sp.accum*batch > maxStepTokens/seq {
		return stepPlan{}, fmt.Errorf("--accum %d x --batch %d x --seq %d is more than %d tokens a step", sp.accum, batch, seq, maxStepTokens)
	}
	sp.total = sp.accum * batch * seq
	return sp, nil
}

// request returns the planner's request for the step plan.
// parseAdamState reads --adam-state: the dtype of AdamW's moments.
func parseAdamState(s string) (tensor.DType, error) {
	switch s {
	case "fp32", "f32":
		return tensor.F32, nil
	case "bf16":
		return tensor.BF16, nil
	}
	return 0, fmt.Errorf("--adam-state %q is not a moment dtype; choose fp32 or bf16", s)
}

// modelLabel names the model in messages: the preset, or for a checkpoint
// given with --init the preset of its shape, or the shape itself (e.g.
// "V50304 T1024 L48 H25 C1600").
func modelLabel(cfg gpt.Config, preset string, fromInit bool) string {
	if !fromInit {
		return preset
	}
	for _, n := range gpt.Presets() {
		if c, _ := gpt.Preset(n); c == cfg {
			return n
		}
	}
	return cfg.String()
}

func (sp stepPlan) request(cfg gpt.Config, p amp.Policy, T int, fused bool) train.PlanRequest {
	return train.PlanRequest{Config: cfg, Policy: p, Seq: T, TotalBatch: sp.total, Fused: fused, Levels: sp.levels}
}
