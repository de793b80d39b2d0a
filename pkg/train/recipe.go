package train

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/data"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/optim"
)

// CorpusBytes is how much built-in corpus a Recipe without Data trains on:
// enough that a 300-step tiny run (300 × 8 × 128 tokens) does not repeat
// its data.
const CorpusBytes = 1 << 20

// Recipe is a whole training run as a user states it: the trainer's
// options plus where the tokens come from, how the run starts (fresh, from
// a checkpoint's weights, or resumed) and whether the precision is picked
// for the device. `druto train`, the notebooks and the tests build their
// runs with it; Start turns it into a Trainer.
type Recipe struct {
	Options

	// Preset names the model (gpt.Presets) when Options.Config is zero.
	Preset string
	// Steps, LR and Warmup make Options.Optim (optim.Defaults(Steps) with
	// this peak learning rate and warm-up, where not 0) when its Steps is 0.
	Steps  int
	LR     float32
	Warmup int

	// AutoPolicy replaces Options.Policy by AutoPolicy(dev).
	AutoPolicy bool
	// Data is a UTF-8 text file or an llm.c .bin token shard; "" trains on
	// the built-in bilingual corpus (CorpusBytes of it, from Seed). Text is
	// tokenised with Options.Tokenizer (bytes when nil) once and cached in
	// OutDir.
	Data string
	// Tokenized, when set, reports tokenising progress (done of total
	// bytes); it is not called when the tokens come from the cache.
	Tokenized func(done, total int)
	// Resume continues the run saved in OutDir; without it (and without
	// Fresh), an OutDir that already holds a run is ErrRunExists.
	Resume bool
	// Fresh starts the run over: its first checkpoint replaces the model,
	// the training state and the metrics log a previous run left in OutDir
	// (the token cache stays, it depends only on the data). Until then the
	// old files stay untouched (the new log is kept under another name), so
	// a run that fails or is killed before its first checkpoint leaves the
	// old run whole. A notebook sets it so that a second Run All trains
	// again from step 0 instead of failing.
	Fresh bool
	// Init, when set, starts from these weights (fine-tuning); its Config
	// must equal Options.Config.
	Init *Checkpoint
	// Graph runs the step on the device as one CUDA graph where the device
	// can (StepGraph; Options.Step otherwise).
	Graph bool
}

// ErrRunExists is Start's error for a recipe that neither resumes nor
// starts fresh, into an OutDir that already holds a run: Start never
// overwrites a checkpoint unasked.
var ErrRunExists = errors.New("train: the output folder already holds a run")

// RunFiles returns the names of the files in dir that a run writes there
// (the model, its training state, the metrics log, a token cache, and a
// transformers config.json that a model beside it would be read with), in
// the order a user would look for them. A run that neither resumes nor
// starts fresh refuses a folder holding any of them: it would overwrite or
// cut them. A missing dir holds none.
func RunFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	rank := map[string]int{ModelFile: 1, StateFile: 2, "config.json": 3, MetricsFile: 4, pendingModel: 5}
	var held []string
	for _, e := range entries {
		n := e.Name()
		if rank[n] > 0 || strings.HasPrefix(n, "tokens-") && strings.HasSuffix(n, ".bin") {
			held = append(held, n)
		}
	}
	order := func(n string) int { return cmp.Or(rank[n], len(rank)+1) } // token caches last
	slices.SortStableFunc(held, func(a, b string) int { return cmp.Compare(order(a), order(b)) })
	return held, nil
}

// Run is a started Recipe: the trainer and what it trains on.
type Run struct {
	*Trainer
	Config gpt.Config // the model
	Policy amp.Policy // the precision it trains in (AutoPolicy's choice with Recipe.AutoPolicy)
	Source string     // "built-in bilingual corpus" or the data file
	Cache  string     // the token cache the tokens came from or went to ("" when none)
	Tokens int        // every token of the data
	Train  int        // training tokens
	Val    int        // validation tokens (0 when EvalEvery is 0)
}

// Tokens returns the training and validation tokens (the last 10%) of
// path, or of CorpusBytes of the built-in corpus from seed when path is
// "", under tok, caching them in cacheDir when it is not "" (see
// data.LoadTokens). source names the data; cache is the cache file used.
func Tokens(path string, seed uint64, tok data.Tokenizer, cacheDir string, progress func(done, total int)) (trainT, valT []int32, source, cache string, err error) {
	var toks []int32
	if path == "" {
		toks, cache, err = data.EncodeCached(tok, data.Corpus(seed, CorpusBytes), cacheDir, progress)
		source = "built-in bilingual corpus"
	} else {
		toks, cache, err = data.LoadTokens(path, tok, cacheDir, progress)
		source = path
	}
	if err != nil {
		return nil, nil, "", "", err
	}
	trainT, valT = data.Split(toks, 0.1)
	return trainT, valT, source, cache, nil
}

// Start checks the recipe, tokenises its data, builds the trainer on dev
// and loads the weights it starts from. Nothing is written before the
// recipe's options are known to run (the token cache included).
func Start(dev device.Device, r Recipe) (*Run, error) {
	if err := r.fill(); err != nil {
		return nil, err
	}
	if r.AutoPolicy {
		r.Policy = AutoPolicy(dev)
	}
	if r.Tokenizer == nil {
		r.Tokenizer = data.Bytes{}
	}
	if err := r.Options.Validate(); err != nil {
		return nil, err
	}
	if r.Init != nil && r.Init.Config != r.Config {
		return nil, fmt.Errorf("train: the checkpoint to start from is %s, the recipe's model %s", r.Init.Config, r.Config)
	}
	if r.Init != nil && r.Resume {
		return nil, fmt.Errorf("train: a run starts from a checkpoint's weights or resumes, not both")
	}
	if r.Fresh && r.Resume {
		return nil, fmt.Errorf("train: a run starts fresh or resumes, not both (Recipe.Fresh and Recipe.Resume)")
	}
	if !r.Resume && !r.Fresh && r.OutDir != "" {
		held, err := RunFiles(r.OutDir)
		if err != nil {
			return nil, err
		}
		if len(held) > 0 {
			return nil, fmt.Errorf("%w: %s holds %s; set Recipe.Resume to continue it, Recipe.Fresh to start over, or choose another OutDir",
				ErrRunExists, r.OutDir, strings.Join(held, ", "))
		}
	}
	trainT, valT, source, cache, err := Tokens(r.Data, r.Seed, r.Tokenizer, r.OutDir, r.Tokenized)
	if err != nil {
		return nil, err
	}
	total := len(trainT) + len(valT)
	switch {
	case r.EvalEvery == 0:
		valT = nil // no evaluation: the validation split need not hold a batch
	case len(valT) < r.Batch*r.Seq+1:
		return nil, fmt.Errorf("the validation split (the last 10%% of %s, %d tokens) is too small for one batch of %d x %d tokens; "+
			"use more data, a smaller --batch or --seq, or --eval-every 0", source, len(valT), r.Batch, r.Seq)
	}
	if _, ok := dev.(device.Grapher); ok && r.Graph {
		r.Step = StepGraph
	}
	tr, err := New(dev, r.Options, trainT, valT)
	if err != nil {
		return nil, err
	}
	tr.fresh = r.Fresh && r.OutDir != ""
	switch {
	case r.Resume:
		err = tr.Resume(r.OutDir)
	case r.Init != nil:
		err = tr.Model.SetParams(r.Init.Params)
	}
	if err != nil {
		tr.Close()
		return nil, err
	}
	return &Run{Trainer: tr, Config: r.Config, Policy: r.Policy, Source: source, Cache: cache, Tokens: total, Train: len(trainT), Val: len(valT)}, nil
}

// fill resolves Preset, Steps, LR, Warmup and a Seq of 0 (the model's
// longest sequence) into the options.
func (r *Recipe) fill() error {
	switch {
	case r.Preset != "" && r.Config != (gpt.Config{}):
		return fmt.Errorf("train: a recipe names a preset or gives a Config, not both")
	case r.Preset != "":
		cfg, err := gpt.Preset(r.Preset)
		if err != nil {
			return err
		}
		r.Config = cfg
	}
	switch {
	case r.Steps != 0 && r.Optim.Steps != 0:
		return fmt.Errorf("train: a recipe gives Steps or Options.Optim, not both")
	case r.Steps != 0:
		r.Optim = optim.Defaults(r.Steps)
		if r.LR != 0 {
			r.Optim.LR = r.LR
		}
		r.Optim.Warmup = r.Warmup
	}
	if r.Seq == 0 {
		r.Seq = r.Config.MaxSeq
	}
	return nil
}

// OpenCheckpoint reads the model file at path (LoadCheckpoint) and builds
// its model on dev (Checkpoint.Open).
func OpenCheckpoint(dev device.Device, path string) (*gpt.Model, *Checkpoint, error) {
	ck, err := LoadCheckpoint(path)
	if err != nil {
		return nil, nil, err
	}
	m, err := ck.Open(dev)
	return m, ck, err
}

// Open builds the checkpoint's model on dev, in fp32 (what sample, eval
// and generation use), with its weights.
func (c *Checkpoint) Open(dev device.Device) (*gpt.Model, error) { return c.OpenAs(dev, amp.FP32) }

// OpenAs is Open under precision policy p: the model computes in p's
// working dtype (16-bit weights and activations under BF16 and FP16). On
// the CPU the model's fp32 parameters are c.Params themselves (no copy):
// leave them unchanged while the model is used.
func (c *Checkpoint) OpenAs(dev device.Device, p amp.Policy) (*gpt.Model, error) {
	m, err := gpt.NewInference(dev, c.Config, p)
	if err != nil {
		return nil, err
	}
	if err := m.UseParams(c.Params); err != nil { // on the CPU the model reads c.Params in place (it never writes them)
		m.Close()
		return nil, err
	}
	return m, nil
}
